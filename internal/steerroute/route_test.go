package steerroute

import (
	"testing"

	"github.com/waisteer/waisteer/policy"
)

// Issue 29: a steering request whose query gives a key of its route's parts
// another value names another room ("?room=livee1" at live1's
// "?room=live1"); one that holds the part, or none of the keys, does not.
func TestContradicts(t *testing.T) {
	p := &policy.Policy{ServerURI: "https://s.example/steer?room=live1&tier=a", ReloadURI: "https://s.example/steer?room=live1&tier=a", DecisionURI: "https://s.example/d/"}
	rs, _, err := OfPolicy(p)
	if err != nil || len(rs) != 1 {
		t.Fatalf("routes %v, %v", rs, err)
	}
	r := rs[0]
	for q, want := range map[string]bool{
		"room=live1&tier=a":                false,
		"tier=a&room=live1&_HLS_pathway=x": false,
		"":                                 false,
		"_HLS_pathway=x":                   false,
		"rooms=live2":                      false, // another key
		"room=live1":                       false, // tier left out: names nothing else
		"room=livee1&tier=a":               true,
		"room=&tier=a":                     true,
		"room":                             true, // the key with no value
		"room=live1&tier=b":                true,
		"room=live1&room=live2&tier=a":     false, // holds the part
	} {
		if got := r.Contradicts(q); got != want {
			t.Errorf("Contradicts(%q) = %v, want %v", q, got, want)
		}
	}
}
