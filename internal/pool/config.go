package pool

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultPath is where the [steering] pool is served (the station seed's
// route).
const DefaultPath = "/api/v1/steering"

// The ways sessions are shared among edges.
const (
	AssignRendezvous = "rendezvous" // weighted rendezvous hashing (the station seed)
	AssignBuckets    = "buckets"    // Apple's buckets and rules (the zh seed)
)

// The station seed's defaults and ranges; the zh seed's 12 buckets.
const (
	defaultTTL          = 300
	defaultCheckEvery   = 5 * time.Second
	defaultCheckTimeout = 2000 * time.Millisecond
	defaultDownAfter    = 2
	defaultCloneFrom    = "."
	defaultBuckets      = 12
	defaultWeight       = 1

	maxTTL          = 86400
	minCheckEvery   = time.Second
	maxCheckEvery   = 300 * time.Second
	minCheckTimeout = 100 * time.Millisecond
	maxDownAfter    = 20

	// Bounds the seeds leave open. A bucket share finer than 0.1 % or a
	// weight ratio beyond a million has no use a pool could show; the
	// counts bound what one configuration can make a request cost.
	maxBuckets     = 1000
	maxWeight      = 1_000_000
	maxEdges       = 10_000
	maxRules       = 1000
	maxIDLen       = 64
	maxPathLen     = 256
	maxURILen      = 2048
	maxParams      = 64
	maxParamValue  = 1024
	maxStableIDLen = 256
	maxCohortLen   = 128
)

// File is the TOML schema of one pool: the seed's [steering] table (with its
// [[steering.edges]] and [[steering.rules]]), or one [[pool]] table, which
// adds name and path. Pointers tell a key left out from a zero.
type File struct {
	Name           *string    `toml:"name"`
	Path           *string    `toml:"path"`
	TTLs           *int64     `toml:"ttl_s"`
	CheckEverys    *int64     `toml:"check_every_s"`
	CheckTimeoutMs *int64     `toml:"check_timeout_ms"`
	DownAfter      *int64     `toml:"down_after"`
	CloneFrom      *string    `toml:"clone_from"`
	PublicURL      *string    `toml:"public_url"`    // scheme://host[:port] the RELOAD-URI is written under
	Assign         *string    `toml:"assign"`        // "rendezvous" (default) or "buckets"
	Buckets        *int64     `toml:"buckets"`       // default 12
	CohortHeader   *string    `toml:"cohort_header"` // a request header naming the session's cohort
	CohortParam    *string    `toml:"cohort_param"`  // or a query parameter, carried on in the RELOAD-URI
	Edges          []EdgeFile `toml:"edges"`
	Rules          []RuleFile `toml:"rules"`
	QoE            *QoEFile   `toml:"qoe"`
}

// EdgeFile is one [[steering.edges]] table.
type EdgeFile struct {
	Pathway          *string           `toml:"pathway"`
	Host             *string           `toml:"host"`
	Weight           *int64            `toml:"weight"`
	CheckURL         *string           `toml:"check_url"`
	Params           map[string]string `toml:"params"`
	PerVariantURIs   map[string]string `toml:"per_variant_uris"`
	PerRenditionURIs map[string]string `toml:"per_rendition_uris"`
}

// RuleFile is one [[steering.rules]] table.
type RuleFile struct {
	Buckets  []int64  `toml:"buckets"` // [first, last], inclusive, 1-based
	Priority []string `toml:"priority"`
	Cohort   []string `toml:"cohort"` // cohort values it applies to; absent: every session
}

// Problem is a setting that breaks a rule. Key is the TOML key relative to
// the pool's table, as tomlfile places keys: "ttl_s", "edges[1].host",
// "rules[0].priority[2]"; Rule says what the rule is and what the value was.
type Problem struct{ Key, Rule string }

// Error writes the problem as "key: rule".
func (p Problem) Error() string { return p.Key + ": " + p.Rule }

// Config is a pool's configuration, read and checked. Zero-value fields are
// not defaults: Read fills the defaults. Buckets is read only under
// AssignBuckets.
type Config struct {
	Name, Path               string
	TTL                      int // seconds
	CheckEvery, CheckTimeout time.Duration
	DownAfter                int
	CloneFrom, PublicURL     string
	Assign                   string // AssignRendezvous or AssignBuckets
	Buckets                  int
	CohortHeader             string
	CohortParam              string
	Edges                    []Edge
	Rules                    []Rule
	QoE                      *QoE // steering by what players report; nil for none
}

// Edge is one edge of a pool.
type Edge struct {
	Pathway, Host string
	Weight        uint32
	CheckURL      string
	// Params, PerVariantURIs and PerRenditionURIs go into the edge's clone's
	// URI-REPLACEMENT.
	Params, PerVariantURIs, PerRenditionURIs map[string]string
}

// Rule gives the sessions of buckets First to Last (inclusive, from 1), of
// one of the cohorts listed or of any when Cohort is empty, the priority.
type Rule struct {
	First, Last int
	Priority    []string
	Cohort      []string
}

// problems collects the problems found, in the order found.
type problems []Problem

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, Problem{key, fmt.Sprintf(format, args...)})
}

// Read checks a File, its defaults filled (ttl_s 300, check_every_s 5,
// check_timeout_ms 2000, down_after 2, clone_from ".", assign rendezvous,
// buckets 12, weight 1), and returns the Config and every problem found.
// named says that f is a [[pool]] table, which must have a name and a path;
// the [steering] table has neither, and is served at DefaultPath.
func Read(f *File, named bool) (Config, []Problem) {
	if f == nil {
		f = &File{}
	}
	var ps problems
	c := Config{
		Path:         DefaultPath,
		TTL:          defaultTTL,
		CheckEvery:   defaultCheckEvery,
		CheckTimeout: defaultCheckTimeout,
		DownAfter:    defaultDownAfter,
		CloneFrom:    defaultCloneFrom,
		Assign:       AssignRendezvous,
		Buckets:      defaultBuckets,
	}
	if named {
		if f.Name == nil {
			ps.add("name", "a [[pool]] needs a name")
		} else {
			c.Name = *f.Name
		}
		if f.Path == nil {
			ps.add("path", "a [[pool]] needs a path to be served at")
		} else {
			c.Path = *f.Path
		}
	} else {
		if f.Name != nil {
			ps.add("name", "only a [[pool]] table has a name")
		}
		if f.Path != nil {
			ps.add("path", "only a [[pool]] table has a path; [steering] is served at %s", DefaultPath)
		}
	}
	// Numbers are checked as written, before they are converted, so that a
	// value too large for its field is reported as the operator wrote it.
	if f.TTLs != nil {
		ps.inRange("ttl_s", *f.TTLs, 1, maxTTL)
		c.TTL = clampInt(*f.TTLs)
	}
	if f.CheckEverys != nil {
		ps.inRange("check_every_s", *f.CheckEverys, int64(minCheckEvery/time.Second), int64(maxCheckEvery/time.Second))
		c.CheckEvery = time.Duration(clamp(*f.CheckEverys, -1e6, 1e6)) * time.Second
	}
	if f.CheckTimeoutMs != nil {
		v, top := *f.CheckTimeoutMs, timeoutTop(c.CheckEvery)
		if lo := int64(minCheckTimeout / time.Millisecond); v < lo || v > top.Milliseconds() {
			ps.add("check_timeout_ms", "%d is not %s to %s (check_every_s)", v, millis(minCheckTimeout), millis(top))
		}
		c.CheckTimeout = time.Duration(clamp(v, -1e9, 1e9)) * time.Millisecond
	}
	if f.DownAfter != nil {
		ps.inRange("down_after", *f.DownAfter, 1, maxDownAfter)
		c.DownAfter = clampInt(*f.DownAfter)
	}
	if f.CloneFrom != nil {
		c.CloneFrom = *f.CloneFrom
	}
	if f.PublicURL != nil {
		c.PublicURL = *f.PublicURL
	}
	if f.Assign != nil {
		c.Assign = *f.Assign
	}
	if f.Buckets != nil {
		if c.Assign != AssignBuckets {
			ps.add("buckets", "buckets are read only with assign = %q", AssignBuckets)
		}
		ps.inRange("buckets", *f.Buckets, 1, maxBuckets)
		c.Buckets = clampInt(*f.Buckets)
	}
	if f.CohortHeader != nil {
		c.CohortHeader = *f.CohortHeader
	}
	if f.CohortParam != nil {
		c.CohortParam = *f.CohortParam
	}
	for i, e := range f.Edges {
		at := "edges[" + strconv.Itoa(i) + "]"
		edge := Edge{Weight: defaultWeight, Params: e.Params, PerVariantURIs: e.PerVariantURIs, PerRenditionURIs: e.PerRenditionURIs}
		if e.Pathway == nil {
			ps.add(at+".pathway", "an edge needs its pathway")
		} else {
			edge.Pathway = *e.Pathway
		}
		if e.Host != nil {
			edge.Host = *e.Host
		}
		if e.Weight != nil {
			ps.inRange(at+".weight", *e.Weight, 0, maxWeight)
			edge.Weight = uint32(clamp(*e.Weight, 0, math.MaxUint32))
		}
		if e.CheckURL != nil {
			edge.CheckURL = *e.CheckURL
		}
		c.Edges = append(c.Edges, edge)
	}
	for i, r := range f.Rules {
		at := "rules[" + strconv.Itoa(i) + "]"
		var rule Rule
		switch {
		case r.Buckets == nil:
			ps.add(at+".buckets", "a rule needs its buckets, [first, last]")
		case len(r.Buckets) != 2:
			ps.add(at+".buckets", "%d numbers are not [first, last]", len(r.Buckets))
		default:
			rule.First, rule.Last = clampInt(r.Buckets[0]), clampInt(r.Buckets[1])
		}
		if r.Priority == nil {
			ps.add(at+".priority", "a rule needs its priority")
		}
		rule.Priority = r.Priority
		if r.Cohort != nil && len(r.Cohort) == 0 {
			ps.add(at+".cohort", "an empty cohort holds no session; leave the key out for every session")
		}
		rule.Cohort = r.Cohort
		c.Rules = append(c.Rules, rule)
	}
	if f.QoE != nil {
		readQoE(f.QoE, &c, &ps)
	}
	// Check's rules over what was read; a key already found wrong as
	// written is not reported twice.
	for _, p := range c.Check() {
		if !ps.covers(p.Key) {
			ps = append(ps, p)
		}
	}
	return c, ps
}

// covers reports whether a problem was found at key or at a key holding it.
func (ps problems) covers(key string) bool {
	for _, p := range ps {
		if p.Key == key || strings.HasPrefix(key, p.Key) && strings.ContainsRune(".[", rune(key[len(p.Key)])) {
			return true
		}
	}
	return false
}

// Check runs Read's rules over a Config built in code.
func (c *Config) Check() []Problem {
	var ps problems
	if c.Name != "" {
		if r := idProblem(c.Name); r != "" {
			ps.add("name", "%q %s", c.Name, r)
		}
	}
	if r := pathProblem(c.Path); r != "" {
		ps.add("path", "%q %s", c.Path, r)
	}
	ps.inRange("ttl_s", int64(c.TTL), 1, maxTTL)
	if c.CheckEvery < minCheckEvery || c.CheckEvery > maxCheckEvery {
		ps.add("check_every_s", "%s is not %s to %s", seconds(c.CheckEvery), seconds(minCheckEvery), seconds(maxCheckEvery))
	}
	if top := timeoutTop(c.CheckEvery); c.CheckTimeout < minCheckTimeout || c.CheckTimeout > top {
		ps.add("check_timeout_ms", "%s is not %s to %s (check_every_s)", millis(c.CheckTimeout), millis(minCheckTimeout), millis(top))
	}
	ps.inRange("down_after", int64(c.DownAfter), 1, maxDownAfter)
	if c.CloneFrom != "" {
		if r := idProblem(c.CloneFrom); r != "" {
			ps.add("clone_from", "%q %s; empty sends no clones", c.CloneFrom, r)
		}
	}
	if c.PublicURL != "" {
		if r := publicURLProblem(c.PublicURL); r != "" {
			ps.add("public_url", "%q %s", c.PublicURL, r)
		}
	}
	switch c.Assign {
	case AssignRendezvous:
	case AssignBuckets:
		ps.inRange("buckets", int64(c.Buckets), 1, maxBuckets)
	default:
		ps.add("assign", "%q is neither %q nor %q", c.Assign, AssignRendezvous, AssignBuckets)
	}
	if c.CohortHeader != "" {
		if r := headerNameProblem(c.CohortHeader); r != "" {
			ps.add("cohort_header", "%q %s", c.CohortHeader, r)
		}
	}
	if c.CohortParam != "" {
		if r := cohortParamProblem(c.CohortParam); r != "" {
			ps.add("cohort_param", "%q %s", c.CohortParam, r)
		}
		if c.CohortHeader != "" {
			ps.add("cohort_param", "a cohort is read from cohort_header or from cohort_param, not both")
		}
	}
	c.checkEdges(&ps)
	c.checkRules(&ps)
	c.checkQoE(&ps)
	return ps
}

func (c *Config) checkEdges(ps *problems) {
	if len(c.Edges) > maxEdges {
		ps.add("edges", "%d edges are more than the %s a pool may have", len(c.Edges), grouped(maxEdges))
	}
	seen := make(map[string]int, len(c.Edges))
	for i, e := range c.Edges {
		at := "edges[" + strconv.Itoa(i) + "]"
		if r := idProblem(e.Pathway); r != "" {
			ps.add(at+".pathway", "%q %s", e.Pathway, r)
		} else if j, ok := seen[e.Pathway]; ok {
			ps.add(at+".pathway", "%q is edges[%d]'s pathway already; each is used once", e.Pathway, j)
		} else {
			seen[e.Pathway] = i
		}
		if e.Host != "" {
			if r := hostProblem(e.Host); r != "" {
				ps.add(at+".host", "%q %s", e.Host, r)
			}
			// Its clone would have its own base's ID, which players refuse.
			if c.CloneFrom != "" && e.Pathway == c.CloneFrom {
				ps.add(at+".pathway", "%q is clone_from: an edge with a host is a clone of clone_from and cannot have its ID", e.Pathway)
			}
		}
		if e.Weight > maxWeight {
			ps.add(at+".weight", "%d is not 0 to %s", e.Weight, grouped(maxWeight))
		}
		if e.CheckURL != "" {
			if r := checkURLProblem(e.CheckURL); r != "" {
				ps.add(at+".check_url", "%q %s", e.CheckURL, r)
			}
		}
		extras := len(e.Params) + len(e.PerVariantURIs) + len(e.PerRenditionURIs)
		switch {
		case extras == 0:
		case e.Host == "":
			ps.add(at, "params and per-variant or per-rendition URIs go into the edge's clone, and an edge without a host has none")
		case c.CloneFrom == "":
			ps.add(at, "params and per-variant or per-rendition URIs go into the edge's clone, and with clone_from empty no clones are sent")
		}
		checkMap(ps, at+".params", e.Params, paramNameProblem, paramValueProblem)
		checkMap(ps, at+".per_variant_uris", e.PerVariantURIs, stableIDProblem, uriProblem)
		checkMap(ps, at+".per_rendition_uris", e.PerRenditionURIs, stableIDProblem, uriProblem)
	}
}

// checkMap checks each key and value of a table, in the order of the keys.
func checkMap(ps *problems, at string, m map[string]string, keyProblem, valueProblem func(string) string) {
	if len(m) > maxParams {
		ps.add(at, "%d entries are more than the %d a table may have", len(m), maxParams)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if r := keyProblem(k); r != "" {
			ps.add(at+"."+k, "the key %q %s", k, r)
		}
		if r := valueProblem(m[k]); r != "" {
			ps.add(at+"."+k, "%q %s", m[k], r)
		}
	}
}

func (c *Config) checkRules(ps *problems) {
	if len(c.Rules) == 0 {
		return
	}
	if c.Assign != AssignBuckets {
		ps.add("rules[0]", "rules give buckets their priority, and are read only with assign = %q", AssignBuckets)
	}
	if len(c.Rules) > maxRules {
		ps.add("rules", "%d rules are more than the %d a pool may have", len(c.Rules), maxRules)
	}
	edges := make(map[string]bool, len(c.Edges))
	for _, e := range c.Edges {
		edges[e.Pathway] = true
	}
	for i, r := range c.Rules {
		at := "rules[" + strconv.Itoa(i) + "]"
		if c.Assign == AssignBuckets && !(1 <= r.First && r.First <= r.Last && r.Last <= c.Buckets) {
			ps.add(at+".buckets", "[%d, %d] is not [first, last] with 1 ≤ first ≤ last ≤ %d (buckets)", r.First, r.Last, c.Buckets)
		}
		if len(r.Priority) == 0 {
			ps.add(at+".priority", "an empty priority gives the buckets nothing")
		}
		seen := make(map[string]bool, len(r.Priority))
		for j, p := range r.Priority {
			k := at + ".priority[" + strconv.Itoa(j) + "]"
			switch {
			case !edges[p]:
				ps.add(k, "%q is the pathway of no edge of the pool", p)
			case seen[p]:
				ps.add(k, "%q is in the priority already", p)
			}
			seen[p] = true
		}
		if len(r.Cohort) > 0 && c.CohortHeader == "" && c.CohortParam == "" {
			ps.add(at+".cohort", "a cohort is read from cohort_header or cohort_param, and neither is set")
		}
		clear(seen)
		for j, v := range r.Cohort {
			k := at + ".cohort[" + strconv.Itoa(j) + "]"
			if p := cohortProblem(v); p != "" {
				ps.add(k, "%q %s", v, p)
			} else if seen[v] {
				ps.add(k, "%q is in the cohort already", v)
			}
			seen[v] = true
		}
	}
}

// timeoutTop is the longest a check may take: the interval, so that the
// checks of one edge never overlap. Against an interval that is itself out
// of range, only the outer bound is checked.
func timeoutTop(every time.Duration) time.Duration {
	if every < minCheckEvery || every > maxCheckEvery {
		return maxCheckEvery
	}
	return every
}

// inRange records a problem when v is not lo to hi.
func (ps *problems) inRange(key string, v, lo, hi int64) {
	if v < lo || v > hi {
		ps.add(key, "%d is not %s to %s", v, grouped(lo), grouped(hi))
	}
}

// grouped writes n with its thousands set apart by spaces, as the seed
// writes its ranges ("86 400"); four digits stay together.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) > 4 {
		var b strings.Builder
		for i, d := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(' ')
			}
			b.WriteRune(d)
		}
		s = b.String()
	}
	if neg {
		s = "-" + s
	}
	return s
}

// seconds and millis write a duration in the unit of its key, as grouped
// writes a whole number.
func seconds(d time.Duration) string { return inUnit(d, time.Second) }

func millis(d time.Duration) string { return inUnit(d, time.Millisecond) }

func inUnit(d, unit time.Duration) string {
	if d%unit == 0 {
		return grouped(int64(d / unit))
	}
	return strconv.FormatFloat(float64(d)/float64(unit), 'f', -1, 64)
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// clampInt converts v to an int, holding it to 32 bits so that a value out
// of range stays out of range wherever int is 32 bits.
func clampInt(v int64) int { return int(clamp(v, math.MinInt32, math.MaxInt32)) }

// clone copies c deeply, so that a pool's state never shares a slice or a
// map with its caller.
func (c Config) clone() Config {
	c.Edges = slices.Clone(c.Edges)
	for i := range c.Edges {
		e := &c.Edges[i]
		e.Params = cloneMap(e.Params)
		e.PerVariantURIs = cloneMap(e.PerVariantURIs)
		e.PerRenditionURIs = cloneMap(e.PerRenditionURIs)
	}
	c.Rules = slices.Clone(c.Rules)
	for i := range c.Rules {
		r := &c.Rules[i]
		r.Priority = slices.Clone(r.Priority)
		r.Cohort = slices.Clone(r.Cohort)
	}
	if c.QoE != nil {
		q := *c.QoE
		c.QoE = &q
	}
	return c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	n := make(map[string]string, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}
