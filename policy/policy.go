package policy

import (
	"bytes"
	"errors"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/wire"
)

// Sizes of the fixed parts of the layout (§3.1, §3.2), for bounding what a
// count may announce before the bytes it announces are read.
const (
	minPathwaySize = 1 + 1 + 1 + 1 + 1 + 4 + 4 + 4 + 1 // empty id, host, params and hops
	hopSize        = sig.PublicKeySize + 1
)

// Parse reads a policy, WSP1, from exactly the bytes b: COMPANION §1's reading
// (truncated, malformed, unknown_version), then §3.3's rules (clone_unknown,
// then policy_invalid). Every refusal is a *reason.Error.
//
// The policy keeps a copy of b and its digest (§3.4): Bytes and Digest return
// them without work. It does not verify the signature: §9.1 step 2 checks the
// room between the rules and the signature, so VerifySignature is separate.
func Parse(b []byte) (*Policy, error) {
	r, err := wire.Open(b, Magic)
	if err != nil {
		return nil, err
	}
	// One copy of the input serves as the raw bytes, and one string of it
	// holds every id, URI, host and param as a substring of it.
	raw := bytes.Clone(b)
	text := string(raw)
	str := func(n int) string {
		off := len(raw) - r.Len()
		r.Bytes(n)
		if r.Short() {
			return ""
		}
		return text[off : off+n]
	}

	p := &Policy{raw: raw}
	r.Copy(p.Room[:])
	r.Copy(p.Signer[:])
	p.PeriodUs = r.U64()
	p.WindowUs = r.U64()
	p.LagUs = r.U64()
	p.Basis = Basis(r.U8())
	p.Floor = r.U8()
	p.LatencyCeilingMs = r.U32()
	p.MinBufferMs = r.U32()
	p.HysteresisPPM = r.U32()
	p.TTLs = r.U32()
	p.MinTTLs = r.U32()
	p.Flags = r.U8()
	p.Initial = r.U8()
	if n := int(r.U8()); n > 0 && !r.Short() {
		p.Tiers = make([]uint64, 0, min(n, r.Len()/8+1))
		for range n {
			if r.Short() {
				break
			}
			p.Tiers = append(p.Tiers, r.U64())
		}
	}
	p.ServerURI = str(int(r.U16()))
	p.ReloadURI = str(int(r.U16()))
	p.DecisionURI = str(int(r.U16()))

	if n := int(r.U8()); n > 0 && !r.Short() {
		p.Pathways = make([]Pathway, 0, min(n, r.Len()/minPathwaySize+1))
		// Every hop of the policy shares one array: each hop takes 33 of the
		// bytes that remain, so their number bounds it.
		hops := make([]Hop, 0, r.Len()/hopSize)
		for range n {
			if r.Short() {
				break
			}
			var w Pathway
			w.ID = str(int(r.U8()))
			w.Base = r.U8()
			w.Host = str(int(r.U8()))
			if k := int(r.U8()); k > 0 && !r.Short() {
				w.Params = make([]Param, 0, min(k, r.Len()/2+1))
				for range k {
					if r.Short() {
						break
					}
					name := str(int(r.U8()))
					value := str(int(r.U8()))
					w.Params = append(w.Params, Param{Name: name, Value: value})
				}
			}
			w.TopTier = r.U8()
			w.LatencyMs = r.U32()
			w.Capacity = r.U32()
			w.MinSharePPM = r.U32()
			if k := int(r.U8()); k > 0 && !r.Short() {
				start := len(hops)
				for range k {
					if r.Short() {
						break
					}
					var h Hop
					r.Copy(h.Key[:])
					h.Place = Place(r.U8())
					hops = append(hops, h)
				}
				// A read that ran short may have moved hops to a new
				// array; it is refused below, so the slice is never used.
				w.Hops = hops[start:len(hops):len(hops)]
			}
			p.Pathways = append(p.Pathways, w)
		}
	}
	r.Copy(p.Sig[:])
	if err := r.Finish("policy"); err != nil {
		return nil, err
	}
	p.digest = sig.Digest(raw[:len(raw)-sig.SignatureSize])
	if err := Check(p); err != nil {
		return nil, err
	}
	return p, nil
}

// AppendBody appends the bytes of p before sig (§3.1, §3.2): the bytes its
// digest covers and its signature signs (§3.4). For a policy that Check
// accepts it is the exact inverse of Parse; for one it refuses, a length too
// long for its field is cut to the field's width.
func AppendBody(dst []byte, p *Policy) []byte {
	b := append(dst, Magic...)
	b = append(b, 1) // version
	b = append(b, p.Room[:]...)
	b = append(b, p.Signer[:]...)
	b = wire.AppendU64(b, p.PeriodUs)
	b = wire.AppendU64(b, p.WindowUs)
	b = wire.AppendU64(b, p.LagUs)
	b = append(b, byte(p.Basis), p.Floor)
	b = wire.AppendU32(b, p.LatencyCeilingMs)
	b = wire.AppendU32(b, p.MinBufferMs)
	b = wire.AppendU32(b, p.HysteresisPPM)
	b = wire.AppendU32(b, p.TTLs)
	b = wire.AppendU32(b, p.MinTTLs)
	b = append(b, p.Flags, p.Initial)
	b = append(b, byte(len(p.Tiers)))
	for _, t := range p.Tiers {
		b = wire.AppendU64(b, t)
	}
	for _, u := range [...]string{p.ServerURI, p.ReloadURI, p.DecisionURI} {
		b = wire.AppendU16(b, uint16(len(u)))
		b = append(b, u...)
	}
	b = append(b, byte(len(p.Pathways)))
	for i := range p.Pathways {
		w := &p.Pathways[i]
		b = append(b, byte(len(w.ID)))
		b = append(b, w.ID...)
		b = append(b, w.Base, byte(len(w.Host)))
		b = append(b, w.Host...)
		b = append(b, byte(len(w.Params)))
		for _, q := range w.Params {
			b = append(b, byte(len(q.Name)))
			b = append(b, q.Name...)
			b = append(b, byte(len(q.Value)))
			b = append(b, q.Value...)
		}
		b = append(b, w.TopTier)
		b = wire.AppendU32(b, w.LatencyMs)
		b = wire.AppendU32(b, w.Capacity)
		b = wire.AppendU32(b, w.MinSharePPM)
		b = append(b, byte(len(w.Hops)))
		for _, h := range w.Hops {
			b = append(b, h.Key[:]...)
			b = append(b, byte(h.Place))
		}
	}
	return b
}

// Append appends the whole policy, its body and sig (§3.1).
func Append(dst []byte, p *Policy) []byte {
	return append(AppendBody(dst, p), p.Sig[:]...)
}

// Bytes returns the policy's WSP1 bytes: those Parse read or Sign wrote, which
// the caller must not modify, or for a policy built by hand, Append's.
func (p *Policy) Bytes() []byte {
	if p.raw != nil {
		return p.raw
	}
	return Append(nil, p)
}

// body is the bytes the digest covers and the signature signs (§3.4).
func (p *Policy) body() []byte {
	if p.raw != nil {
		return p.raw[:len(p.raw)-sig.SignatureSize]
	}
	return AppendBody(nil, p)
}

// Digest is SHA-256 over the policy's bytes before sig (§3.4). For a policy
// that Parse or Sign returned it was computed then, and a policy they
// returned is read-only: a field changed afterwards is not in its digest
// until the policy is signed again.
func (p *Policy) Digest() sig.Hash {
	if p.raw != nil {
		return p.digest
	}
	return sig.Digest(AppendBody(nil, p))
}

// VerifySignature checks sig by signer over the domain "wai:steering-policy"
// and the bytes before sig, by the strict rule (§3.4, COMPANION §2):
// bad_key or bad_signature. Whether the signer may sign the room's policy is
// §3.5's question, answered with the room.
func (p *Policy) VerifySignature() error {
	return sig.Verify(p.Signer, sig.DomainPolicy, p.body(), p.Sig)
}

// Sign makes k the policy's signer, checks the policy (§3.3), signs it
// (§3.4) and returns its WSP1 bytes. The policy keeps its signature, its
// bytes and its digest.
func Sign(p *Policy, k sig.PrivateKey) ([]byte, error) {
	if k.IsZero() {
		return nil, errors.New("policy: no signing key")
	}
	p.raw = nil
	p.Signer = k.Public()
	if err := Check(p); err != nil {
		return nil, err
	}
	body := AppendBody(nil, p)
	p.Sig = k.Sign(sig.DomainPolicy, body)
	out := append(body, p.Sig[:]...)
	p.raw = bytes.Clone(out)
	p.digest = sig.Digest(body)
	return out, nil
}

// Index returns the index of the pathway whose id is id (§3.2).
func (p *Policy) Index(id string) (int, bool) {
	for i := range p.Pathways {
		if p.Pathways[i].ID == id {
			return i, true
		}
	}
	return 0, false
}

// IDs returns the pathways' ids in the policy's order.
func (p *Policy) IDs() []string {
	ids := make([]string, len(p.Pathways))
	for i := range p.Pathways {
		ids[i] = p.Pathways[i].ID
	}
	return ids
}

// Clones reports whether the policy has a clone, which decides whether the
// steering manifest writes PATHWAY-CLONES (§8.1).
func (p *Policy) Clones() bool {
	for i := range p.Pathways {
		if p.Pathways[i].IsClone() {
			return true
		}
	}
	return false
}
