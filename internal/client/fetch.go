package client

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify"
)

// A Refusal is why FetchInput could not gather a verifier's inputs, shaped
// as a verifier's refusal is: a code, and the place (COMPANION §7) of the
// input it concerns (decision, room or policy).
type Refusal struct {
	Code  api.Code
	Where string
	Err   error
}

func (r *Refusal) Error() string { return fmt.Sprintf("%s at %s: %v", r.Code, r.Where, r.Err) }
func (r *Refusal) Unwrap() error { return r.Err }

// The codes of a Refusal besides the server's own (api.Code) and the text's
// reading codes (a decision that does not read).
const (
	// Unreachable: no answer came (the connection failed, or timed out).
	Unreachable api.Code = "unreachable"
	// DigestMismatch: the bytes answered for the decision are not the
	// decision the URL names (§7.3's digest, §8.4).
	DigestMismatch api.Code = "digest_mismatch"
	// AuthorityMismatch: the room's descriptor names another authority
	// than the one the caller pinned.
	AuthorityMismatch api.Code = "authority_mismatch"
)

func refuse(code api.Code, where string, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Where: where, Err: fmt.Errorf(format, args...)}
}

// fetchFailed is the refusal of a fetch that failed, at where.
func fetchFailed(where string, err error) *Refusal {
	if e := ErrorOf(err); e != nil {
		return &Refusal{Code: e.Code, Where: where, Err: err}
	}
	return &Refusal{Code: Unreachable, Where: where, Err: err}
}

// FetchInput fetches a decision by its URL and everything a verifier needs
// for it from the same scheme and host (the server's /v1/ routes): the
// room's descriptor and key log head, the policy and each record the
// decision names (§9.1's inputs). A record the server does not hold is left
// out, so that the verifier refuses it record_missing at its place; a
// decision, descriptor or policy it does not hold is a *Refusal, since
// there is then nothing to verify. With authority, a room whose descriptor
// names another authority is refused (AuthorityMismatch) before its key
// log, policy and records are fetched: the server could otherwise answer
// with a room of its own, consistent and signed by keys it holds. The
// descriptor's signature is still the verifier's to check (COMPANION §4.1
// step 2). An error that is not a *Refusal is the caller's: a URL that is
// not a decision's.
func (c *Client) FetchInput(ctx context.Context, decisionURL string, authority *sig.PublicKey) (verify.Input, error) {
	var in verify.Input
	u, err := url.Parse(decisionURL)
	if err != nil {
		return in, fmt.Errorf("%q is not a URL: %v", decisionURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return in, fmt.Errorf("%q: an http or https URL is needed", decisionURL)
	}
	// §8.4: a decision's URI is decision_uri followed by its digest, 64
	// hexadecimal digits, whether decision_uri ends in a path or a query.
	named, err := sig.ParseHash(decisionURL[max(0, len(decisionURL)-2*sig.HashSize):])
	if err != nil || u.Fragment != "" {
		return in, fmt.Errorf("%q does not end in a decision's digest (§8.4)", decisionURL)
	}
	base := u.Scheme + "://" + u.Host

	if in.Decision, err = c.Get(ctx, u.String(), api.MaxDecisionBytes); err != nil {
		return in, fetchFailed(verify.PlaceDecision, err)
	}
	// The bytes must be the decision the URL names (§7.3's digest): the
	// verifier checks a decision, and this is the one asked about.
	if len(in.Decision) < sig.SignatureSize || sig.Digest(in.Decision[:len(in.Decision)-sig.SignatureSize]) != named {
		return in, refuse(DigestMismatch, verify.PlaceDecision, "the server answered %d bytes that are not the decision %s the URL names", len(in.Decision), named)
	}
	return c.FetchAround(ctx, base, in.Decision, authority)
}

// FetchAround fetches from the server at base what verifying the decision
// bytes b needs: its room's descriptor and key log head, its policy and
// the records it names (FetchInput's steps after the decision's own). The
// bytes are the caller's: a decision pasted in, perhaps altered, is
// verified against what the server holds for the room and policy it
// names.
func (c *Client) FetchAround(ctx context.Context, base string, b []byte, authority *sig.PublicKey) (verify.Input, error) {
	in := verify.Input{Decision: b}
	d, err := decision.Parse(in.Decision)
	if err != nil {
		return in, &Refusal{Code: api.Code(reason.Of(err)), Where: verify.PlaceDecision,
			Err: fmt.Errorf("the decision does not read, so its room and policy are not known: %w", err)}
	}

	roomURL := base + "/v1/rooms/" + d.Room.String()
	if in.Descriptor, err = c.Get(ctx, roomURL+"/descriptor", api.MaxDescriptorBytes); err != nil {
		return in, fetchFailed(verify.PlaceRoom, err)
	}
	if authority != nil {
		desc, err := room.ParseDescriptor(in.Descriptor)
		if err != nil {
			return in, &Refusal{Code: api.Code(reason.Of(err)), Where: verify.PlaceRoom,
				Err: fmt.Errorf("the server's descriptor of room %s does not read, so its authority is not known: %w", d.Room, err)}
		}
		if desc.Authority != *authority {
			return in, refuse(AuthorityMismatch, verify.PlaceRoom, "the server's room %s has the authority %s, not the pinned %s", d.Room, desc.Authority, *authority)
		}
	}
	// A room with no origin has no key log: 404 no_key_log, and none is
	// given (COMPANION §4.1).
	if in.KeyLogHead, err = c.Get(ctx, roomURL+"/keylog", api.MaxKeyLogBytes); err != nil {
		if !api.IsNotFound(err) {
			return in, fetchFailed(verify.PlaceRoom, err)
		}
		in.KeyLogHead = nil
	}
	if in.Policy, err = c.Get(ctx, base+"/v1/policies/"+d.Policy.String(), api.MaxPolicyBytes); err != nil {
		return in, fetchFailed(verify.PlacePolicy, err)
	}

	// The records, in the order the decision names them, a few at a time.
	var digests []sig.Hash
	var places []string
	for i := range d.Pathways {
		for k, h := range d.Pathways[i].Records {
			digests = append(digests, h)
			places = append(places, verify.PlaceEvidence(i, k))
		}
	}
	records := make([][]byte, len(digests))
	errs := make([]error, len(digests))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(Workers, len(digests)) {
		wg.Go(func() {
			for i := range next {
				records[i], errs[i] = c.Get(ctx, base+"/v1/records/"+digests[i].String(), api.MaxRecordBytes)
				if api.IsNotFound(errs[i]) {
					errs[i] = nil
				}
			}
		})
	}
	for i := range digests {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return in, fetchFailed(places[i], err)
		}
	}
	for _, r := range records {
		if r != nil {
			in.Records = append(in.Records, r)
		}
	}
	return in, nil
}
