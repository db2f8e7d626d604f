package origin

import "testing"

// TestByteRange: the Range reader (RFC 9110 §14.1.2) on values written by
// hand for a file of 1000 bytes: one range read; several ranges, other
// units and bad numbers ignored (not ok: the whole file); a start past the
// end, or a zero suffix, unsatisfiable (first −1).
func TestByteRange(t *testing.T) {
	for v, want := range map[string][3]int64{
		"bytes=0-0": {0, 0, 1}, "bytes=0-999": {0, 999, 1}, "bytes=500-": {500, 999, 1}, "bytes=-1": {999, 999, 1},
		"bytes=-5000": {0, 999, 1}, "bytes=990-5000": {990, 999, 1}, " bytes=1-2 ": {1, 2, 1},
		"bytes=1000-": {-1, 0, 1}, "bytes=-0": {-1, 0, 1},
		"bytes=0-1,5-6": {0, 0, 0}, "items=0-1": {0, 0, 0}, "bytes=2-1": {0, 0, 0}, "bytes=a-": {0, 0, 0},
		"bytes=-": {0, 0, 0}, "bytes=+1-2": {0, 0, 0}, "bytes=99999999999999999999-": {0, 0, 0}, "bytes=1": {0, 0, 0},
	} {
		a, b, ok := byteRange(v, 1000)
		got := [3]int64{a, b, 0}
		if ok {
			got[2] = 1
		}
		if !ok {
			got[0], got[1] = 0, 0
		}
		if got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

// FuzzByteRange: any Range value a player sends, for any size, is read
// without a panic (issue 28, "every reader of outside bytes"), and a range
// read lies within the file: 0 <= first <= last < size, or first −1 for
// one unsatisfiable; a value that reads is "bytes=" and one range.
func FuzzByteRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=-5", "bytes=10-", "bytes=5-1", "bytes=0-1,2-3", "bytes=99999999999999999999-", " bytes= 1-2", "items=1-2"} {
		f.Add(s, int64(1000))
	}
	f.Fuzz(func(t *testing.T, v string, size int64) {
		if size < 0 {
			size = -size
		}
		if size < 0 {
			return
		}
		first, last, ok := byteRange(v, size)
		if !ok {
			return
		}
		if first == -1 {
			return
		}
		if first < 0 || first > last || last >= size {
			t.Fatalf("%q of %d: %d-%d", v, size, first, last)
		}
	})
}
