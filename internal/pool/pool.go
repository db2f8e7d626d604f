package pool

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/waisteer/waisteer/report/qoe"
)

// Pool is a pool at run time. Its methods are safe for concurrent use;
// Steer takes no lock.
type Pool struct {
	block cipher.Block
	// mu orders the writers, which build a new state from the current one.
	mu    sync.Mutex
	state atomic.Pointer[state]
	// behind is the QoE moves by cohort (SetBehind), kept across every
	// change of state; under mu.
	behind map[string]qoe.Moved
}

// EdgeState is the operator's view of one edge: First counts the manifests
// since start that put it first (kept across Reconfigure while the edge
// keeps its pathway).
type EdgeState struct {
	Pathway, Host        string
	Weight               uint32
	Checked, Up, Drained bool
	First                uint64
}

// run is what an edge keeps across configurations, by its pathway: its
// health, its draining and its count. It fills a cache line of its own, so
// that counting one edge on one core does not slow counting another on
// another.
type run struct {
	first       atomic.Uint64
	up, drained bool // under Pool.mu
	_           [64 - 8 - 2]byte
}

// shape is what a configuration fixes: the edges' hashes and weights and
// the manifest's pieces, encoded once.
type shape struct {
	cfg   Config
	runs  []*run
	index map[string]int32 // by pathway

	seed   []uint64  // p of the package doc
	inv    []float64 // 1/weight; 0 for weight 0
	quoted []string  // the pathway as a JSON string
	clone  []string  // the edge's PATHWAY-CLONES entry; "" when it has none
	hosted []int32   // the edges with a clone, in the order written

	head string // `{"VERSION":1,"TTL":<ttl>,"RELOAD-URI":"` and the public_url, when set
	// headShort is head with the QoE's short TTL, when the pool has QoE.
	headShort string
	// headKeep is head with keepTTL, the TTL of a new session's answer
	// that keeps the pathway its player reports first.
	headKeep string
	keepTTL  int
	// base is clone_from as a JSON string, then a comma, when it is not an
	// edge's pathway: a new session that reports it is kept on it ("" for
	// none).
	base    string
	public  bool
	pathQ   string // the path and `?session=`
	cohortQ string // `&<cohort_param>=`, when set

	buckets     bool
	byBucket    [][]int32 // by bucket−1: the rules whose range holds it, in order, up to the first for every session
	ruleCohorts [][]int32 // by rule: the ids of its cohort; nil for every session
	cohortIDs   map[string]int32
	// dealers deal buckets round-robin, one for each cohort a rule names
	// (by id + 1) and one for every other session (0): a rule limited to a
	// cohort gives its share of that cohort's sessions whatever order the
	// cohorts arrive in (issue 26 item 7). A dealer is kept across
	// configurations while its cohort is named.
	dealers []*atomic.Uint64

	// fixed bounds a manifest's length but for the request's base.
	fixed int
}

// state is a shape under one health: the edges the manifest lists.
type state struct {
	*shape
	up, drained []bool
	rankable    []int32            // the listed edges of weight above 0
	tail        []int32            // the listed edges of weight 0, in the order written
	rulePrio    [][]int32          // by rule: its priority less the edges not listed
	behind      map[string][]uint8 // by cohort: by index, the edges a QoE move put behind (isBehind), or behind but for the probe share (isProbed)
}

// New makes a pool of c, every edge up. key is the server's secret under
// which sessions are minted (AES-128). A Config whose Check fails is
// refused, with every problem.
func New(c Config, key [16]byte) (*Pool, error) {
	if ps := c.Check(); len(ps) > 0 {
		return nil, joinProblems(ps)
	}
	b, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	p := &Pool{block: b}
	p.state.Store(p.newState(newShape(c.clone(), nil)))
	return p, nil
}

func joinProblems(ps []Problem) error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// Config is the configuration as it stands, weights changed included.
func (p *Pool) Config() Config { return p.state.Load().cfg.clone() }

// Enabled reports whether the pool has edges; a pool without is steering
// off (the seed: the route answers 404).
func (p *Pool) Enabled() bool { return len(p.state.Load().runs) > 0 }

// SetUp records an edge's health and reports whether it changed anything;
// an unknown pathway changes nothing.
func (p *Pool) SetUp(pathway string, up bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	sh, i, err := p.edge(pathway)
	if err != nil || sh.runs[i].up == up {
		return false
	}
	sh.runs[i].up = up
	p.state.Store(p.newState(sh))
	return true
}

// edge finds an edge by its pathway in the shape as it stands; p.mu is
// held.
func (p *Pool) edge(pathway string) (*shape, int32, error) {
	sh := p.state.Load().shape
	i, ok := sh.index[pathway]
	if !ok {
		return nil, 0, fmt.Errorf("pool: no edge has the pathway %q", pathway)
	}
	return sh, i, nil
}

// Drain takes an edge out of every order (drained) or puts it back, as if
// it went down or came back; its health is kept meanwhile.
func (p *Pool) Drain(pathway string, drained bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sh, i, err := p.edge(pathway)
	if err != nil {
		return err
	}
	if sh.runs[i].drained != drained {
		sh.runs[i].drained = drained
		p.state.Store(p.newState(sh))
	}
	return nil
}

// SetWeight changes an edge's weight: only the sessions that put it first
// before or after move.
func (p *Pool) SetWeight(pathway string, w uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	sh, i, err := p.edge(pathway)
	if err != nil {
		return err
	}
	if w > maxWeight {
		return fmt.Errorf("pool: weight %d is not 0 to %s", w, grouped(maxWeight))
	}
	if sh.cfg.Edges[i].Weight == w {
		return nil
	}
	c := sh.cfg.clone()
	c.Edges[i].Weight = w
	p.state.Store(p.newState(newShape(c, sh)))
	return nil
}

// Reconfigure replaces the configuration (SIGHUP). An edge kept (by its
// pathway) keeps its health, draining and count; a new edge starts up; an
// edge removed goes. A Config whose Check fails is refused and the pool
// left as it was.
func (p *Pool) Reconfigure(c Config) error {
	if ps := c.Check(); len(ps) > 0 {
		return joinProblems(ps)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Store(p.newState(newShape(c.clone(), p.state.Load().shape)))
	return nil
}

// Edges is the operator's view of every edge, in the order written.
func (p *Pool) Edges() []EdgeState {
	st := p.state.Load()
	out := make([]EdgeState, len(st.runs))
	for i, e := range st.cfg.Edges {
		out[i] = EdgeState{
			Pathway: e.Pathway, Host: e.Host, Weight: e.Weight,
			Checked: e.CheckURL != "", Up: st.up[i], Drained: st.drained[i],
			First: st.runs[i].first.Load(),
		}
	}
	return out
}

// newShape encodes what c fixes; c is the pool's own. The edges of old
// with a pathway of c keep their run.
func newShape(c Config, old *shape) *shape {
	n := len(c.Edges)
	sh := &shape{
		cfg:    c,
		runs:   make([]*run, n),
		index:  make(map[string]int32, n),
		seed:   make([]uint64, n),
		inv:    make([]float64, n),
		quoted: make([]string, n),
		clone:  make([]string, n),
	}
	for i, e := range c.Edges {
		sh.index[e.Pathway] = int32(i)
		if j, ok := old.lookup(e.Pathway); ok {
			sh.runs[i] = old.runs[j]
		} else {
			sh.runs[i] = &run{up: true}
		}
		sh.seed[i] = pathwayHash(e.Pathway)
		if e.Weight > 0 {
			sh.inv[i] = 1 / float64(e.Weight)
		}
		sh.quoted[i] = string(appendJSONString(nil, e.Pathway))
		if c.CloneFrom != "" && e.Host != "" {
			sh.clone[i] = string(appendClone(nil, c.CloneFrom, &e))
			sh.hosted = append(sh.hosted, int32(i))
		}
	}

	headOf := func(ttl int) string {
		head := []byte(`{"VERSION":1,"TTL":` + strconv.Itoa(ttl) + `,"RELOAD-URI":"`)
		if c.PublicURL != "" {
			head = appendJSONEscaped(head, c.PublicURL)
		}
		return string(head)
	}
	sh.public = c.PublicURL != ""
	sh.head = headOf(c.TTL)
	sh.keepTTL = min(c.TTL, KeepTTL)
	sh.headKeep = headOf(sh.keepTTL)
	if _, isEdge := sh.index[c.CloneFrom]; c.CloneFrom != "" && !isEdge {
		sh.base = string(appendJSONString(nil, c.CloneFrom)) + ","
	}
	if c.QoE != nil {
		sh.headShort = headOf(c.QoE.ShortTTL)
	}
	sh.pathQ = string(appendJSONEscaped(nil, c.Path)) + "?session="
	if c.CohortParam != "" {
		sh.cohortQ = "&" + string(appendJSONEscaped(nil, c.CohortParam)) + "="
	}

	if c.Assign == AssignBuckets {
		sh.buckets = true
		sh.byBucket = make([][]int32, c.Buckets)
		sh.ruleCohorts = make([][]int32, len(c.Rules))
		sh.cohortIDs = map[string]int32{}
		for ri, r := range c.Rules {
			for _, v := range r.Cohort {
				id, ok := sh.cohortIDs[v]
				if !ok {
					id = int32(len(sh.cohortIDs))
					sh.cohortIDs[v] = id
				}
				sh.ruleCohorts[ri] = append(sh.ruleCohorts[ri], id)
			}
			for b := r.First; b <= r.Last; b++ {
				rules := sh.byBucket[b-1]
				// A rule after one for every session is never reached.
				if len(rules) > 0 && sh.ruleCohorts[rules[len(rules)-1]] == nil {
					continue
				}
				sh.byBucket[b-1] = append(rules, int32(ri))
			}
		}
		sh.dealers = make([]*atomic.Uint64, len(sh.cohortIDs)+1)
		sh.dealers[0] = old.dealer("", false)
		for v, id := range sh.cohortIDs {
			sh.dealers[id+1] = old.dealer(v, true)
		}
	}

	sh.fixed = len(sh.head) + len(sh.pathQ) + 2*len(Session{}) + len(`&bucket=65535`) +
		len(sh.cohortQ) + 3*maxCohortLen + len(manifestPriority) + len(sh.base) + len(manifestClones) + len(`]]}`)
	for i := range n {
		sh.fixed += len(sh.quoted[i]) + 1 + len(sh.clone[i]) + 1
	}
	return sh
}

// dealer is old's dealer of cohort v (of the sessions no rule's cohort
// holds when named is false), or a new one when old, which may be nil, has
// none. A new dealer starts at a random offset, so that servers started
// together do not deal the same buckets to their first sessions.
func (old *shape) dealer(v string, named bool) *atomic.Uint64 {
	if old != nil && old.dealers != nil {
		if !named {
			return old.dealers[0]
		}
		if id, ok := old.cohortIDs[v]; ok {
			return old.dealers[id+1]
		}
	}
	var start [8]byte
	rand.Read(start[:])
	d := new(atomic.Uint64)
	d.Store(binary.LittleEndian.Uint64(start[:]))
	return d
}

// lookup finds an edge of a shape, which may be nil, by its pathway.
func (sh *shape) lookup(pathway string) (int32, bool) {
	if sh == nil {
		return 0, false
	}
	i, ok := sh.index[pathway]
	return i, ok
}

// SetBehind replaces the QoE moves: for each cohort ("" for the sessions
// without one), the pathways its sessions' orders put behind the others,
// but for the probe share's sessions on the pathways being probed. A
// pathway of no edge is skipped; nil clears every move.
func (p *Pool) SetBehind(behind map[string]qoe.Moved) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.behind = make(map[string]qoe.Moved, len(behind))
	for c, m := range behind {
		if len(m.Behind) > 0 {
			p.behind[c] = qoe.Moved{Behind: slices.Clone(m.Behind), Probing: slices.Clone(m.Probing)}
		}
	}
	p.state.Store(p.newState(p.state.Load().shape))
}

// The marks of state.behind.
const (
	isBehind uint8 = 1
	isProbed uint8 = 2
)

// newState lists the edges the manifest names under the runs' health:
// the healthy edges; with none, those not drained; with none of those
// either, every edge, so that a manifest is never empty. The QoE moves are
// p.behind's; p.mu is held (or p is new).
func (p *Pool) newState(sh *shape) *state {
	n := len(sh.runs)
	st := &state{shape: sh, up: make([]bool, n), drained: make([]bool, n)}
	healthy, undrained := 0, 0
	for i, r := range sh.runs {
		st.up[i], st.drained[i] = r.up, r.drained
		if !r.drained {
			undrained++
			if r.up {
				healthy++
			}
		}
	}
	listed := make([]bool, n)
	for i := range n {
		switch {
		case healthy > 0:
			listed[i] = st.up[i] && !st.drained[i]
		case undrained > 0:
			listed[i] = !st.drained[i]
		default:
			listed[i] = true
		}
		if !listed[i] {
			continue
		}
		if sh.cfg.Edges[i].Weight > 0 {
			st.rankable = append(st.rankable, int32(i))
		} else {
			st.tail = append(st.tail, int32(i))
		}
	}
	st.rulePrio = make([][]int32, len(sh.cfg.Rules))
	for ri, r := range sh.cfg.Rules {
		for _, name := range r.Priority {
			if i := sh.index[name]; listed[i] {
				st.rulePrio[ri] = append(st.rulePrio[ri], i)
			}
		}
		st.rulePrio[ri] = slices.Clip(st.rulePrio[ri])
	}
	if sh.cfg.QoE != nil {
		for c, m := range p.behind {
			var b []uint8
			for _, id := range m.Behind {
				if i, ok := sh.index[id]; ok {
					if b == nil {
						b = make([]uint8, n)
					}
					b[i] = isBehind
					if slices.Contains(m.Probing, id) {
						b[i] = isProbed
					}
				}
			}
			if b != nil {
				if st.behind == nil {
					st.behind = map[string][]uint8{}
				}
				st.behind[c] = b
			}
		}
	}
	return st
}
