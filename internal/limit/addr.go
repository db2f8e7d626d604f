package limit

import (
	"net/netip"
	"strings"
)

// The keys of an address. A client is one IPv4 address, or one IPv6 /64:
// a host picks its own addresses in its link's /64 and changes them at
// will (RFC 8981's temporary addresses), so a /64 is what one household
// holds. Its network is the IPv4 /24 or the IPv6 /48 around it, what one
// site or one block of a carrier's NAT holds (RFC 6177 gives a site a /48
// to /56).
const (
	addressBits4, networkBits4 = 32, 24
	addressBits6, networkBits6 = 64, 48
)

// Address is the key of a client's address a: the address itself for IPv4
// (an IPv4-mapped IPv6 address is its IPv4 address), its /64 for IPv6. The
// zero Addr (a request whose address does not read) has the zero Prefix.
func Address(a netip.Addr) netip.Prefix {
	return prefix(a, addressBits4, addressBits6)
}

// Network is the key of the network of a: its IPv4 /24 or IPv6 /48.
func Network(a netip.Addr) netip.Prefix {
	return prefix(a, networkBits4, networkBits6)
}

func prefix(a netip.Addr, bits4, bits6 int) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := bits6
	if a.Is4() {
		bits = bits4
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// ParseRemote reads a peer's address as net/http's Request.RemoteAddr
// holds it ("192.0.2.1:5000", "[2001:db8::1]:5000") or a bare address;
// false for anything else.
func ParseRemote(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// Proxies are the networks of the proxies (TLS terminators, load
// balancers) a server trusts to say whom a request came from, in
// X-Forwarded-For (Client) or Forwarded, and what it reached
// (internal/reach). Nil trusts none: the peer is the client.
type Proxies []netip.Prefix

// Trusts reports whether a is in one of the networks.
func (p Proxies) Trusts(a netip.Addr) bool {
	for _, n := range p {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address a request came from: its peer's, unless the peer
// is a trusted proxy; then X-Forwarded-For's (the values of every field of
// that name, in order) read from the right, each proxy having appended the
// address it was reached from, up to the first address that is not a
// trusted proxy's. What a client wrote itself is left of that, and never
// read. A value that does not read as an address stops the walk at the
// proxy that wrote it: the request is then the proxy's own.
func (p Proxies) Client(peer netip.Addr, forwarded []string) netip.Addr {
	if len(p) == 0 || !p.Trusts(peer) {
		return peer
	}
	a, _ := p.Walk(peer, forwarded)
	return a
}

// Walk reads X-Forwarded-For's values from the right as Client does,
// from a peer already trusted, and says whether every value it read was
// an address: false when one that is not stopped the walk.
func (p Proxies) Walk(peer netip.Addr, forwarded []string) (netip.Addr, bool) {
	at := peer
	for i := len(forwarded) - 1; i >= 0; i-- {
		field := forwarded[i]
		for field != "" {
			var v string
			if j := strings.LastIndexByte(field, ','); j >= 0 {
				field, v = field[:j], field[j+1:]
			} else {
				field, v = "", field
			}
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			a, ok := ParseRemote(v)
			if !ok {
				return at, false
			}
			if !p.Trusts(a) {
				return a, true
			}
			at = a
		}
	}
	return at, true
}
