package declog_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
)

// Each reader of outside bytes is fuzzed two ways (STYLE, "Fuzz two
// ways"): it never panics and its errors are its own and one line, and
// what it reads is what its writer writes again, byte for byte.

// clearError fails unless err is one of the package's: prefixed, one
// line, and bounded however long the input: outside text is clipped to 80
// bytes, at most twice a message, each byte quoted in at most 4.
func clearError(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.HasPrefix(msg, "declog: ") || strings.Contains(msg, "\n") || len(msg) > 1024 {
		t.Fatalf("an unclear error: %q", msg)
	}
}

// FuzzParseText: a text read is Text's (C2SP tlog-checkpoint's layout,
// one way to write each checkpoint), and its epoch lies in its tree.
func FuzzParseText(f *testing.F) {
	for _, c := range roundTrips(f) {
		f.Add(c.Text())
	}
	f.Add(declog.Origin(seqRoom()) + "\n05\n" + c2spRoot + "\nkeylog 1 2\n")
	f.Add(declog.Origin(seqRoom()) + "\n5\n" + c2spRoot + "\nkeylog 1 2\nkeylog 1 2\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := declog.ParseText(text, seqRoom())
		if err != nil {
			clearError(t, err)
			return
		}
		if got := c.Text(); got != text {
			t.Fatalf("ParseText(%q) = %s, whose text is %q", text, show(c), got)
		}
		if c.Room != seqRoom() || c.Size < 0 || c.Keys != nil && (c.Keys.From < 0 || c.Keys.From > c.Size) {
			t.Fatalf("ParseText(%q) = %s", text, show(c))
		}
	})
}

// FuzzPeek: what Peek reads is the note's text before its first blank
// line; signed again it opens as the same; and a note that Open opens,
// Peek reads the same.
func FuzzPeek(f *testing.F) {
	steer := key("steering")
	for _, c := range roundTrips(f) {
		f.Add(mustSign(f, c, steer))
	}
	b := mustSign(f, roundTrips(f)[3], steer)
	f.Add(append(bytes.Clone(b), "\u2014 witness.example/w AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n"...))
	f.Add(b[:len(b)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := declog.Peek(b, seqRoom())
		opened, by, oerr := declog.Open(b, seqRoom(), []sig.PublicKey{steer.Public()})
		if oerr != nil {
			clearError(t, oerr)
		} else if err != nil || !sameCheckpoint(c, opened) || by != steer.Public() {
			t.Fatalf("Open(%q) = %s, and Peek = %s, %v", b, show(opened), show(c), err)
		}
		if err != nil {
			clearError(t, err)
			return
		}
		text, _, _ := bytes.Cut(b, []byte("\n\n"))
		if c.Text() != string(text)+"\n" {
			t.Fatalf("Peek(%q) = %s, whose text is %q", b, show(c), c.Text())
		}
		again, _, err := declog.Open(mustSign(t, c, steer), seqRoom(), []sig.PublicKey{steer.Public()})
		if err != nil || !sameCheckpoint(again, c) {
			t.Fatalf("Peek(%q) = %s; signed again, Open = %s, %v", b, show(c), show(again), err)
		}
	})
}

// FuzzParseTilePath: a path read is a tile a tree of 63 bits has, and
// TilePath writes it back as it was (C2SP tlog-tiles: one path a tile).
func FuzzParseTilePath(f *testing.F) {
	for _, s := range []string{"tile/0/000", "tile/0/x001/x234/067.p/17", "tile/entries/273.p/112", "tile/7/000.p/1",
		"tile/8/0/000", "tile/0/x001", "tile/0/000.p/256", "tile/entries/x009/x223/x372/x036/x854/x775/807", "tile/data/000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tl, err := declog.ParseTilePath(p)
		if err != nil {
			clearError(t, err)
			return
		}
		if tl.H != declog.Height || tl.L < declog.EntriesLevel || tl.L > 7 || tl.N < 0 || tl.W < 1 || tl.W > declog.Width {
			t.Fatalf("ParseTilePath(%q) = %+v", p, tl)
		}
		if got := declog.TilePath(tl); got != p {
			t.Fatalf("ParseTilePath(%q) = %+v, whose path is %q", p, tl, got)
		}
		if got := refPath(tl); got != p {
			t.Fatalf("ParseTilePath(%q) = %+v, whose path by tlog-tiles is %q", p, tl, got)
		}
	})
}

// FuzzParseBundle: a bundle read has the width asked for, and
// AppendBundle writes it back as it was.
func FuzzParseBundle(f *testing.F) {
	b := bundleRef(entries(rand.New(rand.NewPCG(9, 10)), 3))
	f.Add(b, 3)
	f.Add(b, 2)
	f.Add(b[:len(b)-1], 3)
	f.Add([]byte{}, 0)
	f.Add([]byte{}, -1)
	f.Add(b[:42], 1)
	f.Fuzz(func(t *testing.T, b []byte, w int) {
		es, err := parseBundle(b, w)
		if err != nil {
			clearError(t, err)
			return
		}
		if len(es) != w || w < 1 || w > declog.Width {
			t.Fatalf("ParseBundle(%d bytes, %d) = %d entries", len(b), w, len(es))
		}
		if again := declog.AppendBundle(nil, es); !bytes.Equal(again, b) {
			t.Fatalf("ParseBundle(%x) written again is %x", b, again)
		}
	})
}

func proofSeeds(f *testing.F, first string) {
	f.Add([]byte(`{"` + first + `":5,"size":8,"proof":["` + h1 + `","` + h2 + `","` + h3 + `"]}` + "\n"))
	f.Add([]byte(`{"` + first + `":0,"size":1,"proof":[]}`))
	f.Add([]byte(`{"` + first + `":0,"size":1,"proof":null}}`))
	f.Add([]byte(proofJSON(first, "size", 1, 1<<62, 126)))
	f.Add([]byte(`{"` + first + `":0,"size":1,"proof":[],"x":1}`))
}

// FuzzParseInclusion: an inclusion proof read places a leaf in its tree
// and has at most 126 hashes; written as the route writes it, it reads
// the same.
func FuzzParseInclusion(f *testing.F) {
	proofSeeds(f, "index")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := declog.ParseInclusion(b)
		if err != nil {
			clearError(t, err)
			return
		}
		if p.Index < 0 || p.Index >= p.Size || len(p.Proof) > 126 {
			t.Fatalf("ParseInclusion(%q) = %+v", b, p)
		}
		again, _ := json.Marshal(p)
		q, err := declog.ParseInclusion(again)
		if err != nil || q.Index != p.Index || q.Size != p.Size || !sameHashes(q.Proof, p.Proof) {
			t.Fatalf("ParseInclusion(%q) = %+v; written again, %+v, %v", b, p, q, err)
		}
	})
}

// FuzzParseConsistency: likewise for a consistency proof, from a tree no
// larger than its own.
func FuzzParseConsistency(f *testing.F) {
	proofSeeds(f, "from")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := declog.ParseConsistency(b)
		if err != nil {
			clearError(t, err)
			return
		}
		if p.From < 0 || p.From > p.Size || len(p.Proof) > 126 {
			t.Fatalf("ParseConsistency(%q) = %+v", b, p)
		}
		again, _ := json.Marshal(p)
		q, err := declog.ParseConsistency(again)
		if err != nil || q.From != p.From || q.Size != p.Size || !sameHashes(q.Proof, p.Proof) {
			t.Fatalf("ParseConsistency(%q) = %+v; written again, %+v, %v", b, p, q, err)
		}
	})
}
