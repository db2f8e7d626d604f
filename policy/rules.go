package policy

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// Limits of §3.3.
const (
	MaxTiers    = 8
	MaxPathways = 32
	MaxURI      = 2048
	MaxID       = 64
	MaxHost     = 255
	MaxParam    = 64  // bytes of a param's name
	MaxValue    = 255 // bytes of a param's value
	Million     = 1_000_000
)

// A Breach is one rule of §3.3 that a policy breaks.
type Breach struct {
	Code  reason.Code // reason.CloneUnknown or reason.PolicyInvalid
	Field string      // the field at fault, named as §3.1 and §3.2 name it: "window_us", "pathways[2].id"
	Value string      // the value at fault, as a message writes it
	Rule  string      // the rule it breaks, in the text's words
}

// Err is the breach as a refusal.
func (b *Breach) Err() *reason.Error {
	return reason.New(b.Code, "%s %s breaks §3.3: %s", b.Field, b.Value, b.Rule)
}

// Check runs §3.3's rules on p and returns the first it breaks as a
// *reason.Error, or nil. clone_unknown comes before policy_invalid: §3.3
// names it first, with the reading, and §9.1 step 2 lists it first.
func Check(p *Policy) error {
	if bs := Breaches(p); len(bs) > 0 {
		return bs[0].Err()
	}
	return nil
}

// Breaches returns every rule of §3.3 that p breaks: each clone_unknown, then
// each policy_invalid in the order of §3.3's bullets. A policy Check accepts
// has none. A signing tool shows them all; a reader needs only the first.
func Breaches(p *Policy) []Breach {
	var c checker
	c.run(p)
	return c.out
}

type checker struct{ out []Breach }

func (c *checker) add(code reason.Code, field, value, rule string) {
	c.out = append(c.out, Breach{Code: code, Field: field, Value: value, Rule: rule})
}

func (c *checker) invalid(field, value, rule string) {
	c.add(reason.PolicyInvalid, field, value, rule)
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

func pw(i int, field string) string { return "pathways[" + strconv.Itoa(i) + "]" + field }

func (c *checker) run(p *Policy) {
	// §3.3: a clone's base is the index of a pathway before it, one the
	// manifest has already defined (content-steering-04 §5).
	for i := range p.Pathways {
		if b := p.Pathways[i].Base; b != NoBase && int(b) >= i {
			c.add(reason.CloneUnknown, pw(i, ".base"), u(uint64(b)),
				"a clone's base is the index of a pathway before it")
		}
	}

	// §3.3: period_us is above 0, and window_us is a multiple of it above 0.
	if p.PeriodUs == 0 {
		c.invalid("period_us", "0", "period_us is above 0")
	}
	if p.WindowUs == 0 {
		c.invalid("window_us", "0", "window_us is above 0")
	} else if p.PeriodUs != 0 && p.WindowUs%p.PeriodUs != 0 {
		c.invalid("window_us", u(p.WindowUs),
			"window_us is a multiple of period_us ("+u(p.PeriodUs)+")")
	}

	// §3.3: basis is 1 or 2; 1 ≤ min_ttl_s ≤ ttl_s; hysteresis_ppm ≤ 1 000 000;
	// flags is 0 or 1.
	if p.Basis != PerByte && p.Basis != PerSecond {
		c.invalid("basis", u(uint64(p.Basis)), "basis is 1 or 2")
	}
	if p.MinTTLs < 1 {
		c.invalid("min_ttl_s", "0", "min_ttl_s is at least 1")
	} else if p.MinTTLs > p.TTLs {
		c.invalid("min_ttl_s", u(uint64(p.MinTTLs)),
			"min_ttl_s is at most ttl_s ("+u(uint64(p.TTLs))+")")
	}
	if p.HysteresisPPM > Million {
		c.invalid("hysteresis_ppm", u(uint64(p.HysteresisPPM)), "hysteresis_ppm is at most 1 000 000")
	}
	if p.Flags > FlagQueryBeforeStart {
		c.invalid("flags", u(uint64(p.Flags)), "flags is 0 or 1")
	}

	// §3.3: 1 ≤ n ≤ 8; the bitrates are above 0 and strictly ascending;
	// floor < n.
	n := len(p.Tiers)
	if n < 1 || n > MaxTiers {
		c.invalid("tiers", strconv.Itoa(n)+" tiers", "there are 1 to 8 tiers")
	}
	tier := func(i int) string { return "tiers[" + strconv.Itoa(i) + "]" }
	for i, t := range p.Tiers {
		if t == 0 {
			c.invalid(tier(i), "0", "bitrates are above 0")
		} else if i > 0 && t <= p.Tiers[i-1] {
			c.invalid(tier(i), u(t), "bitrates are strictly ascending (tier "+
				strconv.Itoa(i-1)+" is "+u(p.Tiers[i-1])+")")
		}
	}
	if int(p.Floor) >= n {
		c.invalid("floor", u(uint64(p.Floor)), "floor < n, the number of tiers ("+strconv.Itoa(n)+")")
	}

	// §3.3: each URI is 1 to 2048 bytes of RFC 3986's characters, never '#',
	// and each '%' begins a percent-encoding of two hexadecimal digits.
	c.uri("server_uri", p.ServerURI)
	c.uri("reload_uri", p.ReloadURI)
	c.uri("decision_uri", p.DecisionURI)

	// §3.3: 1 to 32 pathways; each id is 1 to 64 bytes of A-Z a-z 0-9 . - _
	// (content-steering-04 §2), and no two are equal.
	if k := len(p.Pathways); k < 1 || k > MaxPathways {
		c.invalid("pathways", strconv.Itoa(k)+" pathways", "there are 1 to 32 pathways")
	}
	for i := range p.Pathways {
		id := p.Pathways[i].ID
		switch {
		case len(id) < 1 || len(id) > MaxID:
			c.invalid(pw(i, ".id"), strconv.Quote(id)+" ("+strconv.Itoa(len(id))+" bytes)",
				"an id is 1 to 64 bytes")
		case !all(id, isIDChar):
			c.invalid(pw(i, ".id"), strconv.Quote(id), "an id is bytes of A-Z a-z 0-9 . - _")
		}
		for j := range i {
			if p.Pathways[j].ID == id {
				c.invalid(pw(i, ".id"), strconv.Quote(id),
					"no two ids are equal (pathways["+strconv.Itoa(j)+"] has it)")
				break
			}
		}
	}

	// §3.3: initial is the index of a pathway that is not a clone.
	if int(p.Initial) >= len(p.Pathways) {
		c.invalid("initial", u(uint64(p.Initial)), "initial is the index of a pathway")
	} else if p.Pathways[p.Initial].IsClone() {
		c.invalid("initial", u(uint64(p.Initial)), "initial is the index of a pathway that is not a clone")
	}

	// §3.3: a pathway that is not a clone has no host and no params; a
	// clone's host is at most 255 bytes of A-Z a-z 0-9 - .; its params have
	// names of 1 to 64 bytes and values of 0 to 255, each of unreserved
	// characters and percent-encodings, names strictly ascending bytewise.
	for i := range p.Pathways {
		w := &p.Pathways[i]
		if !w.IsClone() {
			if w.Host != "" {
				c.invalid(pw(i, ".host"), strconv.Quote(w.Host), "a pathway that is not a clone has no host")
			}
			if len(w.Params) > 0 {
				c.invalid(pw(i, ".params"), strconv.Itoa(len(w.Params))+" params",
					"a pathway that is not a clone has no params")
			}
			continue
		}
		if len(w.Host) > MaxHost {
			c.invalid(pw(i, ".host"), strconv.Itoa(len(w.Host))+" bytes", "a clone's host is at most 255 bytes")
		} else if !all(w.Host, isHostChar) {
			c.invalid(pw(i, ".host"), strconv.Quote(w.Host), "a clone's host is bytes of A-Z a-z 0-9 - .")
		}
		if len(w.Params) > 255 {
			// Not a rule of §3.3, but the layout counts params in a u8 (§3.2).
			c.invalid(pw(i, ".params"), strconv.Itoa(len(w.Params))+" params",
				"the layout counts params in a u8 (§3.2)")
		}
		for j, q := range w.Params {
			f := func(s string) string { return pw(i, ".params["+strconv.Itoa(j)+"]"+s) }
			switch {
			case len(q.Name) < 1 || len(q.Name) > MaxParam:
				c.invalid(f(".name"), strconv.Quote(q.Name)+" ("+strconv.Itoa(len(q.Name))+" bytes)",
					"a param's name is 1 to 64 bytes")
			case !unreservedOrEncoded(q.Name):
				c.invalid(f(".name"), strconv.Quote(q.Name),
					"a param's name is RFC 3986 unreserved characters and percent-encodings")
			}
			switch {
			case len(q.Value) > MaxValue:
				c.invalid(f(".value"), strconv.Itoa(len(q.Value))+" bytes", "a param's value is 0 to 255 bytes")
			case !unreservedOrEncoded(q.Value):
				c.invalid(f(".value"), strconv.Quote(q.Value),
					"a param's value is RFC 3986 unreserved characters and percent-encodings")
			}
			if j > 0 && q.Name <= w.Params[j-1].Name {
				c.invalid(f(".name"), strconv.Quote(q.Name),
					"params' names are in strictly ascending bytewise order (after "+
						strconv.Quote(w.Params[j-1].Name)+")")
			}
		}
	}

	// §3.3: each top_tier < n; each pathway has at least one hop and at least
	// one edge hop; each place is 1 or 2; no hop key appears twice in the
	// policy, in one pathway or in two.
	total := 0
	for i := range p.Pathways {
		w := &p.Pathways[i]
		total += len(w.Hops)
		if int(w.TopTier) >= n {
			c.invalid(pw(i, ".top_tier"), u(uint64(w.TopTier)),
				"top_tier < n, the number of tiers ("+strconv.Itoa(n)+")")
		}
		if len(w.Hops) == 0 {
			c.invalid(pw(i, ".hops"), "0 hops", "each pathway has at least one hop")
		} else if !slices.ContainsFunc(w.Hops, func(h Hop) bool { return h.Place == Edge }) {
			c.invalid(pw(i, ".hops"), "no edge hop", "each pathway has at least one edge hop")
		}
		if len(w.Hops) > 255 {
			// Not a rule of §3.3, but the layout counts hops in a u8 (§3.2).
			c.invalid(pw(i, ".hops"), strconv.Itoa(len(w.Hops))+" hops",
				"the layout counts hops in a u8 (§3.2)")
		}
		for k, h := range w.Hops {
			if h.Place != Edge && h.Place != Interior {
				c.invalid(pw(i, ".hops["+strconv.Itoa(k)+"].place"), u(uint64(h.Place)), "each place is 1 or 2")
			}
		}
	}
	c.uniqueHops(p, total)

	// §3.3: the sum of the min_share_ppm is at most 1 000 000. Up to 32 u32s
	// (or more, in a value that breaks the count) sum within a u64.
	var sum uint64
	for i := range p.Pathways {
		before := sum
		sum += uint64(p.Pathways[i].MinSharePPM)
		if sum > Million && before <= Million {
			c.invalid(pw(i, ".min_share_ppm"), u(uint64(p.Pathways[i].MinSharePPM))+" (sum "+u(sum)+")",
				"the sum of the min_share_ppm is at most 1 000 000")
		}
	}
}

// uniqueHops finds a hop key that appears twice (§3.3), by sorting the keys;
// the few of a usual policy are sorted on the stack.
func (c *checker) uniqueHops(p *Policy, total int) {
	var buf [64]sig.PublicKey
	keys := buf[:0]
	if total > len(buf) {
		keys = make([]sig.PublicKey, 0, total)
	}
	for i := range p.Pathways {
		for _, h := range p.Pathways[i].Hops {
			keys = append(keys, h.Key)
		}
	}
	slices.SortFunc(keys, func(a, b sig.PublicKey) int { return bytes.Compare(a[:], b[:]) })
	for j := 1; j < len(keys); j++ {
		if keys[j] != keys[j-1] || (j > 1 && keys[j] == keys[j-2]) {
			continue
		}
		c.repeated(p, keys[j])
	}
}

// repeated reports the second place key appears in the policy's order.
func (c *checker) repeated(p *Policy, key sig.PublicKey) {
	seen := ""
	for i := range p.Pathways {
		for k, h := range p.Pathways[i].Hops {
			if h.Key != key {
				continue
			}
			f := pw(i, ".hops["+strconv.Itoa(k)+"].key")
			if seen == "" {
				seen = f
				continue
			}
			c.invalid(f, key.String(), fmt.Sprintf("no hop key appears twice in the policy (%s has it)", seen))
			return
		}
	}
}

func all(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9'
}

// isIDChar: a pathway ID's bytes (content-steering-04 §2).
func isIDChar(b byte) bool { return isAlnum(b) || b == '.' || b == '-' || b == '_' }

// isHostChar: a clone host's bytes (§3.3).
func isHostChar(b byte) bool { return isAlnum(b) || b == '-' || b == '.' }

// isUnreserved: RFC 3986 §2.3.
func isUnreserved(b byte) bool {
	return isAlnum(b) || b == '-' || b == '.' || b == '_' || b == '~'
}

// isReserved: RFC 3986 §2.2, gen-delims and sub-delims.
func isReserved(b byte) bool {
	switch b {
	case ':', '/', '?', '#', '[', ']', '@', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
		return true
	}
	return false
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// percent reports whether s[i] == '%' begins a percent-encoding of two
// hexadecimal digits (RFC 3986 §2.1).
func percent(s string, i int) bool {
	return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
}

// unreservedOrEncoded: a param's name or value (§3.3).
func unreservedOrEncoded(s string) bool {
	for i := 0; i < len(s); i++ {
		switch {
		case isUnreserved(s[i]):
		case s[i] == '%' && percent(s, i):
			i += 2
		default:
			return false
		}
	}
	return true
}

// uri checks one of the policy's URIs (§3.3).
func (c *checker) uri(field, s string) {
	if len(s) < 1 || len(s) > MaxURI {
		c.invalid(field, strconv.Itoa(len(s))+" bytes", "a URI is 1 to 2048 bytes")
		return
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b == '#':
			c.invalid(field, strconv.Quote(s), "a URI never holds '#' (byte "+strconv.Itoa(i)+")")
			return
		case b == '%':
			if !percent(s, i) {
				c.invalid(field, strconv.Quote(s),
					"each '%' of a URI begins a percent-encoding of two hexadecimal digits (byte "+strconv.Itoa(i)+")")
				return
			}
			i += 2
		case isUnreserved(b) || isReserved(b):
		default:
			c.invalid(field, strconv.Quote(s),
				"a URI is RFC 3986's unreserved and reserved characters and '%' (byte "+strconv.Itoa(i)+")")
			return
		}
	}
}
