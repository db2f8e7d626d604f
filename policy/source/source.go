// Package source reads a steering policy as an operator writes it, in TOML
// (the schema is documented, key by key, in cmd/waisteer/testdata/policy/
// example.toml), into a policy.Policy that §3.3 accepts, ready to sign
// (policy.Sign); and warns about what such a policy would do to real
// players (shared/players.md) or to its own evidence, by the library's own
// rules: §4.1's reading of a query, §6.1's limits and §6.2's order, §7.1's
// bound on the records a decision names, and COMPANION §4.2's key log.
//
// Every error names the file, the line and the key (tomlfile); a rule of
// §3.3 a value breaks is put back at the key that gave it.
package source

import (
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/tomlfile"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/report"
)

// compiler is what Compile knows of the file while it reads it.
type compiler struct {
	*tomlfile.File
	f policyFile
}

// The TOML schema. Pointers and `any` tell a key left out from a zero, and
// accept the forms example.toml documents.
type policyFile struct {
	Room             *string       `toml:"room"`
	Period           *string       `toml:"period" want:"duration"`
	Window           *string       `toml:"window" want:"duration"`
	Lag              *string       `toml:"lag" want:"duration"`
	Basis            any           `toml:"basis"`
	Floor            *uint8        `toml:"floor"`
	Tiers            []uint64      `toml:"tiers"`
	LatencyCeiling   *string       `toml:"latency_ceiling" want:"duration"`
	MinBuffer        *string       `toml:"min_buffer" want:"duration"`
	Hysteresis       any           `toml:"hysteresis"`
	TTL              *string       `toml:"ttl" want:"duration"`
	MinTTL           *string       `toml:"min_ttl" want:"duration"`
	QueryBeforeStart *bool         `toml:"query_before_start"`
	Initial          *string       `toml:"initial"`
	ServerURI        *string       `toml:"server_uri"`
	ReloadURI        *string       `toml:"reload_uri"`
	DecisionURI      *string       `toml:"decision_uri"`
	Pathway          []pathwayFile `toml:"pathway"`
}

type pathwayFile struct {
	ID       *string           `toml:"id"`
	CloneOf  *string           `toml:"clone_of"`
	Host     *string           `toml:"host"`
	Params   map[string]string `toml:"params"`
	TopTier  *uint8            `toml:"top_tier"`
	Latency  *string           `toml:"latency" want:"duration"`
	Capacity any               `toml:"capacity"`
	MinShare any               `toml:"min_share"`
	Hops     []hopFile         `toml:"hops"`
}

type hopFile struct {
	Key     *string `toml:"key"`
	KeyFile *string `toml:"key_file"`
	Place   *string `toml:"place"`
}

// Compile reads the operator's TOML into a policy that §3.3 accepts,
// unsigned, with the warnings of what real players trip on. Every error
// names the file, the line and the key.
func Compile(name string, doc []byte, o Options) (*policy.Policy, []string, error) {
	c := &compiler{}
	var err error
	if c.File, err = tomlfile.Decode(name, doc, &c.f); err != nil {
		return nil, nil, err
	}
	p := c.build(filepath.Dir(name), o.RoomID)
	if c.Failed() {
		return nil, nil, c.Err()
	}
	// §3.3, with each rule's field put back at the key that gave it.
	for _, b := range policy.Breaches(p) {
		key := c.keyOf(b.Field, p)
		what := b.Value
		if key != strings.Replace(b.Field, "pathways", "pathway", 1) {
			what = b.Field + " " + b.Value
		}
		c.Errorf(key, "%s breaks §3.3 (%s): %s", what, b.Code, strings.ReplaceAll(b.Rule, "pathways[", "pathway["))
	}
	if c.Failed() {
		return nil, nil, c.Err()
	}
	ws := c.warnings(p)
	if o.KeyLog != nil {
		// COMPANION §4.2: a hop the key log does not let sign a figure
		// leaves its pathway without one.
		for _, g := range room.HopGaps(o.KeyLog, p) {
			ws = append(ws, c.At(c.keyOf(fmt.Sprintf("pathways[%d].hops[%d].key", g.Pathway, g.Hop), p))+": "+
				"the key log (seq "+strconv.FormatUint(o.KeyLog.Seq, 10)+") "+g.String())
		}
	}
	return p, ws, nil
}

// Options are what Compile is given beside the file.
type Options struct {
	// RoomID is the room id given apart from the file (`policy sign
	// -room-id`), 64 hexadecimal digits; "" when the file says it.
	RoomID string
	// KeyLog, when not nil, is the head of the room's key log: Compile
	// then also warns about each hop the key log does not let sign
	// evidence with a figure (room.HopGaps).
	KeyLog *room.KeyLogHead
}

// keyOf names in the operator's file the policy field a rule names (§3.1,
// §3.2's names, as policy.Breach gives them).
func (c *compiler) keyOf(field string, p *policy.Policy) string {
	switch field {
	case "period_us":
		return "period"
	case "window_us":
		return "window"
	case "lag_us":
		return "lag"
	case "latency_ceiling_ms":
		return "latency_ceiling"
	case "min_buffer_ms":
		return "min_buffer"
	case "hysteresis_ppm":
		return "hysteresis"
	case "ttl_s":
		return "ttl"
	case "min_ttl_s":
		return "min_ttl"
	case "flags":
		return "query_before_start"
	case "pathways":
		return "pathway"
	}
	rest, ok := strings.CutPrefix(field, "pathways[")
	if !ok {
		return field // basis, floor, tiers, tiers[i], the URIs, initial
	}
	i, sub := fieldIndex(rest)
	k := "pathway[" + strconv.Itoa(i) + "]"
	switch {
	case sub == ".base":
		return k + ".clone_of"
	case sub == ".latency_ms":
		return k + ".latency"
	case sub == ".min_share_ppm":
		return k + ".min_share"
	case strings.HasPrefix(sub, ".params["):
		j, _ := fieldIndex(sub[len(".params["):])
		if i < len(p.Pathways) && j < len(p.Pathways[i].Params) {
			return k + ".params." + p.Pathways[i].Params[j].Name
		}
		return k + ".params"
	case strings.HasPrefix(sub, ".hops["):
		j, part := fieldIndex(sub[len(".hops["):])
		hk := k + ".hops[" + strconv.Itoa(j) + "]"
		if part == ".key" && i < len(c.f.Pathway) && j < len(c.f.Pathway[i].Hops) && c.f.Pathway[i].Hops[j].KeyFile != nil {
			return hk + ".key_file"
		}
		return hk + part
	}
	return k + sub
}

// index reads "12]rest" as 12 and "rest".
func fieldIndex(s string) (int, string) {
	n, rest, _ := strings.Cut(s, "]")
	i, _ := strconv.Atoi(n)
	return i, rest
}

// build converts the file's values, recording each that does not convert.
func (c *compiler) build(dir, roomFlag string) *policy.Policy {
	f := &c.f
	p := &policy.Policy{}

	// The room: from the file, the flag, or both when they agree.
	switch {
	case f.Room == nil && roomFlag == "":
		c.Errorf("room", "the room id is needed, in the file or as -room-id")
	case f.Room != nil:
		h, err := sig.ParseHash(*f.Room)
		if err != nil {
			c.Errorf("room", "%v", err)
		}
		p.Room = h
		if roomFlag != "" && !strings.EqualFold(roomFlag, *f.Room) {
			c.Errorf("room", "the file's room %s is not -room-id %s", *f.Room, roomFlag)
		}
	default:
		h, err := sig.ParseHash(roomFlag)
		if err != nil {
			c.Errorf("room", "-room-id: %v", err)
		}
		p.Room = h
	}

	p.PeriodUs = c.duration("period", f.Period, inMicros)
	p.WindowUs = c.duration("window", f.Window, inMicros)
	p.LagUs = c.duration("lag", f.Lag, inMicros)
	p.Basis = policy.Basis(c.basis(f.Basis))
	if c.need("floor", f.Floor) {
		p.Floor = *f.Floor
	}
	if c.need("tiers", f.Tiers) {
		p.Tiers = f.Tiers
	}
	p.LatencyCeilingMs = uint32(c.duration("latency_ceiling", f.LatencyCeiling, inMillis))
	p.MinBufferMs = uint32(c.duration("min_buffer", f.MinBuffer, inMillis))
	p.HysteresisPPM = c.share("hysteresis", f.Hysteresis, true)
	p.TTLs = uint32(c.duration("ttl", f.TTL, inSeconds))
	p.MinTTLs = uint32(c.duration("min_ttl", f.MinTTL, inSeconds))
	if f.QueryBeforeStart != nil && *f.QueryBeforeStart {
		p.Flags = policy.FlagQueryBeforeStart
	}
	if c.need("server_uri", f.ServerURI) {
		p.ServerURI = *f.ServerURI
	}
	if c.need("reload_uri", f.ReloadURI) {
		p.ReloadURI = *f.ReloadURI
	}
	if c.need("decision_uri", f.DecisionURI) {
		p.DecisionURI = *f.DecisionURI
	}

	// Ids first, so that clone_of and initial may name any pathway.
	ids := map[string]int{}
	for i, w := range f.Pathway {
		if w.ID != nil {
			if _, dup := ids[*w.ID]; !dup {
				ids[*w.ID] = i
			}
		}
	}
	c.need("pathway", f.Pathway)
	for i, w := range f.Pathway {
		k := "pathway[" + strconv.Itoa(i) + "]"
		pw := policy.Pathway{Base: policy.NoBase, Capacity: policy.Unlimited}
		if c.need(k+".id", w.ID) {
			pw.ID = *w.ID
		}
		if w.CloneOf != nil {
			if b, ok := ids[*w.CloneOf]; ok {
				pw.Base = uint8(b)
			} else {
				c.Errorf(k+".clone_of", "no pathway has the id %q", *w.CloneOf)
			}
		}
		if w.Host != nil {
			pw.Host = *w.Host
		}
		// A TOML table has no order; §3.3 wants the names ascending.
		for _, name := range slices.Sorted(maps.Keys(w.Params)) {
			pw.Params = append(pw.Params, policy.Param{Name: name, Value: w.Params[name]})
		}
		if c.need(k+".top_tier", w.TopTier) {
			pw.TopTier = *w.TopTier
		}
		pw.LatencyMs = uint32(c.duration(k+".latency", w.Latency, inMillis))
		pw.Capacity = c.capacity(k+".capacity", w.Capacity)
		if w.MinShare != nil {
			pw.MinSharePPM = c.share(k+".min_share", w.MinShare, false)
		}
		c.need(k+".hops", w.Hops)
		for j, h := range w.Hops {
			hk := k + ".hops[" + strconv.Itoa(j) + "]"
			pw.Hops = append(pw.Hops, policy.Hop{Key: c.hopKey(hk, h, dir), Place: c.place(hk+".place", h.Place)})
		}
		p.Pathways = append(p.Pathways, pw)
	}
	if c.need("initial", f.Initial) {
		if i, ok := ids[*f.Initial]; ok {
			p.Initial = uint8(i)
		} else {
			c.Errorf("initial", "no pathway has the id %q", *f.Initial)
		}
	}
	return p
}

// need records a required key that is missing.
func (c *compiler) need(key string, v any) bool {
	missing := false
	switch v := v.(type) {
	case *string:
		missing = v == nil
	case *uint8:
		missing = v == nil
	case []uint64:
		missing = v == nil
	case []pathwayFile:
		missing = len(v) == 0
	case []hopFile:
		missing = v == nil
	}
	if missing {
		c.Errorf(key, "is needed")
	}
	return !missing
}

// Units of the fields a duration is written into.
var (
	inMicros  = durationUnit{"µs", big.NewRat(1_000_000, 1), 1<<64 - 1}
	inMillis  = durationUnit{"ms", big.NewRat(1000, 1), 1<<32 - 1}
	inSeconds = durationUnit{"s", big.NewRat(1, 1), 1<<32 - 1}
)

type durationUnit struct {
	name      string
	perSecond *big.Rat
	max       uint64
}

func (c *compiler) duration(key string, s *string, u durationUnit) uint64 {
	if !c.need(key, s) {
		return 0
	}
	v, err := parseDuration(*s, u)
	if err != nil {
		c.Errorf(key, "%v", err)
	}
	return v
}

// durationUnits are the units a duration may be written in, longest first
// so that "ms" is not read as "m".
var durationUnits = []struct {
	name    string
	seconds *big.Rat
}{
	{"ms", big.NewRat(1, 1000)},
	{"us", big.NewRat(1, 1_000_000)},
	{"µs", big.NewRat(1, 1_000_000)},
	{"ns", big.NewRat(1, 1_000_000_000)},
	{"h", big.NewRat(3600, 1)},
	{"m", big.NewRat(60, 1)},
	{"s", big.NewRat(1, 1)},
}

// parseDuration reads a duration such as "1m30s" or "1.5s" exactly and
// converts it to the unit u, refusing what is not a whole number of it:
// the policy's quantities are integers (§2), never rounded.
func parseDuration(s string, u durationUnit) (uint64, error) {
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, fmt.Errorf("an empty string is not a duration")
	}
	total := new(big.Rat)
	rest := s
	for rest != "" {
		num, after := cutDecimal(rest)
		if num == "" {
			return 0, fmt.Errorf("%q is not a duration such as \"500ms\", \"2s\" or \"1m30s\"", s)
		}
		matched := false
		for _, du := range durationUnits {
			if a, ok := strings.CutPrefix(after, du.name); ok {
				r, _ := new(big.Rat).SetString(num)
				total.Add(total, r.Mul(r, du.seconds))
				rest, matched = a, true
				break
			}
		}
		if !matched {
			return 0, fmt.Errorf("%q is not a duration: a number needs a unit of h, m, s, ms, us or ns", s)
		}
	}
	v := new(big.Rat).Mul(total, u.perSecond)
	if !v.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of %s", s, u.name)
	}
	if !v.Num().IsUint64() || v.Num().Uint64() > u.max {
		return 0, fmt.Errorf("%q is more than %d %s", s, u.max, u.name)
	}
	return v.Num().Uint64(), nil
}

// cutDecimal splits "12.5ms" into "12.5" and "ms": digits, then
// optionally a point and digits.
func cutDecimal(s string) (string, string) {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return "", s
	}
	if i < len(s) && s[i] == '.' {
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return "", s
		}
		i = j
	}
	return s[:i], s[i:]
}

// share reads parts per million: an integer, "5%" or "50000ppm".
func (c *compiler) share(key string, v any, required bool) uint32 {
	if v == nil {
		if required {
			c.Errorf(key, "is needed")
		}
		return 0
	}
	bad := func() uint32 {
		c.Errorf(key, "%s is not a share: write an integer of ppm, or a string such as \"5%%\" or \"50000ppm\"", tomlfile.Text(v))
		return 0
	}
	var ppm *big.Rat
	switch v := v.(type) {
	case int64:
		ppm = new(big.Rat).SetInt64(v)
	case string:
		if n, ok := strings.CutSuffix(v, "%"); ok {
			num, rest := cutDecimal(n)
			if num == "" || rest != "" {
				return bad()
			}
			ppm, _ = new(big.Rat).SetString(num)
			ppm.Mul(ppm, big.NewRat(10_000, 1))
		} else if n, ok := strings.CutSuffix(v, "ppm"); ok {
			num, rest := cutDecimal(n)
			if num == "" || rest != "" {
				return bad()
			}
			ppm, _ = new(big.Rat).SetString(num)
		} else {
			return bad()
		}
	default:
		return bad()
	}
	if !ppm.IsInt() {
		c.Errorf(key, "%s is not a whole number of ppm", tomlfile.Text(v))
		return 0
	}
	if ppm.Sign() < 0 || !ppm.Num().IsUint64() || ppm.Num().Uint64() > 1<<32-1 {
		c.Errorf(key, "%s is not a u32 of ppm", tomlfile.Text(v))
		return 0
	}
	return uint32(ppm.Num().Uint64())
}

func (c *compiler) basis(v any) uint8 {
	switch v := v.(type) {
	case nil:
		c.Errorf("basis", "is needed")
	case string:
		switch v {
		case "bytes":
			return uint8(policy.PerByte)
		case "seconds":
			return uint8(policy.PerSecond)
		}
	case int64:
		if 0 <= v && v <= 255 {
			return uint8(v) // §3.3 says which are allowed
		}
	}
	if v != nil {
		c.Errorf("basis", "%s is not a basis: \"bytes\" (1) or \"seconds\" (2)", tomlfile.Text(v))
	}
	return 0
}

func (c *compiler) capacity(key string, v any) uint32 {
	switch v := v.(type) {
	case nil:
		return policy.Unlimited
	case string:
		if v == "unlimited" {
			return policy.Unlimited
		}
	case int64:
		if 0 <= v && v <= policy.Unlimited {
			return uint32(v)
		}
	}
	c.Errorf(key, "%s is not a capacity: 0 to 4294967295 sessions (4294967295 is no limit), or \"unlimited\"", tomlfile.Text(v))
	return 0
}

func (c *compiler) place(key string, s *string) policy.Place {
	if !c.need(key, s) {
		return 0
	}
	switch *s {
	case "edge":
		return policy.Edge
	case "interior":
		return policy.Interior
	}
	c.Errorf(key, "%q is not a place: \"edge\" or \"interior\"", *s)
	return 0
}

// hopKey reads a hop's key from `key` or from `key_file`, relative to the
// policy's directory: a *.key file is a private key, whose public key it
// takes; any other holds the public key.
func (c *compiler) hopKey(key string, h hopFile, dir string) sig.PublicKey {
	switch {
	case h.Key != nil && h.KeyFile != nil:
		c.Errorf(key, "has both key and key_file; give one")
	case h.Key != nil:
		k, err := sig.ParsePublicKey(*h.Key)
		if err != nil {
			c.Errorf(key+".key", "%v", err)
		}
		return k
	case h.KeyFile != nil:
		path := *h.KeyFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			c.Errorf(key+".key_file", "%v", err)
			return sig.PublicKey{}
		}
		if strings.HasSuffix(path, ".key") {
			pk, err := sig.ParsePrivateKey(b)
			if err != nil {
				c.Errorf(key+".key_file", "%s: %v", path, err)
			}
			if pk.IsZero() {
				return sig.PublicKey{}
			}
			return pk.Public()
		}
		k, err := sig.ParsePublicKey(string(b))
		if err != nil {
			c.Errorf(key+".key_file", "%s: %v", path, err)
		}
		return k
	default:
		c.Errorf(key, "needs key or key_file")
	}
	return sig.PublicKey{}
}

// minSaneTTL is the TTL below which sign warns: every client polls the
// steering server once a TTL, and hls.js uses it as given.
const minSaneTTL = 10

// warnings lists what real players trip on (shared/players.md), for a policy
// that §3.3 accepts.
func (c *compiler) warnings(p *policy.Policy) []string {
	var ws []string
	warn := func(key, format string, args ...any) {
		ws = append(ws, c.At(key)+": "+fmt.Sprintf(format, args...))
	}
	for _, u := range []struct{ key, uri string }{
		{"server_uri", p.ServerURI}, {"reload_uri", p.ReloadURI}, {"decision_uri", p.DecisionURI},
	} {
		if !absoluteHTTP(u.uri) {
			warn(u.key, "%q is not an absolute http:// or https:// URI; players resolve a relative one "+
				"against different bases (Shaka against the media manifest's), so write it absolute", u.uri)
		}
	}
	// §4.1: of the parts with a name the server reads, the first is read;
	// a player appends its own after the RELOAD-URI's query.
	for _, name := range report.QueryNames(p.ReloadURI) {
		switch {
		case strings.HasPrefix(name, "_HLS_") || strings.HasPrefix(name, "_DASH_"):
			warn("reload_uri", "carries %s: players append their own _HLS_ and _DASH_ parameters, "+
				"and the server reads the first of each (§4.1), which would be this one", name)
		case name == "CMCD":
			warn("reload_uri", "carries CMCD: the server reads the first CMCD part (§4.1, §4.4), "+
				"which would be this one for every client")
		case name == "wai_session":
			warn("reload_uri", "carries wai_session: the server appends each client's own (§8.1) "+
				"and reads the first (COMPANION §6), which would be this one, for every client")
		}
	}
	if p.TTLs < minSaneTTL {
		warn("ttl", "%d s: every client polls the steering server once a TTL; below %d s that is a heavy load",
			p.TTLs, minSaneTTL)
	}
	ini := int(p.Initial)
	if decision.PathwayLimits(p, ini, false, 0) != decision.Within {
		warn("initial", "pathway %q is not within the limits (§6.1: latency, floor tier or capacity), "+
			"so no client is steered to it first; §8.2 asks that the first manifest's first pathway "+
			"agree with the initial one", p.Pathways[ini].ID)
	} else if first, ok := firstWithoutEvidence(p); ok && first != ini {
		warn("initial", "while no pathway has a figure, a client with no report whose draw is in no "+
			"band gets %q first (§6.2, §6.4), not the initial %q; §8.2 asks that they agree",
			p.Pathways[first].ID, p.Pathways[ini].ID)
	}
	for i := range p.Pathways {
		w := &p.Pathways[i]
		if !w.IsClone() {
			continue
		}
		k := "pathway[" + strconv.Itoa(i) + "]"
		if w.Host == "" {
			warn(k, "clone %q has no host: dash.js needs HOST to use a clone", w.ID)
		}
		if len(w.Params) > 0 {
			warn(k+".params", "clone %q has PARAMS, which Shaka ignores: a clone that needs them "+
				"to reach its content fails on Shaka", w.ID)
		}
	}
	// §7.1: a decision names at most 255 records under a pathway, and a
	// covered hop names at least W/P of them (§5.2).
	if p.PeriodUs > 0 {
		perHop := p.WindowUs / p.PeriodUs
		for i := range p.Pathways {
			w := &p.Pathways[i]
			if need := perHop * uint64(len(w.Hops)); need > evidence.MaxNamed {
				warn("pathway["+strconv.Itoa(i)+"]", "pathway %q can never have a figure: covering its %d hops "+
					"over a window of %d periods names %d records, and a decision names at most %d (§7.1)",
					w.ID, len(w.Hops), perHop, need, evidence.MaxNamed)
			}
		}
	}
	return ws
}

// firstWithoutEvidence is the first pathway the rule gives a client of no
// report, whose draw is in no band, while no pathway has evidence (§6.4
// step 3 or 6 over the order of §6.2 with every pathway of rank 4); false
// when every draw is in a band (the shares sum to 1 000 000).
func firstWithoutEvidence(p *policy.Policy) (int, bool) {
	var sum uint32
	for i := range p.Pathways {
		sum += p.Pathways[i].MinSharePPM
	}
	if sum >= 1_000_000 {
		return 0, false
	}
	ev := make([]evidence.Pathway, len(p.Pathways))
	for i := range ev {
		ev[i].Status = evidence.StatusEmpty
	}
	r, err := decision.NewRanking(p, sig.Hash{}, 0, 0, ev)
	if err != nil {
		return 0, false
	}
	o, err := r.DecideDrawn(report.Report{}, 999_999, make([]uint32, len(p.Pathways)))
	if err != nil {
		return 0, false
	}
	return int(o.First), true
}

func absoluteHTTP(u string) bool {
	l := strings.ToLower(u)
	for _, s := range []string{"http://", "https://"} {
		if rest, ok := strings.CutPrefix(l, s); ok {
			return rest != "" && rest[0] != '/' && rest[0] != '?'
		}
	}
	return false
}
