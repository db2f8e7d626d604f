package limit

import (
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// TestTakeByHand: a bucket of 2 a second, burst 5, followed by hand (issue
// 26 item 5, "a budget ... per second with a burst").
func TestTakeByHand(t *testing.T) {
	tb := NewTable[string](Rate{PerSecond: 2, Burst: 5}, 10)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		ms   int
		n    float64
		want Outcome
		left float64 // tokens after, by hand
	}{
		{0, 1, Taken, 4}, {0, 1, Taken, 3}, {0, 3, Taken, 0}, {0, 1, Empty, 0},
		{250, 1, Empty, 0.5}, // 0.25 s × 2 = 0.5 token
		{500, 1, Taken, 0},   // 0.5 + 0.5
		{3000, 5, Taken, 0},  // 2.5 s × 2 = 5, the burst
		{10000, 6, Empty, 5}, // never more than the burst
		{10000, 5, Taken, 0},
		{9000, 1, Empty, 0}, // a clock going back adds nothing
	}
	for i, s := range steps {
		if got := tb.Take("a", s.n, at(s.ms)); got != s.want {
			t.Fatalf("step %d (%d ms, %v tokens): %v, want %v", i, s.ms, s.n, got, s.want)
		}
		if b := tb.m["a"]; b.tokens < s.left-1e-9 || b.tokens > s.left+1e-9 {
			t.Fatalf("step %d: %v tokens left, want %v", i, b.tokens, s.left)
		}
	}
	// Another key has its own bucket.
	if tb.Take("b", 5, at(9000)) != Taken {
		t.Fatal("a new key starts with a full bucket")
	}
}

func TestGive(t *testing.T) {
	tb := NewTable[int](Rate{PerSecond: 1, Burst: 2}, 10)
	tb.Take(1, 2, t0)
	tb.Give(1, 1)
	if tb.Take(1, 1, t0) != Taken || tb.Take(1, 1, t0) != Empty {
		t.Fatal("a token given back is taken once")
	}
	tb.Give(1, 10)
	if tb.Take(1, 2, t0) != Taken || tb.Take(1, 1, t0) != Empty {
		t.Fatal("a bucket holds no more than its burst")
	}
	tb.Give(2, 1) // a key not held: nothing
	if tb.Len() != 1 {
		t.Fatalf("%d keys, want 1", tb.Len())
	}
}

// TestBounded: a table holds at most its size of keys; a new key past it
// is Full until a sweep (at most once a second) forgets full buckets.
func TestBounded(t *testing.T) {
	tb := NewTable[int](Rate{PerSecond: 1, Burst: 1}, 3)
	for k := range 3 {
		if tb.Take(k, 1, t0) != Taken {
			t.Fatal(k)
		}
	}
	// The first take past the size sweeps, finds nothing full, refuses.
	if got := tb.Take(3, 1, t0); got != Full {
		t.Fatalf("a 4th key: %v, want Full", got)
	}
	// Half a second on, no bucket is full, and no sweep is due anyway.
	if got := tb.Take(3, 1, t0.Add(500*time.Millisecond)); got != Full {
		t.Fatalf("a 4th key after 0.5 s: %v, want Full", got)
	}
	// A second on, every bucket is full again: the sweep forgets them.
	if got := tb.Take(3, 1, t0.Add(1100*time.Millisecond)); got != Taken {
		t.Fatalf("a 4th key after 1.1 s: %v, want Taken", got)
	}
	if n := tb.Len(); n != 1 {
		t.Fatalf("%d keys after the sweep, want 1", n)
	}
	if n := tb.Sweep(t0.Add(3 * time.Second)); n != 0 {
		t.Fatalf("%d keys after a sweep at 3 s, want 0", n)
	}
}

func TestOff(t *testing.T) {
	tb := NewTable[int](Rate{}, 1)
	for k := range 100 {
		if tb.Take(k, 1e9, t0) != Taken {
			t.Fatal("a rate of 0 limits nothing")
		}
	}
	if tb.Len() != 0 {
		t.Fatal("a table with no budget keeps no key")
	}
}

func TestKeys(t *testing.T) {
	for _, c := range []struct{ addr, address, network string }{
		{"192.0.2.77", "192.0.2.77/32", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.77/32", "192.0.2.0/24"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", "2001:db8:1::/48"},
		{"fe80::1%eth0", "fe80::/64", "fe80::/48"},
		{"127.12.34.56", "127.12.34.56/32", "127.12.34.0/24"},
	} {
		a := netip.MustParseAddr(c.addr)
		if got := Address(a).String(); got != c.address {
			t.Errorf("Address(%s) = %s, want %s", c.addr, got, c.address)
		}
		if got := Network(a).String(); got != c.network {
			t.Errorf("Network(%s) = %s, want %s", c.addr, got, c.network)
		}
	}
	if Address(netip.Addr{}) != (netip.Prefix{}) || Network(netip.Addr{}) != (netip.Prefix{}) {
		t.Error("the zero address's keys are the zero prefix")
	}
}

func TestParseRemote(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" for no address
	}{
		{"192.0.2.1:5000", "192.0.2.1"}, {"[2001:db8::1]:443", "2001:db8::1"}, {"192.0.2.1", "192.0.2.1"},
		{"2001:db8::1", "2001:db8::1"}, {"[2001:db8::1]", "2001:db8::1"}, {"[::ffff:10.0.0.1]:1", "10.0.0.1"},
		{"", ""}, {"pipe", ""}, {"192.0.2.1:", ""}, {"300.0.0.1:1", ""}, {"@", ""},
	} {
		a, ok := ParseRemote(c.in)
		if ok != (c.want != "") || ok && a.String() != c.want {
			t.Errorf("ParseRemote(%q) = %v, %v; want %q", c.in, a, ok, c.want)
		}
	}
}

// TestClient: X-Forwarded-For is read from the right, through trusted
// proxies only (the "rightmost address not in the trusted set").
func TestClient(t *testing.T) {
	trusted := Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ff::/48")}
	peerProxy := netip.MustParseAddr("10.1.1.1")
	peerOther := netip.MustParseAddr("198.51.100.9")
	for _, c := range []struct {
		name  string
		p     Proxies
		peer  netip.Addr
		xff   []string
		wantS string
	}{
		{"no proxies trusted: the peer", nil, peerProxy, []string{"203.0.113.5"}, "10.1.1.1"},
		{"an untrusted peer's header is not read", trusted, peerOther, []string{"203.0.113.5"}, "198.51.100.9"},
		{"one proxy", trusted, peerProxy, []string{"203.0.113.5"}, "203.0.113.5"},
		{"a client's own value left of it is not read", trusted, peerProxy, []string{"1.2.3.4, 203.0.113.5"}, "203.0.113.5"},
		{"two proxies", trusted, peerProxy, []string{"1.2.3.4, 203.0.113.5, 10.9.9.9"}, "203.0.113.5"},
		{"several fields, in order", trusted, peerProxy, []string{"1.2.3.4", "203.0.113.5", "10.9.9.9"}, "203.0.113.5"},
		{"IPv6 with a port", trusted, peerProxy, []string{"[2001:db8::7]:4711, [2001:db8:ff::2]:80"}, "2001:db8::7"},
		{"every hop trusted: the leftmost", trusted, peerProxy, []string{"10.2.2.2, 10.3.3.3"}, "10.2.2.2"},
		{"no header: the proxy", trusted, peerProxy, nil, "10.1.1.1"},
		{"empty values skipped", trusted, peerProxy, []string{" , 203.0.113.5 ,, "}, "203.0.113.5"},
		{"garbage stops at the proxy that wrote it", trusted, peerProxy, []string{"203.0.113.5, unknown, 10.9.9.9"}, "10.9.9.9"},
	} {
		if got := c.p.Client(c.peer, c.xff).String(); got != c.wantS {
			t.Errorf("%s: %s, want %s", c.name, got, c.wantS)
		}
	}
}

// FuzzClient: X-Forwarded-For is outside bytes; whatever it holds, Client
// answers an address that is the peer, a trusted proxy's, or one the
// header names, and never panics.
func FuzzClient(f *testing.F) {
	f.Add("203.0.113.5", "1.2.3.4, 10.0.0.1")
	f.Add("[2001:db8::1]:80,,", "x")
	f.Add("", "%zone,::ffff:1.2.3.4")
	trusted := Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::/0")}
	peer := netip.MustParseAddr("10.0.0.2")
	f.Fuzz(func(t *testing.T, a, b string) {
		got := trusted.Client(peer, []string{a, b})
		if !got.IsValid() {
			t.Fatalf("Client(%q, %q) is no address", a, b)
		}
		if _, ok := ParseRemote(a); ok {
			Address(got)
			Network(got)
		}
	})
}
