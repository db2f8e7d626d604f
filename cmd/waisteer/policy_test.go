package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// policyDir copies the documented example, with its room written in, a
// signer key and the hop keys its pathways name into a fresh directory, and
// returns the directory and the signer key's path.
func policyDir(t *testing.T) (dir, key string) {
	t.Helper()
	dir = t.TempDir()
	example, err := os.ReadFile(filepath.Join("testdata", "policy", "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	withRoom := strings.Replace(string(example), `# room = "aa`, `room = "aa`, 1)
	if withRoom == string(example) {
		t.Fatal("the example has no commented room to write in")
	}
	writeFile(t, filepath.Join(dir, "example.toml"), withRoom)
	key = filepath.Join(dir, "signer.key")
	writeFile(t, key, string(sig.MarshalPrivateKey(testKey(7))))
	for i, hop := range exampleHops {
		writeFile(t, filepath.Join(dir, hop+".key"), string(sig.MarshalPrivateKey(testKey(byte(11+i)))))
	}
	return dir, key
}

// exampleHops are the hop key files the example policy names.
var exampleHops = []string{"hop-a1", "hop-b1", "hop-eu1"}

// testKey is a private key of a fixed seed.
func testKey(b byte) sig.PrivateKey {
	var seed [32]byte
	seed[0] = b
	return sig.NewPrivateKey(seed)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// edit writes the example with each old string replaced by its new one.
func edit(t *testing.T, dir, name string, pairs ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "example.toml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("the example has no %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	path := filepath.Join(dir, name)
	writeFile(t, path, s)
	return path
}

// lineOf is the line of the first occurrence of text in a file.
func lineOf(t *testing.T, path, text string) int {
	t.Helper()
	b, _ := os.ReadFile(path)
	i := strings.Index(string(b), text)
	if i < 0 {
		t.Fatalf("%s has no %q", path, text)
	}
	return strings.Count(string(b[:i]), "\n") + 1
}

// §3: the documented example signs into a policy that Parse accepts, whose
// signature verifies, whose digest sign prints, and which show prints.
func TestPolicySignExample_3(t *testing.T) {
	dir, key := policyDir(t)
	src := filepath.Join(dir, "example.toml")
	out, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if errs != "" {
		t.Errorf("the example warns: %s", errs)
	}
	wsp1 := filepath.Join(dir, "example.wsp1")
	b, err := os.ReadFile(wsp1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := p.VerifySignature(); err != nil {
		t.Errorf("VerifySignature: %v", err)
	}
	if want := p.Digest().String() + "  " + wsp1 + "\n"; out != want {
		t.Errorf("sign printed %q, want %q", out, want)
	}
	// The example's values, converted exactly (§3.1, §3.2).
	if p.PeriodUs != 10_000_000 || p.WindowUs != 60_000_000 || p.LagUs != 500_000 ||
		p.Basis != policy.PerByte || p.Floor != 1 || p.LatencyCeilingMs != 3000 ||
		p.MinBufferMs != 4000 || p.HysteresisPPM != 50_000 || p.TTLs != 30 || p.MinTTLs != 5 ||
		p.Flags != policy.FlagQueryBeforeStart || p.Initial != 0 || len(p.Tiers) != 3 || p.Tiers[2] != 6_000_000 {
		t.Errorf("fields: %+v", p)
	}
	if p.Room.String() != "aa"+strings.Repeat("00", 30)+"55" {
		t.Errorf("room %s", p.Room)
	}
	if got := p.IDs(); strings.Join(got, " ") != "cdn-a cdn-b cdn-a.eu" {
		t.Errorf("ids %q", got)
	}
	a, b2, eu := p.Pathways[0], p.Pathways[1], p.Pathways[2]
	if a.Capacity != 20000 || b2.Capacity != policy.Unlimited || a.MinSharePPM != 50_000 ||
		b2.MinSharePPM != 50_000 || eu.MinSharePPM != 0 || b2.LatencyMs != 1200 {
		t.Errorf("pathways: %+v", p.Pathways)
	}
	if eu.Base != 0 || eu.Host != "eu.cdn-a.example.net" || a.Base != policy.NoBase {
		t.Errorf("clone: %+v", eu)
	}
	// key_file = "hop-a1.key": a private key's public half (§3.2's key).
	if len(a.Hops) != 1 || a.Hops[0].Place != policy.Edge || a.Hops[0].Key != testKey(11).Public() ||
		eu.Hops[0].Key != testKey(13).Public() {
		t.Errorf("hops: %+v", a.Hops)
	}

	out, errs, code = waisteer(t, "", "policy", "show", wsp1)
	if code != 0 {
		t.Fatalf("show exit %d: %s", code, errs)
	}
	for _, want := range []string{
		p.Digest().String(), "signature verifies", "10 s (10000000 µs)", "60 s (60000000 µs), 6 periods",
		"500 ms", "2: 6000000 bit/s", "50000 ppm (5%)", "queryBeforeStart    true",
		"[2] cdn-a.eu, clone of 0 (cdn-a)", "eu.cdn-a.example.net", "capacity      20000 sessions",
		"capacity      unlimited", "edge     " + testKey(11).Public().String(), "http://127.0.0.1:8080/v1/decisions/",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show does not print %q:\n%s", want, out)
		}
	}

	out, _, code = waisteer(t, "", "policy", "show", "-json", wsp1)
	if code != 0 {
		t.Fatalf("show -json exit %d", code)
	}
	var j struct {
		Digest    string
		Signature struct{ Verifies bool }
		PeriodUs  string `json:"period_us"`
		Pathways  []struct {
			ID   string
			Base *int
			Hops []struct{ Place string }
		}
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("show -json: %v\n%s", err, out)
	}
	if j.Digest != p.Digest().String() || !j.Signature.Verifies || j.PeriodUs != "10000000" ||
		len(j.Pathways) != 3 || j.Pathways[0].Base != nil || *j.Pathways[2].Base != 0 ||
		j.Pathways[0].Hops[0].Place != "edge" {
		t.Errorf("show -json: %s", out)
	}
}

// §3.2: key_file reads a public key, or a private key's public half; params
// are written in ascending order of their names (§3.3); -o and -room-id.
func TestPolicySignKeyFilesParams_3_2(t *testing.T) {
	dir, key := policyDir(t)
	var seed [32]byte
	seed[0] = 42
	hop := sig.NewPrivateKey(seed)
	writeFile(t, filepath.Join(dir, "hop.key"), string(sig.MarshalPrivateKey(hop)))
	other := sig.NewPrivateKey([32]byte{43}).Public()
	writeFile(t, filepath.Join(dir, "hop.pub"), other.String()+"\n")
	room := strings.Repeat("ab", 32)
	src := edit(t, dir, "p.toml",
		`room = "aa`+strings.Repeat("00", 30)+`55"`, "",
		`{ key_file = "hop-b1.key", place = "edge" },`,
		`{ key_file = "hop.key", place = "edge" }, { key_file = "hop.pub", place = "interior" },`,
		`# params = { token = "a%2Fb", region = "eu-west" }`, `params = { token = "a%2Fb", region = "eu-west", B = "" }`)
	out := filepath.Join(dir, "signed.bin")
	_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, "-room-id", room, "-o", out, src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Room.String() != room {
		t.Errorf("room %s, want -room-id %s", p.Room, room)
	}
	if h := p.Pathways[1].Hops; len(h) != 2 || h[0].Key != hop.Public() || h[1].Key != other || h[1].Place != policy.Interior {
		t.Errorf("hops from key files: %+v", h)
	}
	var names []string
	for _, q := range p.Pathways[2].Params {
		names = append(names, q.Name+"="+q.Value)
	}
	if strings.Join(names, "&") != "B=&region=eu-west&token=a%2Fb" {
		t.Errorf("params %q, want them in ascending bytewise order", names)
	}
	// The room of the file and the flag must agree.
	src = edit(t, dir, "q.toml")
	_, errs, code = waisteer(t, "", "policy", "sign", "-key", key, "-room-id", room, src)
	if code != 1 || !strings.Contains(errs, "-room-id") || !strings.Contains(errs, ":"+itoa(lineOf(t, src, `room = "aa`))+": room:") {
		t.Errorf("disagreeing rooms: exit %d, %s", code, errs)
	}
}

// A TOML syntax error names the file, its line and column.
func TestPolicySignSyntaxError(t *testing.T) {
	dir, key := policyDir(t)
	src := edit(t, dir, "p.toml", `lag = "500ms"`, `lag = "500ms`)
	_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
	line := lineOf(t, src, `lag = "500ms`)
	if code != 1 || !regexp.MustCompile(regexp.QuoteMeta(src)+`:`+itoa(line)+`:\d+: `).MatchString(errs) {
		t.Errorf("exit %d, stderr %q; want the file and line %d", code, errs, line)
	}
	if _, err := os.Stat(filepath.Join(dir, "p.wsp1")); err == nil {
		t.Errorf("a policy was written")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// hasLine reports whether a line of text begins with prefix and holds want.
func hasLine(text, prefix, want string) bool {
	for l := range strings.SplitSeq(text, "\n") {
		l = strings.TrimPrefix(l, "waisteer policy sign: ")
		if strings.HasPrefix(l, prefix) && strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// An unknown key is an error that names the key and its line, in a pathway
// with the pathway's index.
func TestPolicySignUnknownKey(t *testing.T) {
	dir, key := policyDir(t)
	src := edit(t, dir, "p.toml", `lag = "500ms"`, "lag = \"500ms\"\nlagg = \"1s\"",
		`latency = "1.2s"`, "latency = \"1.2s\"\ncapcity = 5")
	_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
	for _, want := range []string{
		src + ":" + itoa(lineOf(t, src, "lagg")) + ": lagg: unknown key",
		src + ":" + itoa(lineOf(t, src, "capcity")) + ": pathway[1].capcity: unknown key",
	} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("exit %d, stderr %q; want %q", code, errs, want)
		}
	}
}

// §3.3: a value that breaks a rule names the rule, the key and its line.
func TestPolicySignRules_3_3(t *testing.T) {
	dir, key := policyDir(t)
	for _, c := range []struct {
		name   string
		pairs  []string
		at     string // the text whose line is named
		want   string // the key and the message
		reason reason.Code
	}{
		{"an id", []string{`id = "cdn-b"`, `id = "cdn b"`}, `id = "cdn b"`,
			`pathway[1].id: "cdn b" breaks §3.3 (policy_invalid): an id is bytes of A-Z a-z 0-9 . - _`, reason.PolicyInvalid},
		{"window", []string{`window = "60s"`, `window = "61s"`}, `window = "61s"`,
			`window: window_us 61000000 breaks §3.3 (policy_invalid): window_us is a multiple of period_us (10000000)`, reason.PolicyInvalid},
		{"top_tier", []string{"top_tier = 1", "top_tier = 3"}, "top_tier = 3",
			`pathway[2].top_tier: 3 breaks §3.3 (policy_invalid): top_tier < n`, reason.PolicyInvalid},
		{"tiers", []string{"tiers = [800_000, 2_500_000", "tiers = [800_000, 800_000"}, "tiers = [",
			`tiers[1]: 800000 breaks §3.3 (policy_invalid): bitrates are strictly ascending`, reason.PolicyInvalid},
		{"a URI", []string{`decision_uri = "http://127.0.0.1:8080/v1/decisions/"`, `decision_uri = "http://127.0.0.1:8080/v1/decisions/#"`},
			`decision_uri = "`, `decision_uri: "http://127.0.0.1:8080/v1/decisions/#" breaks §3.3 (policy_invalid): a URI never holds '#'`, reason.PolicyInvalid},
		{"a param", []string{`# params = { token = "a%2Fb", region = "eu-west" }`, "params = {\n  token = \"a/b\",\n  region = \"eu\" }"},
			`token = "a/b"`, `pathway[2].params.token: pathways[2].params[1].value "a/b" breaks §3.3 (policy_invalid): a param's value is RFC 3986 unreserved characters and percent-encodings`, reason.PolicyInvalid},
		{"a host", []string{`host = "eu.cdn-a.example.net"`, `host = "eu.cdn-a.example.net:8080"`}, "host =",
			`pathway[2].host: "eu.cdn-a.example.net:8080" breaks §3.3 (policy_invalid): a clone's host is bytes of A-Z a-z 0-9 - .`, reason.PolicyInvalid},
		{"a hop key twice", []string{`{ key_file = "hop-b1.key"`, `{ key_file = "hop-a1.key"`},
			"{ key_file = \"hop-a1.key\", place = \"edge\" },\n]\n\n# A clone",
			`pathway[1].hops[0].key_file: pathways[1].hops[0].key ` + testKey(11).Public().String() + ` breaks §3.3 (policy_invalid): no hop key appears twice in the policy (pathway[0].hops[0].key has it)`, reason.PolicyInvalid},
		{"min shares", []string{"min_share = 50000", "min_share = \"95.0001%\""}, "min_share = \"95",
			`pathway[1].min_share: pathways[1].min_share_ppm 950001 (sum 1000001) breaks §3.3 (policy_invalid): the sum of the min_share_ppm is at most 1 000 000`, reason.PolicyInvalid},
		{"initial a clone", []string{`initial = "cdn-a"`, `initial = "cdn-a.eu"`}, "initial =",
			`initial: 2 breaks §3.3 (policy_invalid): initial is the index of a pathway that is not a clone`, reason.PolicyInvalid},
		{"no edge hop", []string{`{ key_file = "hop-b1.key", place = "edge" }`, `{ key_file = "hop-b1.key", place = "interior" }`},
			"hops = [\n  { key_file = \"hop-b1.key\"", `pathway[1].hops: no edge hop breaks §3.3 (policy_invalid): each pathway has at least one edge hop`, reason.PolicyInvalid},
		{"a clone of a later pathway", []string{`id = "cdn-b"`, "id = \"cdn-b\"\nclone_of = \"cdn-a.eu\""}, `clone_of = "cdn-a.eu"`,
			`pathway[1].clone_of: pathways[1].base 2 breaks §3.3 (clone_unknown): a clone's base is the index of a pathway before it`, reason.CloneUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := edit(t, dir, "p.toml", c.pairs...)
			_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
			want := src + ":" + itoa(lineOf(t, src, c.at)) + ": " + c.want
			if code != 1 || !hasLine(errs, want, "") {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errs, want)
			}
		})
	}
}

// Values that do not convert name the key and its line; a required key left
// out names the table it is missing from.
func TestPolicySignValues(t *testing.T) {
	dir, key := policyDir(t)
	for _, c := range []struct {
		name  string
		pairs []string
		at    string
		want  string
	}{
		{"a ttl not whole seconds", []string{`ttl = "30s"`, `ttl = "30.5s"`}, "ttl =", `ttl: "30.5s" is not a whole number of s`},
		{"a period below a µs", []string{`period = "10s"`, `period = "10.0000001s"`}, "period =", `period: "10.0000001s" is not a whole number of µs`},
		{"a duration with no unit", []string{`lag = "500ms"`, `lag = "500"`}, "lag =", `lag: "500" is not a duration`},
		{"a duration as a number", []string{`lag = "500ms"`, `lag = 500`}, "lag =", `lag: expected a duration string such as "20s", got an integer`},
		{"a share below a ppm", []string{`hysteresis = "5%"`, `hysteresis = "0.00005%"`}, "hysteresis =", `hysteresis: "0.00005%" is not a whole number of ppm`},
		{"a share as a float", []string{`hysteresis = "5%"`, `hysteresis = 0.05`}, "hysteresis =", `hysteresis: 0.05 is not a share`},
		{"a place", []string{`{ key_file = "hop-a1.key", place = "edge" }`, `{ key_file = "hop-a1.key", place = "inside" }`}, `place = "inside"`, `pathway[0].hops[0].place: "inside" is not a place`},
		{"a basis", []string{`basis = "bytes"`, `basis = "joules"`}, "basis =", `basis: "joules" is not a basis`},
		{"a floor too large for a u8", []string{"floor = 1", "floor = 256"}, "floor =", "floor: expected an integer from 0 to 255, got 256"},
		{"an unknown clone_of", []string{`clone_of = "cdn-a"`, `clone_of = "cdn-z"`}, `clone_of = "`, `pathway[2].clone_of: no pathway has the id "cdn-z"`},
		{"an unknown initial", []string{`initial = "cdn-a"`, `initial = "cdn-z"`}, "initial =", `initial: no pathway has the id "cdn-z"`},
		{"a missing top_tier", []string{"top_tier = 1\n", ""}, "[[pathway]]\nid = \"cdn-a.eu\"", `pathway[2].top_tier: is needed`},
		{"a missing window", []string{`window = "60s"`, ""}, "", `window: is needed`},
		{"a short hop key", []string{`{ key_file = "hop-eu1.key"`, `{ key = "c0ffee00"`}, `{ key = "c0ffee00`, `pathway[2].hops[0].key: a public key is 64 hexadecimal digits`},
		{"a missing key file", []string{`{ key_file = "hop-eu1.key"`, `{ key_file = "nothing.pub"`}, `{ key_file = "nothing.pub"`, `pathway[2].hops[0].key_file: open`},
		{"a capacity", []string{"capacity = 20000", "capacity = -1"}, "capacity =", `pathway[0].capacity: -1 is not a capacity`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := edit(t, dir, "p.toml", c.pairs...)
			_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
			prefix := src + ": "
			if c.at != "" {
				prefix = src + ":" + itoa(lineOf(t, src, c.at)) + ":"
			}
			if code != 1 || !hasLine(errs, prefix, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant a line %q ... %q", code, errs, prefix, c.want)
			}
		})
	}
}

// The warnings of shared/players.md fire, and the policy is still signed.
func TestPolicySignWarnings_8(t *testing.T) {
	dir, key := policyDir(t)
	for _, c := range []struct {
		name  string
		pairs []string
		want  string
	}{
		{"a relative reload_uri", []string{`reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1"`, `reload_uri = "/v1/steer?room=live1"`},
			`reload_uri: "/v1/steer?room=live1" is not an absolute http:// or https:// URI`},
		{"a relative server_uri", []string{`server_uri = "http://127.0.0.1:8080/v1/steer?room=live1"`, `server_uri = "steer?room=live1"`},
			`server_uri: "steer?room=live1" is not an absolute`},
		{"_HLS_ in reload_uri", []string{`reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1"`, `reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1&_HLS_pathway=cdn-a"`},
			`reload_uri: carries _HLS_pathway`},
		{"_DASH_ encoded in reload_uri", []string{`reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1"`, `reload_uri = "http://127.0.0.1:8080/v1/steer?%5FDASH%5Fthroughput=1"`},
			`reload_uri: carries _DASH_throughput`},
		{"wai_session in reload_uri", []string{`reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1"`, `reload_uri = "http://127.0.0.1:8080/v1/steer?wai_session=00"`},
			`reload_uri: carries wai_session`},
		{"a short ttl", []string{`ttl = "30s"`, `ttl = "9s"`}, `ttl: 9 s: every client polls`},
		{"clone params", []string{`# params = { token = "a%2Fb", region = "eu-west" }`, `params = { token = "a%2Fb" }`}, `pathway[2].params: clone "cdn-a.eu" has PARAMS, which Shaka ignores`},
		{"a clone with no host", []string{`host = "eu.cdn-a.example.net"`, ""}, `pathway[2]: clone "cdn-a.eu" has no host: dash.js needs HOST`},
		{"initial not first by id", []string{`initial = "cdn-a"`, `initial = "cdn-b"`}, `initial: while no pathway has a figure, a client with no report whose draw is in no band gets "cdn-a" first`},
		{"a window too long to cover", []string{`window = "60s"`, `window = "2560s"`}, `can never have a figure: covering its`},
		{"initial not within the limits", []string{`latency = "800ms"`, `latency = "3001ms"`}, `initial: pathway "cdn-a" is not within the limits`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := edit(t, dir, "p.toml", c.pairs...)
			_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
			if code != 0 || !strings.Contains(errs, "warning: "+src+":") || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant a warning %q", code, errs, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "p.wsp1")); err != nil {
				t.Errorf("a warning stopped the signing: %v", err)
			}
			os.Remove(filepath.Join(dir, "p.wsp1"))
		})
	}
}

// The warnings read reload_uri's query as §4.1 reads a request's (report's
// own reader): names percent-decoded, CMCD and wai_session among those read.
// A part with a bad %, which §4.1 skips, cannot be in a policy at all:
// §3.3 refuses the URI.
func TestPolicySignWarningsReadTheQuery_4_1(t *testing.T) {
	dir, key := policyDir(t)
	for _, c := range []struct {
		query string
		code  int
		want  string
	}{
		{"%5FHLS%5Fpathway=x", 0, "reload_uri: carries _HLS_pathway"},
		{"_HLS_msn=1", 0, "reload_uri: carries _HLS_msn"},
		{"CMCD=bl%3D1", 0, "reload_uri: carries CMCD"},
		{"wai%5Fsession=00", 0, "reload_uri: carries wai_session"},
		{"cmcd=x&_hls_pathway=y", 0, ""}, // names compare bytewise (SPEC-NOTES §4)
		{"_HLS_pathway=%zz", 1, "policy_invalid"},
		{"_HLS_pathway%=x", 1, "policy_invalid"},
	} {
		src := edit(t, dir, "p.toml", `reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1"`,
			`reload_uri = "http://127.0.0.1:8080/v1/steer?room=live1&`+c.query+`"`)
		_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
		if code != c.code || c.want != "" && !strings.Contains(errs, c.want) || c.want == "" && errs != "" {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.query, code, errs, c.code, c.want)
		}
	}
}

// show prints the refusal code and detail of a policy that does not read,
// and exits 1; a signature that fails is shown, not hidden.
func TestPolicyShowRefusal_COMPANION_1(t *testing.T) {
	dir, key := policyDir(t)
	if _, errs, code := waisteer(t, "", "policy", "sign", "-key", key, filepath.Join(dir, "example.toml")); code != 0 {
		t.Fatal(errs)
	}
	good, err := os.ReadFile(filepath.Join(dir, "example.wsp1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", good[:len(good)-1], "refused: truncated: "},
		{"malformed", append(bytes.Clone(good), 0), "refused: malformed: "},
		{"unknown_version", append([]byte("WSP1\x02"), good[5:]...), "refused: unknown_version: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".wsp1")
			writeFile(t, path, string(c.b))
			out, _, code := waisteer(t, "", "policy", "show", path)
			if code != 1 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, %q", code, out)
			}
			out, _, code = waisteer(t, "", "policy", "show", "-json", path)
			if code != 1 || !strings.Contains(out, `"code": "`+strings.Fields(c.want)[1][:len(strings.Fields(c.want)[1])-1]+`"`) {
				t.Errorf("-json: exit %d, %q", code, out)
			}
		})
	}
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 0x01
	path := filepath.Join(dir, "badsig.wsp1")
	writeFile(t, path, string(bad))
	out, _, code := waisteer(t, "", "policy", "show", path)
	if code != 0 || !strings.Contains(out, "signature does not verify: bad_signature") {
		t.Errorf("exit %d, %q", code, out)
	}
	out, _, _ = waisteer(t, "", "policy", "show", "-json", path)
	if !strings.Contains(out, `"verifies": false`) || !strings.Contains(out, `"code": "bad_signature"`) {
		t.Errorf("-json: %s", out)
	}
}

// sign needs a key and one file; show needs one file.
func TestPolicyUsage(t *testing.T) {
	dir, key := policyDir(t)
	src := filepath.Join(dir, "example.toml")
	for _, args := range [][]string{
		{"policy", "sign", src},
		{"policy", "sign", "-key", key},
		{"policy", "sign", "-key", key, src, src},
		{"policy", "show"},
	} {
		if _, errs, code := waisteer(t, "", args...); code != 2 || !strings.Contains(errs, "usage") && !strings.Contains(errs, "needed") {
			t.Errorf("%q: exit %d, %q", args, code, errs)
		}
	}
	// Flags may follow the file.
	if _, errs, code := waisteer(t, "", "policy", "sign", src, "-key", key); code != 0 {
		t.Errorf("flags after the file: exit %d, %s", code, errs)
	}
	if out, _, code := waisteer(t, "", "policy", "show", filepath.Join(dir, "example.wsp1"), "-json"); code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("-json after the file: exit %d, %q", code, out)
	}
}
