package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify/audit"
	"github.com/waisteer/waisteer/verify/recount"
)

func init() {
	register(&command{
		name:    "audit",
		summary: "audit a room's log of decisions: the tree, each decision (§9) and the loads and shares (§9.2)",
		run:     runAudit,
	})
}

func runAudit(e *env, args []string) error {
	fs := newFlags(e, "audit", "-url BASE -room HEX [-sample N] [-seed N] [-state FILE] [-grace DURATION] [-staleness DURATION] [-z Z] [-timeout DURATION]")
	base := fs.String("url", "", "the server's `BASE` URL, scheme and host (http://host:port)")
	roomHex := fs.String("room", "", "the room id, 64 hexadecimal digits")
	sample := fs.Int("sample", 0, "verify `N` decisions drawn at random by §9 in full (their records fetched); 0 verifies all. Every decision is read and recounted")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "the sample's seed")
	state := fs.String("state", "", "the `FILE` keeping the last checkpoint seen of each of the room's logs, which each log must extend (default: the user's cache directory, waisteer/audit/ROOM.checkpoint)")
	grace := fs.Duration("grace", 20*time.Second, "the server's session_grace (SPEC-NOTES, session expiry)")
	staleness := fs.Duration("staleness", 0, "δ, for a room steered by several servers on one database: a stated load may differ from the recount by the changes within it; 0 requires them exact")
	z := fs.Float64("z", recount.DefaultZ, "the bands' shares' bound, in standard deviations")
	timeout := fs.Duration("timeout", 30*time.Minute, "how long the audit may take in all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return usagef("-url %q: the server's scheme and host are needed, as http://host:port", *base)
	}
	roomID, err := sig.ParseHash(*roomHex)
	if err != nil {
		return usagef("-room: %v", err)
	}
	if *sample < 0 || *grace < 0 || *staleness < 0 {
		return usagef("-sample, -grace and -staleness may not be negative")
	}
	if *state == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return usagef("no -state, and no cache directory: %v", err)
		}
		*state = filepath.Join(dir, "waisteer", "audit", roomID.String()+".checkpoint")
	}
	o := audit.Options{
		Sample:  *sample,
		Seed:    *seed,
		Recount: recount.Options{Grace: uint64(*grace / time.Microsecond), Staleness: uint64(*staleness / time.Microsecond), Z: *z},
	}
	switch b, err := os.ReadFile(*state); {
	case err == nil:
		o.Previous = b
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep, err := audit.Run(ctx, client.New(), u.Scheme+"://"+u.Host, roomID, o)
	if err != nil {
		fmt.Fprintf(e.stderr, "waisteer audit: the log does not check: %v\n", err)
		return exitCode(1)
	}
	// The trees check: keep their checkpoints for the next audit (a file
	// of issue 16, one checkpoint, is read as log 0's and written anew).
	if err := os.MkdirAll(filepath.Dir(*state), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*state, rep.State(), 0o644); err != nil {
		return err
	}
	fmt.Fprint(e.stdout, rep)
	fmt.Fprintf(e.stdout, "  checkpoints kept in %s\n", *state)
	if !rep.OK() {
		fmt.Fprintf(e.stderr, "waisteer audit: %s\n", firstMismatch(rep))
		return exitCode(1)
	}
	return nil
}

// firstMismatch names the first decision where the audit differs.
func firstMismatch(rep *audit.Report) string {
	if len(rep.Refused) > 0 {
		f := rep.Refused[0]
		return fmt.Sprintf("%s, decision %s, is refused: %s at %s", rep.LeafName(f.Log, f.Index), f.Digest, f.Code, f.Where)
	}
	r := rep.Recount
	switch {
	case len(r.Loads) > 0:
		m := r.Loads[0]
		return fmt.Sprintf("%s, decision %s (t %d), states load %d on pathway %s; the recount is %d", rep.LeafName(m.Log, m.Index), m.Digest, m.T, m.Stated, m.ID, m.Recount)
	case len(r.Draws) > 0:
		m := r.Draws[0]
		return fmt.Sprintf("%s, decision %s, states draw %d; §6.3 gives %d", rep.LeafName(m.Log, m.Index), m.Digest, m.Stated, m.Draw)
	case len(r.Shares) > 0:
		m := r.Shares[0]
		return fmt.Sprintf("%s, decision %s, is placed by a band its draw is not in", rep.LeafName(m.Log, m.Index), m.Digest)
	}
	for _, b := range r.Bands {
		if !b.Within {
			return fmt.Sprintf("pathway %s's band: %d of %d sessions, expected %.1f ± %.1f", b.ID, b.InBand, b.Sessions, b.Expected, b.Bound)
		}
	}
	return "a mismatch"
}
