package source

import (
	"testing"

	"github.com/waisteer/waisteer/internal/tomlfile"
)

// Durations convert exactly to their unit, or are refused (§2: every
// quantity is an integer, never rounded).
func TestParseDuration_2(t *testing.T) {
	for _, c := range []struct {
		in   string
		u    durationUnit
		want uint64
		ok   bool
	}{
		{"2s", inMicros, 2_000_000, true},
		{"1m30s", inMicros, 90_000_000, true},
		{"1.5s", inMillis, 1500, true},
		{"1.5s", inSeconds, 0, false},
		{"500ms", inMicros, 500_000, true},
		{"500us", inMicros, 500, true},
		{"500µs", inMicros, 500, true},
		{"1500ns", inMicros, 0, false},
		{"2000ns", inMicros, 2, true},
		{"2h", inSeconds, 7200, true},
		{"0", inSeconds, 0, true},
		{"0.0000015s", inMicros, 0, false},
		{"18446744073709.551615s", inMicros, 1<<64 - 1, true},
		{"18446744073709.551616s", inMicros, 0, false},
		{"4294967.296s", inMillis, 0, false},
		{"", inSeconds, 0, false},
		{"s", inSeconds, 0, false},
		{"1", inSeconds, 0, false},
		{"1x", inSeconds, 0, false},
		{"-1s", inSeconds, 0, false},
		{".5s", inMillis, 0, false},
		{"1.s", inMillis, 0, false},
		{"1s ", inSeconds, 0, false},
	} {
		got, err := parseDuration(c.in, c.u)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseDuration(%q, %s) = %d, %v; want %d, ok %v", c.in, c.u.name, got, err, c.want, c.ok)
		}
	}
}

// Shares convert exactly to ppm.
func TestShare_2(t *testing.T) {
	for _, c := range []struct {
		in   any
		want uint32
		ok   bool
	}{
		{int64(50000), 50000, true},
		{"5%", 50000, true},
		{"0.25%", 2500, true},
		{"100%", 1_000_000, true},
		{"0.0001%", 1, true},
		{"0.00001%", 0, false},
		{"50000ppm", 50000, true},
		{"5", 0, false},
		{"5 %", 0, false},
		{int64(-1), 0, false},
		{int64(1 << 32), 0, false},
		{0.05, 0, false},
	} {
		c0 := &compiler{File: &tomlfile.File{}}
		got := c0.share("k", c.in, true)
		if c0.Failed() == c.ok || got != c.want {
			t.Errorf("share(%v) = %d, %v; want %d, ok %v", c.in, got, c0.Err(), c.want, c.ok)
		}
	}
}
