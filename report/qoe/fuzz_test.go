package qoe

import (
	"net/netip"
	"testing"
	"time"
)

// FuzzAggregator drives an aggregator with reports read off the input,
// four bytes each (a session, a client, a throughput, a step of the
// clock, whose low bit also picks one of two cells), evaluated every
// eighth report, and checks after each evaluation the invariants of
// issue 26 item 2 against a recount of the cell's samples: no client holds
// more than PerClient sessions of a cell, the index of clients names
// exactly the sessions kept, and the figures count them. Evaluate is the
// server's background loop (a panic there stops every steerer).
func FuzzAggregator(f *testing.F) {
	f.Add([]byte("\x01\x01\x10\x00\x02\x01\x10\x00\x03\x01\x10\x00\x04\x01\x10\x00\x05\x01\x10\x00\x01\x02\x10\x05"))
	f.Add([]byte("\x00\x00\x00\xff\x00\x01\x00\xff\x00\x00\x00\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := New(Config{Floor: 100, MinSessions: 3, Window: 10 * time.Second, Hold: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		now := t0
		for i := 0; i+4 <= len(in); i += 4 {
			s, c, tp, step := in[i], in[i+1], in[i+2], in[i+3]
			now = now.Add(time.Duration(step) * 100 * time.Millisecond)
			var client Client
			if c != 0 { // 0: the unknown client
				client = ClientOf(netip.AddrFrom4([4]byte{10, 0, 0, c % 8}))
			}
			k := Key{Pathway: "cdn-a", Cohort: string('a' + rune(step&1))}
			// Reports may come a little out of order.
			a.Add(k, session(int(s%32)), client, uint64(tp)*8, tp != 0, 0, false, now.Add(-time.Duration(s%3)*time.Second))
			if (i/4)%8 == 7 {
				a.Evaluate(now)
				check(t, a)
			}
		}
		a.Evaluate(now)
		check(t, a)
	})
}

func check(t *testing.T, a *Aggregator) {
	t.Helper()
	figs := map[Key]Figures{}
	for _, f := range a.Figures() {
		figs[f.Key] = f
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for k, c := range a.cells {
		per := map[Client]int{}
		for _, v := range c.latest {
			per[v.client]++
		}
		indexed := 0
		for cl, h := range c.clients {
			if h.n < 1 || h.n > PerClient || per[cl] != h.n {
				t.Fatalf("%v: client %v holds %d sessions in the index, %d in the samples", k, cl, h.n, per[cl])
			}
			for _, s := range h.s[:h.n] {
				if v, ok := c.latest[s]; !ok || v.client != cl {
					t.Fatalf("%v: the index names a session of %v that is not its", k, cl)
				}
			}
			indexed += h.n
		}
		if indexed != len(c.latest) || len(per) != len(c.clients) {
			t.Fatalf("%v: %d sessions of %d clients indexed; %d sessions of %d clients kept", k, indexed, len(c.clients), len(c.latest), len(per))
		}
		if f := figs[k]; f.Sessions != len(c.latest) || f.Clients != len(c.clients) {
			t.Fatalf("%v: figures %d sessions of %d clients; kept %d of %d", k, f.Sessions, f.Clients, len(c.latest), len(c.clients))
		}
	}
}

// FuzzParseClient: whatever a request's RemoteAddr holds, ParseClient
// never panics and gives an IPv4 address, an IPv6 /64 (its low 64 bits
// zero, no zone) or the unknown client; and an address read with or
// without its port is one client.
func FuzzParseClient(f *testing.F) {
	for _, s := range []string{"192.0.2.1:443", "[2001:db8::1%eth0]:1", "::ffff:10.0.0.1", "", "@", "[::1]", "1.2.3.4:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseClient(s)
		if !c.a.IsValid() {
			return
		}
		if c.a.Zone() != "" || c.a.Is4In6() {
			t.Fatalf("%q: client %v", s, c)
		}
		if c.a.Is6() {
			b := c.a.As16()
			for _, x := range b[8:] {
				if x != 0 {
					t.Fatalf("%q: client %v is not a /64", s, c)
				}
			}
		}
		if ap, err := netip.ParseAddrPort(s); err == nil && ParseClient(netip.AddrPortFrom(ap.Addr(), 1).String()) != c {
			t.Fatalf("%q: another port, another client", s)
		}
	})
}
