package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/pool"
)

// The demo's pool: steering without meters, as the station seed runs it.
// Three edges on this machine, each a tiny HTTP server whose /health the
// pool checks every second; after a while the demo stops one and prints
// which sessions moved, and where, and that they come back.
const (
	demoPoolSessions = 300
	demoCheckEvery   = time.Second
	demoDownAfter    = 2
	// DefaultEdgeStop is when the demo stops an edge (Options.EdgeStop).
	DefaultEdgeStop = time.Minute
	// demoEdgeDown is how long the stopped edge stays stopped, or
	// Options.EdgeStop when that is shorter.
	demoEdgeDown = 20 * time.Second
)

// demoEdge is one of the pool's edges: its health endpoint on loopback.
type demoEdge struct {
	pathway string
	weight  uint32
	addr    string
	mu      sync.Mutex
	srv     *http.Server
}

func startEdge(pathway string, weight uint32) (*demoEdge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &demoEdge{pathway: pathway, weight: weight, addr: ln.Addr().String()}
	e.serve(ln)
	return e, nil
}

func (e *demoEdge) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}), ReadHeaderTimeout: 5 * time.Second}
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
	go srv.Serve(ln)
}

// stop closes the edge's listener and connections, as a machine that stops.
func (e *demoEdge) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
}

func (e *demoEdge) start() error {
	ln, err := net.Listen("tcp", e.addr)
	if err != nil {
		return err
	}
	e.serve(ln)
	return nil
}

// demoPool starts the pool's edges and returns the pool's configuration.
func demoPool() (pool.Config, []*demoEdge, error) {
	c := pool.Config{
		Path: pool.DefaultPath, TTL: 10, CheckEvery: demoCheckEvery, CheckTimeout: 500 * time.Millisecond,
		DownAfter: demoDownAfter, CloneFrom: ".", Assign: pool.AssignRendezvous, Buckets: 12,
	}
	var edges []*demoEdge
	for _, e := range []struct {
		pathway string
		weight  uint32
	}{{"edge-1", 1}, {"edge-2", 2}, {"edge-3", 1}} {
		de, err := startEdge(e.pathway, e.weight)
		if err != nil {
			stopEdges(edges)
			return c, nil, err
		}
		edges = append(edges, de)
		c.Edges = append(c.Edges, pool.Edge{Pathway: e.pathway, Host: e.pathway + ".edges.example", Weight: e.weight,
			CheckURL: "http://" + de.addr + "/health"})
	}
	return c, edges, nil
}

func stopEdges(edges []*demoEdge) {
	for _, e := range edges {
		e.stop()
	}
}

// lockedWriter serialises the room's lines and the pool's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// poolManifest is what the demo reads of a pool's manifest.
type poolManifest struct {
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
}

func getManifest(ctx context.Context, c *http.Client, u string) (poolManifest, []byte, error) {
	var m poolManifest
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return m, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return m, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return m, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return m, b, fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	err = json.Unmarshal(b, &m)
	return m, b, err
}

// introPool prints what the pool is and what to try; it mints the demo's
// sessions and returns their RELOAD-URIs and first edges.
// stopAt, when not zero, is when -for ends the demo.
func introPool(ctx context.Context, w io.Writer, c *http.Client, base, token string, cfg pool.Config, stopAfter time.Duration, stopAt time.Time) ([]string, []string, error) {
	route := base + cfg.Path
	first, raw, err := getManifest(ctx, c, route)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(w, "And a pool, steered without meters as the station seed runs one: three edges on this")
	fmt.Fprintf(w, "machine, each with a /health endpoint checked every %v (%d failures in a row take an edge\n", demoCheckEvery, demoDownAfter)
	fmt.Fprintln(w, "out, one pass brings it back); each session's order is a weighted rendezvous hash of the")
	fmt.Fprintln(w, "healthy edges, so that an edge of weight 2 is first for twice the sessions of weight 1:")
	for _, e := range cfg.Edges {
		fmt.Fprintf(w, "  %-7s weight %d  %s\n", e.Pathway, e.Weight, e.CheckURL)
	}
	fmt.Fprintf(w, "  curl %s\n", route)
	fmt.Fprintf(w, "  %s\n", raw)
	fmt.Fprintln(w, "The edges and their health, on the operator's route:")
	fmt.Fprintf(w, "  curl -H 'Authorization: Bearer %s' %s/edges\n", token, route)
	reloads := []string{first.Reload}
	firsts := []string{first.Priority[0]}
	for len(reloads) < demoPoolSessions {
		m, _, err := getManifest(ctx, c, route)
		if err != nil {
			return nil, nil, err
		}
		reloads = append(reloads, m.Reload)
		firsts = append(firsts, m.Priority[0])
	}
	fmt.Fprintf(w, "%d sessions: %s.\n", len(reloads), shares(cfg, firsts))
	if !stopAt.IsZero() && !time.Now().Add(stopAfter).Before(stopAt) {
		// Issue 29: -for is said, and what it leaves out.
		fmt.Fprintf(w, "The demo would stop edge-2 in %v, after -for ends it: give -edge-stop under -for to see which sessions move.\n\n", stopAfter.Round(time.Second))
	} else {
		fmt.Fprintf(w, "In %v the demo stops edge-2, the heaviest, and says which sessions moved.\n\n", stopAfter.Round(time.Second))
	}
	return reloads, firsts, nil
}

// shares writes how many of the sessions each edge is first for.
func shares(cfg pool.Config, firsts []string) string {
	var parts []string
	for _, e := range cfg.Edges {
		n := 0
		for _, f := range firsts {
			if f == e.Pathway {
				n++
			}
		}
		parts = append(parts, fmt.Sprintf("%s first for %d", e.Pathway, n))
	}
	return strings.Join(parts, ", ")
}

// runPool stops edge-2 after stopAfter, waits for the pool to take it out,
// prints which sessions moved and where, starts it again, and prints that
// they came back.
func runPool(ctx context.Context, w io.Writer, c *http.Client, cfg pool.Config, edges []*demoEdge, reloads, before []string, stopAfter time.Duration) error {
	victim := edges[1]
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(stopAfter):
	}
	probe := slices.Index(before, victim.pathway)
	if probe < 0 {
		return fmt.Errorf("no session has %s first", victim.pathway)
	}
	stopped := time.Now()
	victim.stop()
	fmt.Fprintf(w, "%s  pool: stopped %s (its /health refuses connections)\n", stopped.Format(time.TimeOnly), victim.pathway)
	if err := waitFirst(ctx, c, reloads[probe], func(f string) bool { return f != victim.pathway }); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s  pool: %s out of every order %.1f s after it stopped\n", time.Now().Format(time.TimeOnly), victim.pathway, time.Since(stopped).Seconds())
	after, err := firstsOf(ctx, c, reloads)
	if err != nil {
		return err
	}
	moved, kept := map[string]int{}, 0
	var others []string
	for i := range reloads {
		switch {
		case before[i] == victim.pathway:
			moved[after[i]]++
		case after[i] == before[i]:
			kept++
		default:
			others = append(others, before[i]+" to "+after[i])
		}
	}
	var to []string
	for _, e := range cfg.Edges {
		if n := moved[e.Pathway]; n > 0 {
			to = append(to, fmt.Sprintf("%d to %s", n, e.Pathway))
		}
	}
	fmt.Fprintf(w, "%s  pool: the %d sessions %s had first moved: %s (by their weights); the other %d kept theirs\n",
		time.Now().Format(time.TimeOnly), countOf(before, victim.pathway), victim.pathway, strings.Join(to, ", "), kept)
	if len(others) > 0 {
		return fmt.Errorf("sessions of other edges moved: %v", others)
	}

	select {
	case <-ctx.Done():
		return nil
	case <-time.After(min(demoEdgeDown, stopAfter)):
	}
	started := time.Now()
	if err := victim.start(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s  pool: started %s again\n", started.Format(time.TimeOnly), victim.pathway)
	if err := waitFirst(ctx, c, reloads[probe], func(f string) bool { return f == victim.pathway }); err != nil {
		return err
	}
	back, err := firstsOf(ctx, c, reloads)
	if err != nil {
		return err
	}
	returned := 0
	for i := range reloads {
		if back[i] == before[i] {
			returned++
		}
	}
	fmt.Fprintf(w, "%s  pool: %s back in the order %.1f s after it started; %d of %d sessions have their first edge back\n",
		time.Now().Format(time.TimeOnly), victim.pathway, time.Since(started).Seconds(), returned, len(reloads))
	return nil
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// waitFirst polls a session's manifest until its first edge satisfies ok.
func waitFirst(ctx context.Context, c *http.Client, reload string, ok func(string) bool) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		m, _, err := getManifest(ctx, c, reload)
		if err != nil {
			return err
		}
		if ok(m.Priority[0]) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("the pool's order did not change within 30 s")
}

// firstsOf asks again for each session and returns their first edges.
func firstsOf(ctx context.Context, c *http.Client, reloads []string) ([]string, error) {
	out := make([]string, len(reloads))
	for i, r := range reloads {
		m, _, err := getManifest(ctx, c, r)
		if err != nil {
			return nil, err
		}
		out[i] = m.Priority[0]
	}
	return out, nil
}
