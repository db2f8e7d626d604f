package decision

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// The steering manifest's fixed pieces (§8.1), in the order of its members.
const (
	manifestHead     = `{"VERSION":1,"TTL":`
	manifestReload   = `,"RELOAD-URI":"`
	manifestSession  = `wai_session=`
	manifestPriority = `","PATHWAY-PRIORITY":[`
	manifestClones   = `,"PATHWAY-CLONES":[`
	manifestDecision = `,"science.transaction.wai-decision":"`
	manifestEnd      = `"}`
)

// ManifestWriter writes the steering manifests (§8.1) of one policy. Every
// part that does not depend on the decision is encoded once, when the
// writer is made, so that writing a manifest per request is a few appends.
// A writer is immutable and safe for concurrent use.
type ManifestWriter struct {
	// reload is `,"RELOAD-URI":"` then reload_uri, `&` or `?`, and
	// `wai_session=`: everything between the TTL and the session.
	reload string
	// ids holds each pathway's id in double quotes, by index.
	ids []string
	// tail is `]`, the PATHWAY-CLONES member when the policy has a clone,
	// and `,"science.transaction.wai-decision":"` then decision_uri:
	// everything between the last id and the digest.
	tail string
	max  int
}

// NewManifestWriter encodes the parts of p's manifests that are p's alone.
// p is a policy that reads (§3.3); §3.3's character rules leave nothing in
// its ids, URIs, hosts or params that JSON escapes, so they are written as
// they are. A clone whose base names no pathway (which §3.3 refuses as
// clone_unknown) is written with an empty BASE-ID.
func NewManifestWriter(p *policy.Policy) *ManifestWriter {
	w := &ManifestWriter{ids: make([]string, len(p.Pathways))}

	// §8.1 <reload>: reload_uri, then `&` when it holds a `?` and `?`
	// otherwise, then `wai_session=`.
	sep := "?"
	if strings.Contains(p.ReloadURI, "?") {
		sep = "&"
	}
	w.reload = manifestReload + p.ReloadURI + sep + manifestSession

	idsLen := 0
	for i := range p.Pathways {
		w.ids[i] = `"` + p.Pathways[i].ID + `"`
		idsLen += len(w.ids[i]) + 1
	}

	var t strings.Builder
	t.WriteString("]")
	// §8.1: "PATHWAY-CLONES":[<clones>], only when the policy has a clone;
	// every clone, in the policy's order.
	first := true
	for i := range p.Pathways {
		c := &p.Pathways[i]
		if !c.IsClone() {
			continue
		}
		if first {
			t.WriteString(manifestClones)
			first = false
		} else {
			t.WriteString(",")
		}
		base := ""
		if int(c.Base) < len(p.Pathways) {
			base = p.Pathways[c.Base].ID
		}
		t.WriteString(`{"BASE-ID":"` + base + `","ID":"` + c.ID + `","URI-REPLACEMENT":{`)
		// <replacement>: "HOST":"<host>" when it has a host, then (after a
		// `,` when a host was written) "PARAMS":{<params>} when it has
		// params; empty when it has neither.
		if c.Host != "" {
			t.WriteString(`"HOST":"` + c.Host + `"`)
		}
		if len(c.Params) > 0 {
			if c.Host != "" {
				t.WriteString(",")
			}
			t.WriteString(`"PARAMS":{`)
			for j, q := range c.Params {
				if j > 0 {
					t.WriteString(",")
				}
				t.WriteString(`"` + q.Name + `":"` + q.Value + `"`)
			}
			t.WriteString("}")
		}
		t.WriteString("}}")
	}
	if !first {
		t.WriteString("]")
	}
	t.WriteString(manifestDecision)
	t.WriteString(p.DecisionURI)
	w.tail = t.String()

	w.max = len(manifestHead) + len("4294967295") + len(w.reload) + 2*len(report.Session{}) +
		len(manifestPriority) + idsLen + len(w.tail) + 2*sig.HashSize + len(manifestEnd)
	return w
}

// MaxSize bounds the length of any manifest Append writes for a priority
// that names each pathway once: a buffer of this capacity is never grown.
func (w *ManifestWriter) MaxSize() int { return w.max }

// Append appends the steering manifest (§8.1) of a decision with the given
// ttl, session, priority and digest. Each index of priority is a pathway of
// the writer's policy (§9.1 step 3 checks that a decision has the policy's
// count of pathways, and §7.2 that its priority is below it); an index that
// is not is written as null, which no manifest of §8.1 holds.
func (w *ManifestWriter) Append(dst []byte, ttl uint32, session report.Session, priority []uint8, digest sig.Hash) []byte {
	dst = append(dst, manifestHead...)
	dst = strconv.AppendUint(dst, uint64(ttl), 10) // §8.1 <ttl>: decimal, no leading zero
	dst = append(dst, w.reload...)
	dst = hex.AppendEncode(dst, session[:]) // 32 lowercase hexadecimal digits
	dst = append(dst, manifestPriority...)
	for i, j := range priority { // §8.1 <ids>: the priority's order
		if i > 0 {
			dst = append(dst, ',')
		}
		if int(j) < len(w.ids) {
			dst = append(dst, w.ids[j]...)
		} else {
			dst = append(dst, "null"...)
		}
	}
	dst = append(dst, w.tail...)
	dst = hex.AppendEncode(dst, digest[:]) // §8.1 <decision>, §8.4: 64 lowercase hexadecimal digits
	return append(dst, manifestEnd...)
}

// Manifest returns the steering manifest (§8.1) of decision d under policy
// p, whose digest is digest. A server writing one per request keeps a
// ManifestWriter per policy instead.
func Manifest(p *policy.Policy, d *Decision, digest sig.Hash) []byte {
	w := NewManifestWriter(p)
	return w.Append(make([]byte, 0, w.MaxSize()), d.TTL, d.Session, d.Priority, digest)
}

// initialID is the id of p's initial pathway, or "" when initial names none
// (which §3.3 refuses).
func initialID(p *policy.Policy) string {
	if int(p.Initial) < len(p.Pathways) {
		return p.Pathways[p.Initial].ID
	}
	return ""
}

// HLSTag is the tag that carries p in the HLS multivariant playlist (§8.2,
// rfc8216bis-22 §4.4.6.6).
func HLSTag(p *policy.Policy) string {
	return `#EXT-X-CONTENT-STEERING:SERVER-URI="` + p.ServerURI + `",PATHWAY-ID="` + initialID(p) + `"`
}

// DASHElement is the element that carries p in the DASH MPD (§8.3, ETSI TS
// 103 998 clause 5.2), on one line. queryBeforeStart is true when flags bit
// 0 is set, and each `&` of server_uri is written `&amp;` (COMPANION §6): of
// §3.3's URI characters only `&` is escaped in XML text.
func DASHElement(p *policy.Policy) string {
	q := "false"
	if p.Flags&policy.FlagQueryBeforeStart != 0 {
		q = "true"
	}
	return `<ContentSteering defaultServiceLocation="` + initialID(p) + `" queryBeforeStart="` + q + `">` +
		strings.ReplaceAll(p.ServerURI, "&", "&amp;") + `</ContentSteering>`
}

// RecordURI is the URI at which the decision with the given digest is
// served (§8.4): decision_uri, then the digest in lowercase hexadecimal.
func RecordURI(p *policy.Policy, digest sig.Hash) string {
	return p.DecisionURI + digest.String()
}
