package conformance

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// hopKeys reads a policy's hop keys by hand, by §3.1 and §3.2's layout, by
// pathway: the fixed fields to initial (117 bytes), the tiers, three URIs,
// then each pathway's id, base, host, params, top_tier, latency_ms,
// capacity and min_share_ppm before its hops of 33 bytes. With each key its
// offset in the policy.
func hopKeys(t *testing.T, p []byte) [][]struct {
	key string
	at  int
} {
	t.Helper()
	i := 4 + 1 + 32 + 32 + 8*3 + 1 + 1 + 4*5 + 1 + 1
	i += 1 + 8*int(p[i])
	for range 3 {
		i += 2 + int(binary.LittleEndian.Uint16(p[i:]))
	}
	n := int(p[i])
	i++
	out := make([][]struct {
		key string
		at  int
	}, n)
	for w := range n {
		i += 1 + int(p[i]) // id
		i++                // base
		i += 1 + int(p[i]) // host
		k := int(p[i])
		i++
		for range k { // params: name, value
			i += 1 + int(p[i])
			i += 1 + int(p[i])
		}
		i += 1 + 4 + 4 + 4
		k = int(p[i])
		i++
		for range k {
			out[w] = append(out[w], struct {
				key string
				at  int
			}{string(p[i : i+32]), i})
			i += 33
		}
	}
	if i != len(p)-64 {
		t.Fatalf("read %d bytes of a policy of %d before its sig", i, len(p)-64)
	}
	return out
}

// TestRepeatedHopKeyAtTheEnds: §3.3's "no hop key appears twice in the
// policy" is broken by the lowest key of the policy, bytewise, and by the
// highest: the two places a reader that sorts the keys and compares
// neighbours is most likely to skip. Each vector is the base policy with one
// hop key changed (and signed again), and is refused policy_invalid at
// policy.
func TestRepeatedHopKeyAtTheEnds(t *testing.T) {
	f := committed(t)
	base := vectorNamed(t, f, "base of the refused vectors").Policy
	for _, c := range []struct {
		name          string
		lowest, inTwo bool
	}{
		{"policy: the lowest hop key twice, in one pathway", true, false},
		{"policy: the highest hop key twice, in two pathways", false, true},
	} {
		v := vectorNamed(t, f, c.name)
		if v.Outcome != Refuse || v.Reason != "policy_invalid" || v.Where != "policy" {
			t.Errorf("%s: %s %s at %s", c.name, v.Outcome, v.Reason, v.Where)
		}
		keys := hopKeys(t, v.Policy)
		var all []string
		where := map[string][]int{} // key: the pathways it is in
		for w, hs := range keys {
			for _, h := range hs {
				all = append(all, h.key)
				where[h.key] = append(where[h.key], w)
			}
		}
		slices.Sort(all)
		end := all[0]
		if !c.lowest {
			end = all[len(all)-1]
		}
		if len(where[end]) != 2 || len(slices.Compact(slices.Clone(all))) != len(all)-1 {
			t.Errorf("%s: the key at the end is in pathways %v; %d keys, %d distinct", c.name, where[end], len(all), len(slices.Compact(slices.Clone(all))))
		}
		if inTwo := where[end][0] != where[end][len(where[end])-1]; inTwo != c.inTwo {
			t.Errorf("%s: in pathways %v", c.name, where[end])
		}
		// One hop key and the signature differ from the base policy.
		if len(v.Policy) != len(base) {
			t.Fatalf("%s: %d bytes, the base %d", c.name, len(v.Policy), len(base))
		}
		changed := 0
		for _, hs := range keys {
			for _, h := range hs {
				if !bytes.Equal(v.Policy[h.at:h.at+32], base[h.at:h.at+32]) {
					changed++
					if !bytes.Equal(append(slices.Clone(v.Policy[:h.at]), v.Policy[h.at+32:len(v.Policy)-64]...),
						append(slices.Clone(base[:h.at]), base[h.at+32:len(base)-64]...)) {
						t.Errorf("%s: more than the hop key changed", c.name)
					}
				}
			}
		}
		if changed != 1 {
			t.Errorf("%s: %d hop keys changed from the base", c.name, changed)
		}
	}
}

// TestUnknownPreferredNeedsBoth: §9.1 step 6 gives unknown_preferred only
// when the decision's first pathway has no figure and the rule's has one;
// otherwise decision_mismatch. Beside the base whose rule's first (b, held
// by its buffer) has no figure, by hand (acceptedByHand), two vectors change
// only its priority: to a first with no figure (a) and to one with a figure
// (c). Both are decision_mismatch, while the contrast (a first with no
// figure where the rule's has one) is unknown_preferred.
func TestUnknownPreferredNeedsBoth(t *testing.T) {
	f := committed(t)
	const baseName = "client with a short buffer held on a pathway with no figure"
	base := vectorNamed(t, f, baseName)
	h := acceptedByHand[baseName]
	status := map[string]string{}
	for _, p := range h.pathways {
		status[p.ID] = p.Status
	}
	if status[h.priority[0]] == "figure" {
		t.Fatalf("the rule's first, %s, has a figure", h.priority[0])
	}
	// §7.1: the decision ends with the priority, a count (3) and the
	// indices, then sig.
	priority := func(d []byte) []byte { return d[len(d)-64-3 : len(d)-64] }
	for _, c := range []struct {
		name   string
		first  string
		figure bool
	}{
		{"output: stated first and the rule's first both without a figure", "a", false},
		{"output: a figure stated first, the rule's first without one", "c", true},
	} {
		v := vectorNamed(t, f, c.name)
		if v.Outcome != Refuse || v.Reason != "decision_mismatch" || v.Where != "output" {
			t.Errorf("%s: %s %s at %s", c.name, v.Outcome, v.Reason, v.Where)
		}
		d := v.Decision
		if got := h.pathways[priority(d)[0]].ID; got != c.first || (status[got] == "figure") != c.figure {
			t.Errorf("%s: first %s (%s)", c.name, got, status[got])
		}
		if len(d) != len(base.Decision) || !bytes.Equal(d[:len(d)-64-3], base.Decision[:len(d)-64-3]) {
			t.Errorf("%s: more than the priority changed", c.name)
		}
	}
	if v := vectorNamed(t, f, "output: unknown pathway preferred"); v.Reason != "unknown_preferred" || v.Where != "output" {
		t.Errorf("the contrast: %s at %s", v.Reason, v.Where)
	}
}
