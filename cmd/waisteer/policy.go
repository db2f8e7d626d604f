package main

// `waisteer policy sign` turns an operator's TOML into a signed steering
// policy, WSP1 (extension §3); `waisteer policy show` prints one. The TOML
// schema is documented by testdata/policy/example.toml.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

func init() {
	register(&command{
		name:    "policy sign",
		summary: "sign a steering policy written in TOML, writing its WSP1",
		run:     runPolicySign,
	})
	register(&command{
		name:    "policy show",
		summary: "print a WSP1 steering policy, its digest and whether it verifies",
		run:     runPolicyShow,
	})
}

// policyArgs parses flags that may come before or after the
// positional arguments, which it returns.
func policyArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func runPolicySign(e *env, args []string) error {
	fs := newFlags(e, "policy sign", "-key SIGNER.key [-room-id HEX] [-o OUT.wsp1] FILE.toml")
	keyFile := fs.String("key", "", "the signer's private key file (64 hexadecimal digits of seed)")
	roomID := fs.String("room-id", "", "the room id, 64 hexadecimal digits, when the file has no `room`")
	out := fs.String("o", "", "where to write the policy (default FILE with the extension .wsp1)")
	pos, err := policyArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("one TOML file is needed, %d given", len(pos))
	}
	if *keyFile == "" {
		return usagef("-key is needed")
	}
	name := pos[0]
	kb, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	key, err := sig.ParsePrivateKey(kb)
	if err != nil {
		return fmt.Errorf("%s: %v", *keyFile, err)
	}
	doc, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	p, warnings, err := compilePolicy(name, doc, *roomID)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	b, err := policy.Sign(p, key)
	if err != nil {
		// compilePolicy ran the rules already; this is a bug if it happens.
		return fmt.Errorf("%s: %v", name, err)
	}
	dst := *out
	if dst == "" {
		dst = strings.TrimSuffix(name, filepath.Ext(name)) + ".wsp1"
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s  %s\n", p.Digest(), dst)
	return nil
}

// The TOML schema. Pointers and `any` tell a key left out from a zero, and
// accept the forms example.toml documents.
type policyFile struct {
	Room             *string       `toml:"room"`
	Period           *string       `toml:"period"`
	Window           *string       `toml:"window"`
	Lag              *string       `toml:"lag"`
	Basis            any           `toml:"basis"`
	Floor            *uint8        `toml:"floor"`
	Tiers            []uint64      `toml:"tiers"`
	LatencyCeiling   *string       `toml:"latency_ceiling"`
	MinBuffer        *string       `toml:"min_buffer"`
	Hysteresis       any           `toml:"hysteresis"`
	TTL              *string       `toml:"ttl"`
	MinTTL           *string       `toml:"min_ttl"`
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
	Latency  *string           `toml:"latency"`
	Capacity any               `toml:"capacity"`
	MinShare any               `toml:"min_share"`
	Hops     []hopFile         `toml:"hops"`
}

type hopFile struct {
	Key     *string `toml:"key"`
	KeyFile *string `toml:"key_file"`
	Place   *string `toml:"place"`
}

// A fileError is a mistake at a key of the operator's file.
type fileError struct {
	key string // "pathway[1].id"
	msg string
}

// compiled is what compilePolicy knows of the file while it reads it.
type compiled struct {
	name  string
	f     policyFile
	lines map[string]int
	errs  []fileError
}

func (c *compiled) errorf(key, format string, args ...any) {
	c.errs = append(c.errs, fileError{key, fmt.Sprintf(format, args...)})
}

// at writes "FILE:LINE: KEY" for a key, with the line of the key or, when
// the key is not in the file, of the nearest table that holds it.
func (c *compiled) at(key string) string {
	if l := c.line(key); l > 0 {
		return fmt.Sprintf("%s:%d: %s", c.name, l, key)
	}
	return fmt.Sprintf("%s: %s", c.name, key)
}

func (c *compiled) line(key string) int {
	for k := key; k != ""; {
		if l, ok := c.lines[k]; ok {
			return l
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// err joins the errors in the order of their lines.
func (c *compiled) err() error {
	slices.SortStableFunc(c.errs, func(a, b fileError) int { return c.line(a.key) - c.line(b.key) })
	var errs []error
	for _, e := range c.errs {
		errs = append(errs, fmt.Errorf("%s: %s", c.at(e.key), e.msg))
	}
	return errors.Join(errs...)
}

// compilePolicy reads the operator's TOML into a policy that §3.3 accepts,
// unsigned, with the warnings of what real players trip on. Every error
// names the file, the line and the key.
func compilePolicy(name string, doc []byte, roomFlag string) (*policy.Policy, []string, error) {
	c := &compiled{name: name}
	d := toml.NewDecoder(bytes.NewReader(doc))
	d.DisallowUnknownFields()
	if err := d.Decode(&c.f); err != nil {
		return nil, nil, tomlError(name, doc, err)
	}
	c.lines = keyLines(doc)
	p := c.build(filepath.Dir(name), roomFlag)
	if len(c.errs) > 0 {
		return nil, nil, c.err()
	}
	// §3.3, with each rule's field put back at the key that gave it.
	for _, b := range policy.Breaches(p) {
		key := c.keyOf(b.Field, p)
		what := b.Value
		if key != strings.Replace(b.Field, "pathways", "pathway", 1) {
			what = b.Field + " " + b.Value
		}
		c.errorf(key, "%s breaks §3.3 (%s): %s", what, b.Code, strings.ReplaceAll(b.Rule, "pathways[", "pathway["))
	}
	if len(c.errs) > 0 {
		return nil, nil, c.err()
	}
	return p, c.warnings(p), nil
}

// tomlError places a decoding error at its line, and its column for syntax.
// An unknown key is named with its table's index, found by its line.
func tomlError(name string, doc []byte, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		lines := keyLines(doc)
		var errs []error
		for _, e := range strict.Errors {
			row, _ := e.Position()
			key := strings.Join(e.Key(), ".")
			for k, l := range lines {
				if l == row && strings.HasSuffix(k, "."+e.Key()[len(e.Key())-1]) && len(k) > len(key) {
					key = k
				}
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s: unknown key", name, row, key))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 {
			return fmt.Errorf("%s:%d:%d: %s: %s", name, row, col, strings.Join(k, "."), msg)
		}
		return fmt.Errorf("%s:%d:%d: %s", name, row, col, msg)
	}
	return fmt.Errorf("%s: %v", name, err)
}

// keyLines maps each key of a document that decodes to the line it is on:
// "period", "pathway[1]" (the table's header), "pathway[1].hops[0].key",
// "pathway[2].params.token". Array tables are numbered from 0 as they come.
func keyLines(doc []byte) map[string]int {
	lines := map[string]int{}
	counts := map[string]int{} // each array table, by its path, to how many it has
	var p unstable.Parser
	p.Reset(doc)
	line := func(n *unstable.Node, or int) int {
		if n.Raw.Length == 0 {
			return or
		}
		return p.Shape(n.Raw).Start.Line
	}
	// path resolves a dotted key under prefix: a part that names an array
	// table means its last table.
	path := func(prefix string, it unstable.Iterator, arrayTable bool) (string, int) {
		k, l := prefix, 0
		for it.Next() {
			n := it.Node()
			if k != "" {
				k += "."
			}
			k += string(n.Data)
			l = line(n, l)
			if it.IsLast() && arrayTable {
				i := counts[k]
				counts[k] = i + 1
				k += "[" + strconv.Itoa(i) + "]"
			} else if i, ok := counts[k]; ok {
				k += "[" + strconv.Itoa(i-1) + "]"
			}
		}
		return k, l
	}
	var value func(k string, n *unstable.Node, l int)
	value = func(k string, n *unstable.Node, l int) {
		switch n.Kind {
		case unstable.Array:
			it := n.Children()
			for i := 0; it.Next(); i++ {
				e := it.Node()
				ek := k + "[" + strconv.Itoa(i) + "]"
				lines[ek] = line(e, l)
				value(ek, e, lines[ek])
			}
		case unstable.InlineTable:
			it := n.Children()
			for it.Next() {
				kv := it.Node()
				kk, kl := path(k, kv.Key(), false)
				lines[kk] = kl
				value(kk, kv.Value(), kl)
			}
		}
	}
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			k, l := path("", e.Key(), e.Kind == unstable.ArrayTable)
			table = k
			lines[k] = l
		case unstable.KeyValue:
			k, l := path(table, e.Key(), false)
			lines[k] = l
			value(k, e.Value(), l)
		}
	}
	return lines
}

// keyOf names in the operator's file the policy field a rule names (§3.1,
// §3.2's names, as policy.Breach gives them).
func (c *compiled) keyOf(field string, p *policy.Policy) string {
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
func (c *compiled) build(dir, roomFlag string) *policy.Policy {
	f := &c.f
	p := &policy.Policy{}

	// The room: from the file, the flag, or both when they agree.
	switch {
	case f.Room == nil && roomFlag == "":
		c.errorf("room", "the room id is needed, in the file or as -room-id")
	case f.Room != nil:
		h, err := sig.ParseHash(*f.Room)
		if err != nil {
			c.errorf("room", "%v", err)
		}
		p.Room = h
		if roomFlag != "" && !strings.EqualFold(roomFlag, *f.Room) {
			c.errorf("room", "the file's room %s is not -room-id %s", *f.Room, roomFlag)
		}
	default:
		h, err := sig.ParseHash(roomFlag)
		if err != nil {
			c.errorf("room", "-room-id: %v", err)
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
				c.errorf(k+".clone_of", "no pathway has the id %q", *w.CloneOf)
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
			c.errorf("initial", "no pathway has the id %q", *f.Initial)
		}
	}
	return p
}

// need records a required key that is missing.
func (c *compiled) need(key string, v any) bool {
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
		c.errorf(key, "is needed")
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

func (c *compiled) duration(key string, s *string, u durationUnit) uint64 {
	if !c.need(key, s) {
		return 0
	}
	v, err := parseDuration(*s, u)
	if err != nil {
		c.errorf(key, "%v", err)
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
func (c *compiled) share(key string, v any, required bool) uint32 {
	if v == nil {
		if required {
			c.errorf(key, "is needed")
		}
		return 0
	}
	bad := func() uint32 {
		c.errorf(key, "%s is not a share: write an integer of ppm, or a string such as \"5%%\" or \"50000ppm\"", tomlText(v))
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
		c.errorf(key, "%s is not a whole number of ppm", tomlText(v))
		return 0
	}
	if ppm.Sign() < 0 || !ppm.Num().IsUint64() || ppm.Num().Uint64() > 1<<32-1 {
		c.errorf(key, "%s is not a u32 of ppm", tomlText(v))
		return 0
	}
	return uint32(ppm.Num().Uint64())
}

func (c *compiled) basis(v any) uint8 {
	switch v := v.(type) {
	case nil:
		c.errorf("basis", "is needed")
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
		c.errorf("basis", "%s is not a basis: \"bytes\" (1) or \"seconds\" (2)", tomlText(v))
	}
	return 0
}

func (c *compiled) capacity(key string, v any) uint32 {
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
	c.errorf(key, "%s is not a capacity: 0 to 4294967295 sessions (4294967295 is no limit), or \"unlimited\"", tomlText(v))
	return 0
}

func (c *compiled) place(key string, s *string) policy.Place {
	if !c.need(key, s) {
		return 0
	}
	switch *s {
	case "edge":
		return policy.Edge
	case "interior":
		return policy.Interior
	}
	c.errorf(key, "%q is not a place: \"edge\" or \"interior\"", *s)
	return 0
}

// hopKey reads a hop's key from `key` or from `key_file`, relative to the
// policy's directory: a *.key file is a private key, whose public key it
// takes; any other holds the public key.
func (c *compiled) hopKey(key string, h hopFile, dir string) sig.PublicKey {
	switch {
	case h.Key != nil && h.KeyFile != nil:
		c.errorf(key, "has both key and key_file; give one")
	case h.Key != nil:
		k, err := sig.ParsePublicKey(*h.Key)
		if err != nil {
			c.errorf(key+".key", "%v", err)
		}
		return k
	case h.KeyFile != nil:
		path := *h.KeyFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			c.errorf(key+".key_file", "%v", err)
			return sig.PublicKey{}
		}
		if strings.HasSuffix(path, ".key") {
			pk, err := sig.ParsePrivateKey(b)
			if err != nil {
				c.errorf(key+".key_file", "%s: %v", path, err)
			}
			if pk.IsZero() {
				return sig.PublicKey{}
			}
			return pk.Public()
		}
		k, err := sig.ParsePublicKey(string(b))
		if err != nil {
			c.errorf(key+".key_file", "%s: %v", path, err)
		}
		return k
	default:
		c.errorf(key, "needs key or key_file")
	}
	return sig.PublicKey{}
}

func tomlText(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// minSaneTTL is the TTL below which sign warns: every client polls the
// steering server once a TTL, and hls.js uses it as given.
const minSaneTTL = 10

// warnings lists what real players trip on (shared/players.md), for a policy
// that §3.3 accepts.
func (c *compiled) warnings(p *policy.Policy) []string {
	var ws []string
	warn := func(key, format string, args ...any) {
		ws = append(ws, c.at(key)+": "+fmt.Sprintf(format, args...))
	}
	for _, u := range []struct{ key, uri string }{
		{"server_uri", p.ServerURI}, {"reload_uri", p.ReloadURI}, {"decision_uri", p.DecisionURI},
	} {
		if !absoluteHTTP(u.uri) {
			warn(u.key, "%q is not an absolute http:// or https:// URI; players resolve a relative one "+
				"against different bases (Shaka against the media manifest's), so write it absolute", u.uri)
		}
	}
	for _, name := range reloadQueryNames(p.ReloadURI) {
		switch {
		case strings.HasPrefix(name, "_HLS_") || strings.HasPrefix(name, "_DASH_"):
			warn("reload_uri", "carries %s: players append their own _HLS_ and _DASH_ parameters, "+
				"and the server reads the first of each (§4.1), which would be this one", name)
		case name == "wai_session":
			warn("reload_uri", "carries wai_session: the server appends each client's own (§8.1) "+
				"and reads the first (COMPANION §6), which would be this one, for every client")
		}
	}
	if p.TTLs < minSaneTTL {
		warn("ttl", "%d s: every client polls the steering server once a TTL; below %d s that is a heavy load",
			p.TTLs, minSaneTTL)
	}
	ini := &p.Pathways[p.Initial]
	if !withinLimitsUnloaded(p, ini) {
		warn("initial", "pathway %q is not within the limits (§6.1: latency, floor tier or capacity), "+
			"so no client is steered to it first; §8.2 asks that the first manifest's first pathway "+
			"agree with the initial one", ini.ID)
	} else {
		// With no evidence every pathway has rank 4 and the order is by id
		// (§6.2 step 3): the first within the limits is what a client with
		// no report whose draw is in no band gets first (§6.4).
		first := ini
		for i := range p.Pathways {
			w := &p.Pathways[i]
			if withinLimitsUnloaded(p, w) && w.ID < first.ID {
				first = w
			}
		}
		if first != ini {
			warn("initial", "while no pathway has a figure, a client with no report whose draw is in no "+
				"band gets %q first, the lowest id within the limits (§6.2, §6.4), not the initial %q; "+
				"§8.2 asks that they agree", first.ID, ini.ID)
		}
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

// withinLimitsUnloaded is §6.1 for a pathway with no load.
func withinLimitsUnloaded(p *policy.Policy, w *policy.Pathway) bool {
	return w.LatencyMs <= p.LatencyCeilingMs && w.TopTier >= p.Floor && w.Capacity > 0
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

// reloadQueryNames returns the percent-decoded names of a URI's query's parts
// (§4.1's cutting).
func reloadQueryNames(u string) []string {
	_, q, ok := strings.Cut(u, "?")
	if !ok {
		return nil
	}
	var names []string
	for part := range strings.SplitSeq(q, "&") {
		name, _, _ := strings.Cut(part, "=")
		names = append(names, decodeQueryName(name))
	}
	return names
}

func decodeQueryName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func runPolicyShow(e *env, args []string) error {
	fs := newFlags(e, "policy show", "[-json] FILE.wsp1")
	asJSON := fs.Bool("json", false, "print the policy as JSON")
	pos, err := policyArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("one policy file is needed, %d given", len(pos))
	}
	b, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	p, err := policy.Parse(b)
	if err != nil {
		var re *reason.Error
		if !errors.As(err, &re) {
			return err
		}
		if *asJSON {
			writePolicyJSON(e.stdout, map[string]any{"refused": map[string]string{"code": string(re.Code), "detail": re.Detail}})
		} else {
			fmt.Fprintf(e.stdout, "%s: refused: %s: %s\n", pos[0], re.Code, re.Detail)
		}
		return exitCode(1)
	}
	verr := p.VerifySignature()
	if *asJSON {
		writePolicyJSON(e.stdout, policyJSON(p, verr))
	} else {
		showPolicy(e.stdout, pos[0], p, verr)
	}
	return nil
}

func writePolicyJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// The JSON form keeps the layout's names (§3.1, §3.2). A u64 is a decimal
// string, as COMPANION §8 writes an integer that can pass 2^53.
type (
	showJSON struct {
		Digest           string        `json:"digest"`
		Signature        signatureJSON `json:"signature"`
		Room             string        `json:"room"`
		Signer           string        `json:"signer"`
		PeriodUs         string        `json:"period_us"`
		WindowUs         string        `json:"window_us"`
		LagUs            string        `json:"lag_us"`
		Basis            uint8         `json:"basis"`
		Floor            uint8         `json:"floor"`
		LatencyCeilingMs uint32        `json:"latency_ceiling_ms"`
		MinBufferMs      uint32        `json:"min_buffer_ms"`
		HysteresisPPM    uint32        `json:"hysteresis_ppm"`
		TTLs             uint32        `json:"ttl_s"`
		MinTTLs          uint32        `json:"min_ttl_s"`
		Flags            uint8         `json:"flags"`
		Initial          uint8         `json:"initial"`
		Tiers            []string      `json:"tiers"`
		ServerURI        string        `json:"server_uri"`
		ReloadURI        string        `json:"reload_uri"`
		DecisionURI      string        `json:"decision_uri"`
		Pathways         []pathwayJSON `json:"pathways"`
		Sig              string        `json:"sig"`
	}
	signatureJSON struct {
		Verifies bool   `json:"verifies"`
		Code     string `json:"code,omitempty"`
	}
	pathwayJSON struct {
		ID          string      `json:"id"`
		Base        *uint8      `json:"base"` // null: not a clone
		Host        string      `json:"host"`
		Params      []paramJSON `json:"params"`
		TopTier     uint8       `json:"top_tier"`
		LatencyMs   uint32      `json:"latency_ms"`
		Capacity    uint32      `json:"capacity"`
		MinSharePPM uint32      `json:"min_share_ppm"`
		Hops        []hopJSON   `json:"hops"`
	}
	paramJSON struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	hopJSON struct {
		Key   string `json:"key"`
		Place string `json:"place"`
	}
)

func policyJSON(p *policy.Policy, verr error) showJSON {
	s := showJSON{
		Digest: p.Digest().String(), Signature: signatureJSON{Verifies: verr == nil, Code: string(reason.Of(verr))},
		Room: p.Room.String(), Signer: p.Signer.String(),
		PeriodUs: strconv.FormatUint(p.PeriodUs, 10), WindowUs: strconv.FormatUint(p.WindowUs, 10),
		LagUs: strconv.FormatUint(p.LagUs, 10), Basis: uint8(p.Basis), Floor: p.Floor,
		LatencyCeilingMs: p.LatencyCeilingMs, MinBufferMs: p.MinBufferMs, HysteresisPPM: p.HysteresisPPM,
		TTLs: p.TTLs, MinTTLs: p.MinTTLs, Flags: p.Flags, Initial: p.Initial,
		ServerURI: p.ServerURI, ReloadURI: p.ReloadURI, DecisionURI: p.DecisionURI,
		Tiers: []string{}, Pathways: []pathwayJSON{}, Sig: p.Sig.String(),
	}
	for _, t := range p.Tiers {
		s.Tiers = append(s.Tiers, strconv.FormatUint(t, 10))
	}
	for _, w := range p.Pathways {
		j := pathwayJSON{ID: w.ID, Host: w.Host, Params: []paramJSON{}, TopTier: w.TopTier,
			LatencyMs: w.LatencyMs, Capacity: w.Capacity, MinSharePPM: w.MinSharePPM, Hops: []hopJSON{}}
		if w.IsClone() {
			b := w.Base
			j.Base = &b
		}
		for _, q := range w.Params {
			j.Params = append(j.Params, paramJSON{q.Name, q.Value})
		}
		for _, h := range w.Hops {
			j.Hops = append(j.Hops, hopJSON{h.Key.String(), placeText(h.Place)})
		}
		s.Pathways = append(s.Pathways, j)
	}
	return s
}

func placeText(pl policy.Place) string {
	switch pl {
	case policy.Edge:
		return "edge"
	case policy.Interior:
		return "interior"
	}
	return strconv.Itoa(int(pl))
}

// showPolicy prints every field of a policy that reads, with its units.
func showPolicy(w io.Writer, name string, p *policy.Policy, verr error) {
	line := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-19s %s\n", k, fmt.Sprintf(format, args...))
	}
	line("policy", "%s (%d bytes)", name, len(p.Bytes()))
	line("digest", "%s", p.Digest())
	line("room", "%s", p.Room)
	if verr == nil {
		line("signer", "%s (signature verifies)", p.Signer)
	} else {
		line("signer", "%s (signature does not verify: %v)", p.Signer, verr)
	}
	line("period", "%s", showMicros(p.PeriodUs))
	line("window", "%s, %d periods", showMicros(p.WindowUs), p.WindowUs/p.PeriodUs)
	line("lag", "%s", showMicros(p.LagUs))
	switch p.Basis {
	case policy.PerByte:
		line("basis", "1, joules per delivered byte")
	default:
		line("basis", "2, joules per delivered second at or above the floor tier")
	}
	line("floor", "tier %d, %d bit/s", p.Floor, p.Tiers[p.Floor])
	for i, t := range p.Tiers {
		k := ""
		if i == 0 {
			k = "tiers"
		}
		line(k, "%d: %d bit/s", i, t)
	}
	line("latency ceiling", "%d ms", p.LatencyCeilingMs)
	line("min buffer", "%d ms", p.MinBufferMs)
	line("hysteresis", "%s", showPPM(p.HysteresisPPM))
	line("ttl", "%d s", p.TTLs)
	line("min ttl", "%d s", p.MinTTLs)
	line("queryBeforeStart", "%t", p.Flags&policy.FlagQueryBeforeStart != 0)
	line("initial", "%d, %s", p.Initial, p.Pathways[p.Initial].ID)
	line("server uri", "%s", p.ServerURI)
	line("reload uri", "%s", p.ReloadURI)
	line("decision uri", "%s", p.DecisionURI)
	line("pathways", "%d", len(p.Pathways))
	for i, pw := range p.Pathways {
		head := pw.ID
		if pw.IsClone() {
			head += fmt.Sprintf(", clone of %d (%s)", pw.Base, p.Pathways[pw.Base].ID)
		}
		fmt.Fprintf(w, "  [%d] %s\n", i, head)
		sub := func(k, format string, args ...any) {
			fmt.Fprintf(w, "      %-13s %s\n", k, fmt.Sprintf(format, args...))
		}
		if pw.IsClone() {
			host := pw.Host
			if host == "" {
				host = "(none)"
			}
			sub("host", "%s", host)
			for j, q := range pw.Params {
				k := ""
				if j == 0 {
					k = "params"
				}
				sub(k, "%s=%s", q.Name, q.Value)
			}
		}
		sub("top tier", "%d, %d bit/s", pw.TopTier, p.Tiers[pw.TopTier])
		sub("latency", "%d ms", pw.LatencyMs)
		if pw.Capacity == policy.Unlimited {
			sub("capacity", "unlimited")
		} else {
			sub("capacity", "%d sessions", pw.Capacity)
		}
		sub("min share", "%s", showPPM(pw.MinSharePPM))
		for j, h := range pw.Hops {
			k := ""
			if j == 0 {
				k = "hops"
			}
			sub(k, "%-8s %s", placeText(h.Place), h.Key)
		}
	}
}

// micros writes a duration in its largest exact unit, and in µs.
func showMicros(us uint64) string {
	switch {
	case us%1_000_000 == 0:
		return fmt.Sprintf("%d s (%d µs)", us/1_000_000, us)
	case us%1000 == 0:
		return fmt.Sprintf("%d ms (%d µs)", us/1000, us)
	}
	return fmt.Sprintf("%d µs", us)
}

// ppm writes parts per million and the exact percentage.
func showPPM(v uint32) string {
	pct := strconv.FormatUint(uint64(v)/10_000, 10)
	if f := v % 10_000; f != 0 {
		pct += "." + strings.TrimRight(fmt.Sprintf("%04d", f), "0")
	}
	return fmt.Sprintf("%d ppm (%s%%)", v, pct)
}
