package pool

import (
	"slices"
	"strings"
	"testing"
)

// TestOrderIsSteers: Order gives a session the order its manifest would
// give it (the station seed's "the same session always ranks the edges the
// same way"), carries the session in a query that Steer reads back as the
// same session, and counts no manifest. A pool of buckets carries the
// bucket too; a pool of no edges has no order.
func TestOrderIsSteers(t *testing.T) {
	for _, c := range []Config{config("a", 1, "b", 2, "c", 3, "d", 0), bucketsConfig()} {
		p := newPool(t, c)
		for i := 0; i < 200; i++ {
			o, ok := p.Order(&Request{})
			if !ok {
				t.Fatal("no order")
			}
			if !strings.HasPrefix(o.Query, "session="+o.Session.String()) {
				t.Fatalf("query %q does not carry the session %s", o.Query, o.Session)
			}
			m, _, s := steer(t, p, o.Query)
			if s != o.Session || !slices.Equal(m.Priority, o.Order) {
				t.Fatalf("the manifest for %q: session %s order %v; Order gave %s %v", o.Query, s, m.Priority, o.Session, o.Order)
			}
			again, _ := p.Order(&Request{RawQuery: o.Query})
			if again.Session != o.Session || !slices.Equal(again.Order, o.Order) {
				t.Fatalf("Order again: %+v, first %+v", again, o)
			}
		}
		var firsts uint64
		for _, e := range p.Edges() {
			firsts += e.First
		}
		if firsts != 200 {
			t.Errorf("%d manifests counted, want the 200 Steer wrote and none of Order's", firsts)
		}
	}
	empty := config()
	if _, ok := newPool(t, empty).Order(&Request{}); ok {
		t.Error("a pool of no edges gave an order")
	}
}

// bucketsConfig is the zh seed's 50/50 table.
func bucketsConfig() Config {
	c := config("CDN1", 1, "CDN2", 1)
	c.Assign = AssignBuckets
	c.Rules = []Rule{{First: 1, Last: 6, Priority: []string{"CDN1", "CDN2"}}, {First: 7, Last: 12, Priority: []string{"CDN2", "CDN1"}}}
	return c
}
