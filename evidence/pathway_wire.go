package evidence

import (
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/wire"
)

// AppendPathway appends p's evidence as §7.1 lays it out in a pathway's
// entry after its load and limits: status (u8), class (u8), J and D (u128),
// the count of records (u8) and their digests. The decision record and the
// store's evidence snapshots both write it.
func AppendPathway(dst []byte, p *Pathway) []byte {
	dst = append(dst, uint8(p.Status), uint8(p.Class))
	dst = wire.AppendU128(dst, p.Joules)
	dst = wire.AppendU128(dst, p.Delivery)
	dst = append(dst, uint8(len(p.Records)))
	for j := range p.Records {
		dst = append(dst, p.Records[j][:]...)
	}
	return dst
}

// ReadPathway reads what AppendPathway writes into p. The digests are
// appended to all, and p.Records is a window of it, so that the pathways of
// one record share one array. It reports false, with r short, when the
// count announces more digests than remain.
func ReadPathway(r *wire.Reader, p *Pathway, all []sig.Hash) ([]sig.Hash, bool) {
	p.Status = Status(r.U8())
	p.Class = Class(r.U8())
	p.Joules = r.U128()
	p.Delivery = r.U128()
	k := int(r.U8())
	if r.Len() < k*sig.HashSize {
		r.Bytes(k * sig.HashSize)
		return all, false
	}
	s := len(all)
	for range k {
		all = append(all, sig.Hash(r.Bytes(sig.HashSize)))
	}
	if k > 0 {
		p.Records = all[s:len(all):len(all)]
	}
	return all, true
}
