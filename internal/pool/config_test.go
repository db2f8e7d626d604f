package pool

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/tomlfile"
)

// seedExample is the [steering] block of the station seed
// (station-content-steering.md), verbatim.
const seedExample = `[steering]
ttl_s = 300
check_every_s = 5
down_after = 2
clone_from = "."

[[steering.edges]]
pathway = "edge-1"
host = "edge-1.edges.example"
check_url = "http://edge-1.edges.example/health"

[[steering.edges]]
pathway = "edge-2"
host = "edge-2.edges.example"
weight = 2                     # a bigger machine: twice the viewers
check_url = "http://edge-2.edges.example/health"

[[steering.edges]]
pathway = "bunny"              # after the pool, never checked
host = "kettle-cdn.example"
weight = 0
`

// serverFile is how the server's configuration embeds pools.
type serverFile struct {
	Steering *File  `toml:"steering"`
	Pool     []File `toml:"pool"`
}

func decodeFile(t *testing.T, doc string) (*tomlfile.File, serverFile) {
	t.Helper()
	var v serverFile
	f, err := tomlfile.Decode("control.toml", []byte(doc), &v)
	if err != nil {
		t.Fatal(err)
	}
	return f, v
}

// TestSeedExampleReads: the seed's example is a fixture that serves as
// written (issue 12 item 1), with the seed's defaults for what it leaves
// out (check_timeout_ms 2000, weight 1).
func TestSeedExampleReads(t *testing.T) {
	_, v := decodeFile(t, seedExample)
	c, ps := Read(v.Steering, false)
	if len(ps) > 0 {
		t.Fatalf("the seed's example: %v", ps)
	}
	want := Config{
		Path: "/api/v1/steering", TTL: 300, CheckEvery: 5 * time.Second, CheckTimeout: 2 * time.Second,
		DownAfter: 2, CloneFrom: ".", Assign: "rendezvous", Buckets: 12,
		Edges: []Edge{
			{Pathway: "edge-1", Host: "edge-1.edges.example", Weight: 1, CheckURL: "http://edge-1.edges.example/health"},
			{Pathway: "edge-2", Host: "edge-2.edges.example", Weight: 2, CheckURL: "http://edge-2.edges.example/health"},
			{Pathway: "bunny", Host: "kettle-cdn.example", Weight: 0},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("the seed's example reads as\n%+v\nwant\n%+v", c, want)
	}
	if ps := c.Check(); len(ps) > 0 {
		t.Errorf("Check of what Read read: %v", ps)
	}

	// As a [[pool]], with its name and path.
	doc := strings.ReplaceAll(seedExample, "[[steering.edges]]", "[[pool.edges]]")
	doc = strings.Replace(doc, "[steering]\n", "[[pool]]\nname = \"station\"\npath = \"/steer/station\"\n", 1)
	_, v = decodeFile(t, doc)
	c, ps = Read(&v.Pool[0], true)
	if len(ps) > 0 {
		t.Fatalf("the seed's example as a [[pool]]: %v", ps)
	}
	want.Name, want.Path = "station", "/steer/station"
	if !reflect.DeepEqual(c, want) {
		t.Errorf("the seed's example as a [[pool]] reads as\n%+v\nwant\n%+v", c, want)
	}
}

// TestBadInput: every out-of-range setting, duplicate pathway, host with a
// port or a scheme, https or userinfo check_url (issue 12, "Bad input"), and
// each other rule of Read, gives a Problem at its key, which tomlfile places
// on the line marked #! (the line of the value, or of the table that lacks
// it).
func TestBadInput(t *testing.T) {
	const edge = "[[steering.edges]]\npathway = \"a\"\nhost = \"a.example\"\n"
	const buckets = "[steering]\nassign = \"buckets\"\n" + edge
	for _, tc := range []struct {
		doc, key, rule string
	}{
		{"[steering]\nttl_s = 0 #!\n", "ttl_s", "0 is not 1 to 86 400"},
		{"[steering]\nttl_s = 86401 #!\n", "ttl_s", "86401 is not 1 to 86 400"},
		{"[steering]\nttl_s = 9223372036854775807 #!\n", "ttl_s", "9223372036854775807 is not 1 to 86 400"},
		{"[steering]\ncheck_every_s = 0 #!\n", "check_every_s", "0 is not 1 to 300"},
		{"[steering]\ncheck_every_s = 301 #!\n", "check_every_s", "301 is not 1 to 300"},
		{"[steering]\ncheck_timeout_ms = 99 #!\n", "check_timeout_ms", "99 is not 100 to"},
		{"[steering]\ncheck_timeout_ms = 5001 #!\n", "check_timeout_ms", "5001 is not 100 to 5000 (check_every_s)"},
		{"[steering]\ncheck_every_s = 1\ncheck_timeout_ms = 1001 #!\n", "check_timeout_ms", "1001 is not 100 to 1000"},
		{"[steering]\ndown_after = 0 #!\n", "down_after", "0 is not 1 to 20"},
		{"[steering]\ndown_after = 21 #!\n", "down_after", "21 is not 1 to 20"},
		{"[steering]\nassign = \"buckets\"\nbuckets = 0 #!\n", "buckets", "0 is not 1 to 1000"},
		{"[steering]\nassign = \"buckets\"\nbuckets = 1001 #!\n", "buckets", "1001 is not 1 to 1000"},
		{"[steering]\nbuckets = 6 #!\n", "buckets", `only with assign = "buckets"`},
		{"[steering]\nassign = \"random\" #!\n", "assign", `"random" is neither`},
		{"[steering]\nclone_from = \"a b\" #!\n", "clone_from", "has a space"},
		{"[steering]\nname = \"x\" #!\n", "name", "only a [[pool]]"},
		{"[steering]\npath = \"/x\" #!\n", "path", "only a [[pool]]"},
		{"[steering]\npublic_url = \"https://steer.example/x\" #!\n", "public_url", "more than scheme://host"},
		{"[steering]\npublic_url = \"ftp://steer.example\" #!\n", "public_url", "not an http:// or https://"},
		{"[steering]\npublic_url = \"https://u@steer.example\" #!\n", "public_url", "userinfo"},
		{"[steering]\npublic_url = \"https://steer.example:99999\" #!\n", "public_url", "port"},
		{"[steering]\ncohort_header = \"CDN Country\" #!\n", "cohort_header", "RFC 9110 token"},
		{"[steering]\ncohort_param = \"session\" #!\n", "cohort_param", "carries already"},
		{"[steering]\ncohort_param = \"_HLS_pathway\" #!\n", "cohort_param", "players add"},
		{"[steering]\ncohort_header = \"X-Country\"\ncohort_param = \"country\" #!\n", "cohort_param", "not both"},

		{"[steering]\n[[steering.edges]] #!\nhost = \"a.example\"\n", "edges[0].pathway", "needs its pathway"},
		{"[steering]\n[[steering.edges]]\npathway = \"edge 1\" #!\n", "edges[0].pathway", "has a space"},
		{"[steering]\n[[steering.edges]]\npathway = \"\" #!\n", "edges[0].pathway", "is not 1 to 64 bytes"},
		{edge + "[[steering.edges]]\npathway = \"a\" #!\n", "edges[1].pathway", `"a" is edges[0]'s pathway already`},
		{edge + "weight = -1 #!\n", "edges[0].weight", "-1 is not 0 to 1 000 000"},
		{edge + "weight = 1000001 #!\n", "edges[0].weight", "1000001 is not 0 to 1 000 000"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"a.example:8443\" #!\n", "edges[0].host", "has a port"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"[2001:db8::1]:443\" #!\n", "edges[0].host", "has a port"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"https://a.example\" #!\n", "edges[0].host", "has a scheme"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"a.example/hls\" #!\n", "edges[0].host", "has a path"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"u@a.example\" #!\n", "edges[0].host", "userinfo"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"2001:db8::1\" #!\n", "edges[0].host", "in brackets"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"a_1.example\" #!\n", "edges[0].host", "has '_'"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"-a.example\" #!\n", "edges[0].host", "starts or ends with -"},
		{"[steering]\n[[steering.edges]]\npathway = \"a\"\nhost = \"10.0.0.256\" #!\n", "edges[0].host", "neither an IPv4 address"},
		{"[steering]\n[[steering.edges]]\npathway = \".\" #!\nhost = \"a.example\"\n", "edges[0].pathway", "is clone_from"},
		{edge + "check_url = \"https://a.example/health\" #!\n", "edges[0].check_url", "no TLS client"},
		{edge + "check_url = \"http://u:pw@a.example/health\" #!\n", "edges[0].check_url", "userinfo"},
		{edge + "check_url = \"ftp://a.example/health\" #!\n", "edges[0].check_url", "not a plain http://"},
		{edge + "check_url = \"http:///health\" #!\n", "edges[0].check_url", "has no host"},
		{edge + "check_url = \"http://a.example:0/health\" #!\n", "edges[0].check_url", "port"},
		{edge + "check_url = \"http://a.example/he alth\" #!\n", "edges[0].check_url", "has a space"},
		{edge + "check_url = \"http://a.example:8080:9/h\" #!\n", "edges[0].check_url", ""},
		{"[steering]\n[[steering.edges]] #!\npathway = \"a\"\nparams = { token = \"abc\" }\n", "edges[0]", "without a host"},
		{"[steering]\nclone_from = \"\"\n[[steering.edges]] #!\npathway = \"a\"\nhost = \"a.example\"\nparams = { token = \"abc\" }\n", "edges[0]", "clone_from empty"},
		{edge + "params = { token = \"a\\\"b\" } #!\n", "edges[0].params.token", `has '"'`},
		{edge + "params = { token = \"a&b\" } #!\n", "edges[0].params.token", `has '&'`},
		{edge + "params = { _HLS_x = \"1\" } #!\n", "edges[0].params._HLS_x", "reserves"},
		{edge + "per_variant_uris = { \"a b\" = \"https://x.example/4k.m3u8\" } #!\n", "edges[0].per_variant_uris.a b", "stable ID"},
		{edge + "per_variant_uris = { video = \"https://x.example/4 k.m3u8\" } #!\n", "edges[0].per_variant_uris.video", "has a space"},
		{edge + "per_rendition_uris = { audio = \"ftp://x.example/a.m3u8\" } #!\n", "edges[0].per_rendition_uris.audio", "neither relative"},
		{edge + "per_rendition_uris = { audio = \"a%zz.m3u8\" } #!\n", "edges[0].per_rendition_uris.audio", "two hexadecimal digits"},

		{edge + "[[steering.rules]] #!\nbuckets = [1, 12]\npriority = [\"a\"]\n", "rules[0]", `only with assign = "buckets"`},
		{buckets + "[[steering.rules]]\nbuckets = [0, 3] #!\npriority = [\"a\"]\n", "rules[0].buckets", "[0, 3] is not [first, last]"},
		{buckets + "[[steering.rules]]\nbuckets = [3, 13] #!\npriority = [\"a\"]\n", "rules[0].buckets", "≤ 12 (buckets)"},
		{buckets + "[[steering.rules]]\nbuckets = [5, 2] #!\npriority = [\"a\"]\n", "rules[0].buckets", "[5, 2]"},
		{buckets + "[[steering.rules]]\nbuckets = [1] #!\npriority = [\"a\"]\n", "rules[0].buckets", "1 numbers are not [first, last]"},
		{buckets + "[[steering.rules]] #!\npriority = [\"a\"]\n", "rules[0].buckets", "needs its buckets"},
		{buckets + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [\"a\",\n\"cdn9\", #!\n]\n", "rules[0].priority[1]", `"cdn9" is the pathway of no edge`},
		{buckets + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [\"a\",\n\"a\", #!\n]\n", "rules[0].priority[1]", "in the priority already"},
		{buckets + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [] #!\n", "rules[0].priority", "empty priority"},
		{buckets + "[[steering.rules]] #!\nbuckets = [1, 12]\n", "rules[0].priority", "needs its priority"},
		{buckets + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [\"a\"]\ncohort = [\"US\"] #!\n", "rules[0].cohort", "neither is set"},
		{"[steering]\ncohort_header = \"X-Country\"\nassign = \"buckets\"\n" + edge + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [\"a\"]\ncohort = [] #!\n", "rules[0].cohort", "empty cohort"},
		{"[steering]\ncohort_header = \"X-Country\"\nassign = \"buckets\"\n" + edge + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [\"a\"]\ncohort = [\n\"US\\u0001\", #!\n]\n", "rules[0].cohort[0]", "printable ASCII"},
		{"[steering]\ncohort_header = \"X-Country\"\nassign = \"buckets\"\n" + edge + "[[steering.rules]]\nbuckets = [1, 12]\npriority = [\"a\"]\ncohort = [\"US\",\n\"US\", #!\n]\n", "rules[0].cohort[1]", "in the cohort already"},

		// Issue 17's [steering.qoe].
		{"[steering]\n[steering.qoe]\nfraction = 0.5\nwindow_s = 0 #!\n", "qoe.window_s", "0 is not 1 to 3600"},
		{"[steering]\n[steering.qoe]\nfraction = 0.5\nhold_s = 3601 #!\n", "qoe.hold_s", "3601 is not 1 to 3600"},
		{"[steering]\n[steering.qoe]\nfraction = 0.5\nmin_sessions = 0 #!\n", "qoe.min_sessions", "0 is not 1 to 1 000 000"},
		{"[steering]\n[steering.qoe]\nfloor_bps = -1 #!\n", "qoe.floor_bps", "-1 is not 0 to"},
		{"[steering]\n[steering.qoe]\nlowest_bps = 9223372036854775807 #!\n", "qoe.lowest_bps", "9223372036854775807 is not 0 to 1 000 000 000 000"},
		{"[steering]\n[steering.qoe]\nfraction = 1.0 #!\n", "qoe.fraction", "is not 0 to 1"},
		{"[steering]\n[steering.qoe]\nfraction = nan #!\n", "qoe.fraction", "NaN is not 0 to 1"},
		{"[steering]\n[steering.qoe]\nfraction = 0.5\nmargin = -0.1 #!\n", "qoe.margin", "is not 0 to 10"},
		{"[steering]\n[steering.qoe] #!\nwindow_s = 30\n", "qoe", "nothing would ever move"},
		{"[steering]\nttl_s = 60\n[steering.qoe]\nfraction = 0.5\nshort_ttl_s = 61 #!\n", "qoe.short_ttl_s", "61 is not 1 to 60 (ttl_s)"},

		{"[[pool]] #!\npath = \"/p\"\n", "name", "needs a name"},
		{"[[pool]] #!\nname = \"p\"\n", "path", "needs a path"},
		{"[[pool]]\nname = \"a b\" #!\npath = \"/p\"\n", "name", "has a space"},
		{"[[pool]]\nname = \"p\"\npath = \"/api/../x\" #!\n", "path", "dot segment"},
		{"[[pool]]\nname = \"p\"\npath = \"/a//b\" #!\n", "path", "empty segment"},
		{"[[pool]]\nname = \"p\"\npath = \"/a/\" #!\n", "path", "empty segment"},
		{"[[pool]]\nname = \"p\"\npath = \"api\" #!\n", "path", "not an absolute path"},
		{"[[pool]]\nname = \"p\"\npath = \"/a?b=1\" #!\n", "path", "has '?'"},
		{"[[pool]]\nname = \"p\"\npath = \"/\" #!\n", "path", "the root"},
	} {
		f, v := decodeFile(t, tc.doc)
		table, prefix, named := v.Steering, "steering.", false
		if v.Steering == nil {
			table, prefix, named = &v.Pool[0], "pool[0].", true
		}
		_, ps := Read(table, named)
		i := slices.IndexFunc(ps, func(p Problem) bool { return p.Key == tc.key })
		if i < 0 {
			t.Errorf("%s\nno problem at %s; problems: %v", tc.doc, tc.key, ps)
			continue
		}
		if !strings.Contains(ps[i].Rule, tc.rule) {
			t.Errorf("%s\n%s: %q, want it to say %q", tc.doc, tc.key, ps[i].Rule, tc.rule)
		}
		marked := 1 + slices.IndexFunc(strings.Split(tc.doc, "\n"), func(l string) bool { return strings.HasSuffix(l, "#!") })
		if l := f.Line(prefix + tc.key); l != marked {
			t.Errorf("%s\n%s is placed on line %d, want %d", tc.doc, tc.key, l, marked)
		}
	}
}

// TestEveryProblem: Read reports every problem, not only the first, and
// a value wrong as written once.
func TestEveryProblem(t *testing.T) {
	doc := `[steering]
ttl_s = 0
down_after = 99
[[steering.edges]]
pathway = "a"
host = "a.example:80"
weight = -3
check_url = "https://a.example/health"
[[steering.edges]]
pathway = "a"
`
	_, v := decodeFile(t, doc)
	_, ps := Read(v.Steering, false)
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	want := []string{"ttl_s", "down_after", "edges[0].weight", "edges[0].host", "edges[0].check_url", "edges[1].pathway"}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("problems at %q, want %q: %v", keys, want, ps)
	}
}

// TestCheckInCode: Check runs the same rules over a Config built in code,
// where zero values are not defaults; New and Reconfigure refuse what it
// refuses.
func TestCheckInCode(t *testing.T) {
	var zero Config
	ps := zero.Check()
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	for _, k := range []string{"path", "ttl_s", "check_every_s", "check_timeout_ms", "down_after", "assign"} {
		if !slices.Contains(keys, k) {
			t.Errorf("the zero Config: no problem at %s (%v)", k, ps)
		}
	}
	if _, err := New(zero, testKey); err == nil {
		t.Error("New of the zero Config: no error")
	}

	c := config("a", 1, "b", 2)
	c.CheckEvery, c.CheckTimeout = 1500*time.Millisecond, 1600*time.Millisecond
	ps = c.Check()
	if len(ps) != 1 || ps[0].Key != "check_timeout_ms" || ps[0].Rule != "1600 is not 100 to 1500 (check_every_s)" {
		t.Errorf("a timeout above a 1.5 s interval: %v", ps)
	}
	c.CheckTimeout = time.Second
	c.Edges[1].Weight = maxWeight + 1
	if ps = c.Check(); len(ps) != 1 || ps[0].Key != "edges[1].weight" {
		t.Errorf("a weight above the range: %v", ps)
	}
	c.Edges[1].Weight = 0
	if ps = c.Check(); len(ps) != 0 {
		t.Errorf("a good Config: %v", ps)
	}
	// Rendezvous reads no buckets, so a Config built in code may leave them 0.
	c.Buckets = 0
	if ps = c.Check(); len(ps) != 0 {
		t.Errorf("buckets 0 under rendezvous: %v", ps)
	}
	// No edges is a pool with steering off, not a mistake.
	c.Edges = nil
	p := newPool(t, c)
	if p.Enabled() {
		t.Error("a pool without edges is enabled")
	}
	if b, first, _ := p.Steer([]byte("x"), &Request{}); string(b) != "x" || first != -1 {
		t.Errorf("Steer without edges: %q, %d", b, first)
	}
}

// TestHosts: host names as RFC 1123 writes them, IPv4 addresses and
// bracketed IPv6 ones are hosts; nothing else is.
func TestHosts(t *testing.T) {
	for _, h := range []string{"edge-1.edges.example", "kettle-cdn.example", "a", "A-1.b2", "10.0.0.1",
		"[2001:db8::1]", "[::ffff:10.0.0.1]", "1a.example", strings.Repeat("a", 63) + ".example"} {
		if r := hostProblem(h); r != "" {
			t.Errorf("%q %s", h, r)
		}
	}
	for _, h := range []string{"", "a..b", ".a", "a.", "a-.b", strings.Repeat("a", 64) + ".example",
		"10.0.0", "1.2.3.4.5", "256.1.1.1", "[fe80::1%eth0]", "[10.0.0.1]", "[::1", "[::1]x", "a b", "é.example",
		"a.example:443", "http://a.example", "a.example/", "a@b", "a.123"} {
		if hostProblem(h) == "" {
			t.Errorf("%q is taken for a host", h)
		}
	}
}
