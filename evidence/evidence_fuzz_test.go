package evidence

import (
	"slices"
	"testing"

	"github.com/waisteer/waisteer/policy"
)

// FuzzSelect: for any records, Select never panics, names for each hop
// either the tiling bruteTiling finds (§5.2) or, when there is none, records
// of strictly ascending start, at most MaxNamed in all, no digest twice; and
// what it names recomputes (§9.1 step 5) to what it computed.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{1, 5, 0, 1, 1, 1, 1, 2, 1, 1, 3, 1})
	f.Add([]byte{0, 6, 0, 0, 2, 0, 2, 2, 0, 4, 2, 1, 0, 5, 1, 0, 0, 6})
	f.Add([]byte{2, 3, 2, 2, 0x23, 2, 3, 0x24, 1, 0, 0x31, 2, 3, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		p := testPolicy(policy.Basis(1+data[0]>>7), data[0]>>4&7, []policy.Hop{edge(1), interior(2)}, []policy.Hop{edge(3)})
		a := uint64(data[0] & 3)
		b := a + uint64(data[1]&15)
		var es []Entry
		for k := 2; k+2 < len(data) && len(es) < 24; k += 3 {
			hop := 1 + data[k]%3
			start := uint64(data[k+1] & 31)
			end := start + 1 + uint64(data[k+1]>>5)
			class := []Class{Unmetered, ModelBased, ModelBased, CalibratedInstrument}[data[k]>>2&3]
			joules := uint64(data[k+2])
			if class != Unmetered {
				joules++
			}
			es = append(es, entry(rec(hop, start, end, class, joules, uint64(data[k+2]>>4))))
		}
		ev, names := computeChecked(t, p, 0, a, b, es)
		if len(names) > MaxNamed {
			t.Fatalf("%d names", len(names))
		}
		seen := map[[32]byte]bool{}
		for k, e := range names {
			if seen[e.Digest] {
				t.Fatalf("digest %s named twice", e.Digest)
			}
			seen[e.Digest] = true
			if k > 0 && e.Record.Hop == names[k-1].Record.Hop && e.Record.Start <= names[k-1].Record.Start {
				t.Fatalf("name %d does not start after the one before it", k)
			}
		}
		var hop1 []Entry
		for _, e := range names {
			if e.Record.Hop == hopKey(1) {
				hop1 = append(hop1, e)
			}
		}
		if best := bruteTiling(es, a, b); best != nil {
			if !slices.Equal(digests(hop1), digests(best)) {
				t.Fatalf("named %v, the tiling is %v", spans(hop1), spans(best))
			}
		} else if ev.Status != StatusStale {
			t.Fatalf("hop 1 has no tiling, status %d", ev.Status)
		}
	})
}
