package verify_test

import (
	"fmt"
	"testing"

	"github.com/waisteer/waisteer/conformance"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/verify"
)

func input(c conformance.Case) verify.Input {
	return verify.Input{Descriptor: c.Descriptor, KeyLogHead: c.KeyLogHead, Policy: c.Policy,
		Decision: c.Decision, Records: c.Records, Manifest: c.Manifest}
}

// expected is what each accepted case of §11 is built to show: the reason
// of §6.4 and the priority of §6.5, worked out by hand from the case's
// figures, limits, report and band.
var expected = map[string]struct {
	reason   string
	priority string
}{
	"three pathways, one class":                                {"rank", "[b a c]"},   // b's J/D lowest (§6.2 step 2)
	"mixed classes, ordered by class":                          {"rank", "[a c b]"},   // class 5, 4, 2 (§6.2 step 1)
	"unmetered hop ranked after figures":                       {"rank", "[a c b]"},   // b has no figure (§5.4)
	"stale evidence":                                           {"rank", "[a c b]"},   // b's edge hop has a gap (§5.2)
	"client at its floor held":                                 {"floor", "[c b a]"},  // T sustains tier 1 = F (§6.4 step 2)
	"client with a short buffer held":                          {"buffer", "[c b a]"}, // B < min_buffer_ms (§6.4 step 1)
	"hysteresis holds":                                         {"hold", "[a b]"},     // b within 5% of a (§6.4 step 5)
	"hysteresis moves a period later":                          {"rank", "[b a]"},     // b now beyond the margin
	"pathway clones":                                           {"rank", "[a-clone b a b-host c c-params]"},
	"session placed by its band":                               {"share", "[c b a]"}, // draw in c's band (§6.4 step 4)
	"session outside the bands, unmetered last":                {"rank", "[b c a]"},  // a unmetered, last
	"pathway at its capacity and one past the latency ceiling": {"rank", "[a b c]"},  // b full, c too slow (§6.1)
	"client on the pathway at its capacity":                    {"rank", "[b a c]"},  // c = b, load = capacity: within
	"per-second basis":                                         {"rank", "[a b c]"},  // D from subscriber_us[F..7]
	"DASH":                                                     {"rank", "[b a c]"},
	"no pathway within the limits":                             {"none", "[c b a]"}, // c kept (§6.4 step 3)
	"hops of two classes in one pathway":                       {"rank", "[a c b]"}, // b mixed (§5.3)
	"empty pathway":                                            {"rank", "[a c b]"}, // b delivered nothing
}

// TestAccepted: every accepted case of §11 verifies (§9.1) and gives the
// reason and priority it was built for.
func TestAccepted(t *testing.T) {
	cases := conformance.Accepted()
	if len(cases) != len(expected) {
		t.Errorf("%d accepted cases, %d expectations", len(cases), len(expected))
	}
	for _, c := range cases {
		f, err := verify.Verify(input(c))
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		want, ok := expected[c.Name]
		if got := fmt.Sprint(f.Priority); !ok || f.Reason != want.reason || got != want.priority {
			t.Errorf("%s: reason %s, priority %s; want %s, %s", c.Name, f.Reason, got, want.reason, want.priority)
		}
	}
}

// TestRefused: every refused case gives its code at its place (§9.1, §10,
// COMPANION §7).
func TestRefused(t *testing.T) {
	for _, c := range conformance.Refused() {
		_, err := verify.Verify(input(c))
		if reason.Of(err) != c.Want || err.(*reason.Error).Place != c.Where {
			t.Errorf("%s: got %v, want %s at %s", c.Name, err, c.Want, c.Where)
		}
	}
}

// TestEveryCodeRefuses: every reason of §10, and every code it reuses,
// refuses at least one case.
func TestEveryCodeRefuses(t *testing.T) {
	seen := map[reason.Code]bool{}
	for _, c := range conformance.Refused() {
		seen[c.Want] = true
	}
	for _, code := range append(append([]reason.Code{}, reason.Extension...), reason.Reused...) {
		if !seen[code] {
			t.Errorf("no case refuses with %s", code)
		}
	}
}
