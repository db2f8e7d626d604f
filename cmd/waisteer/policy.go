package main

// `waisteer policy sign` turns an operator's TOML into a signed steering
// policy, WSP1 (extension §3); `waisteer policy show` prints one. The TOML
// schema is documented by testdata/policy/example.toml.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/policy/source"
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
	fs := newFlags(e, "policy sign", "-key SIGNER.key [-room-id HEX] [-keylog FILE] [-o OUT.wsp1] FILE.toml")
	keyFile := fs.String("key", "", "the signer's private key file (64 hexadecimal digits of seed)")
	roomID := fs.String("room-id", "", "the room id, 64 hexadecimal digits, when the file has no `room`")
	keylogFile := fs.String("keylog", "", "the room's key log head: warn about each hop it does not let sign a figure")
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
	opts := source.Options{RoomID: *roomID}
	if *keylogFile != "" {
		hb, err := os.ReadFile(*keylogFile)
		if err != nil {
			return err
		}
		if opts.KeyLog, err = room.ParseKeyLogHead(hb); err != nil {
			return fmt.Errorf("%s: %v", *keylogFile, err)
		}
	}
	p, warnings, err := source.Compile(name, doc, opts)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	b, err := policy.Sign(p, key)
	if err != nil {
		// Compile ran the rules already; this is a bug if it happens.
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
