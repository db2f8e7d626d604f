package pool

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/waisteer/waisteer/internal/fuzzing"
)

// TestMain keeps the inputs the fuzzing engine finds as found
// (fuzzing.SignedInputs): FuzzSteer's are not signed, but its minimizer
// tries every span of each of three strings, and held both workers for
// most of a 20 s run, against some 4 000 executions a second without it.
func TestMain(m *testing.M) { fuzzing.Main(m) }

// fuzzPools are a bucket pool whose cohort is a query parameter, and a
// rendezvous pool of more edges than Steer keeps on its stack, whose
// cohort is a header.
func fuzzPools(t testing.TB) []*Pool {
	b := config("a", 1, "b", 2, "c", 0)
	b.Assign, b.Buckets, b.CohortParam = AssignBuckets, 7, "country"
	b.Edges[0].Params = map[string]string{"token": "t"}
	b.Rules = []Rule{
		{First: 1, Last: 3, Priority: []string{"c", "a"}, Cohort: []string{"US"}},
		{First: 2, Last: 7, Priority: []string{"b"}},
	}
	var edges []any
	for i := range smallPool + 6 {
		edges = append(edges, "e"+strconv.Itoa(i), i%4)
	}
	r := config(edges...)
	r.CohortHeader, r.CloneFrom = "X-Country", ""
	return []*Pool{newPool(t, b), newPool(t, r)}
}

// FuzzSteer: Steer reads outside bytes (the query, the cohort header, the
// base the request reached, the pathway a player reports) and never panics; every manifest is the seed's
// JSON, lists each pathway at most once and at least one, puts first the
// edge it reports, carries its session back, never carries _HLS_, _DASH_
// or CMCD parameters, and steers the next request from its RELOAD-URI the
// same way.
func FuzzSteer(f *testing.F) {
	pools := fuzzPools(f)
	s := refSession(f, testKey, 3, 2).String()
	for _, q := range []string{"", "session=" + s + "&bucket=2", "_HLS_pathway=a&_HLS_throughput=500000&country=US",
		"session=%zz&bucket=99999999", "country=a+b%26c&country=US", "&&==&%", "bucket=0&session=" + strings.ToUpper(s)} {
		f.Add(q, "US", "https://steer.example")
	}
	f.Add("session="+s, "", "http://a\"\\\x00\xff")
	edges := [][]Edge{pools[0].Config().Edges, pools[1].Config().Edges}
	f.Fuzz(func(t *testing.T, query, cohort, base string) {
		for i, p := range pools {
			edges := edges[i]
			b, first, sess := p.Steer(nil, &Request{RawQuery: query, Cohort: cohort, Base: base})
			if !json.Valid(b) {
				t.Fatalf("%q: %s is not JSON", query, b)
			}
			m := decode(t, b)
			if len(m.Priority) == 0 || first < 0 || first >= len(edges) || edges[first].Pathway != m.Priority[0] {
				t.Fatalf("%q: first %d, priority %q", query, first, m.Priority)
			}
			seen := map[string]bool{}
			for _, id := range m.Priority {
				if seen[id] || !slices.ContainsFunc(edges, func(e Edge) bool { return e.Pathway == id }) {
					t.Fatalf("%q: priority %q", query, m.Priority)
				}
				seen[id] = true
			}
			head := jsonText(base) + DefaultPath + "?"
			if !strings.HasPrefix(m.Reload, head) {
				t.Fatalf("%q, base %q: RELOAD-URI %q", query, base, m.Reload)
			}
			rq := m.Reload[len(head):]
			vs, err := url.ParseQuery(rq)
			if err != nil || vs.Get("session") != sess.String() {
				t.Fatalf("%q: RELOAD-URI %q for session %s", query, m.Reload, sess)
			}
			for k := range vs {
				if k != "session" && k != "bucket" && k != "country" {
					t.Fatalf("%q: RELOAD-URI %q carries %q", query, m.Reload, k)
				}
			}
			again, _, sess2 := p.Steer(nil, &Request{RawQuery: rq, Cohort: cohort, Base: base})
			if sess2 != sess || !bytes.Equal(again, b) {
				t.Fatalf("%q: %s, then from its RELOAD-URI %s", query, b, again)
			}
			// Request.Reported (any string; an edge's): a new session's
			// answer puts a listed edge it names first, and the answers
			// of a kept session do not change.
			for _, rep := range []string{cohort, edges[len(edges)-1].Pathway} {
				kb, kfirst, ks := p.Steer(nil, &Request{RawQuery: query, Cohort: cohort, Base: base, Reported: rep})
				km := decode(t, kb)
				onBase := ks != sess && rep != "" && rep == p.Config().CloneFrom && !slices.ContainsFunc(edges, func(e Edge) bool { return e.Pathway == rep })
				if onBase {
					if len(km.Priority) == 0 || km.Priority[0] != rep {
						t.Fatalf("%q: a new session reporting clone_from %q got %q", query, rep, km.Priority)
					}
					km.Priority = km.Priority[1:]
				}
				if kfirst < 0 || kfirst >= len(edges) || len(km.Priority) != len(m.Priority) || edges[kfirst].Pathway != km.Priority[0] {
					t.Fatalf("%q reporting %q: first %d, priority %q", query, rep, kfirst, km.Priority)
				}
				isEdge := slices.ContainsFunc(edges, func(e Edge) bool { return e.Pathway == rep })
				if ks != sess && isEdge && km.Priority[0] != rep {
					t.Fatalf("%q: a new session reporting %q got %q", query, rep, km.Priority)
				}
				if later, _, _ := p.Steer(nil, &Request{RawQuery: rq, Cohort: cohort, Base: base, Reported: rep}); !bytes.Equal(later, b) {
					t.Fatalf("%q: a kept session reporting %q got %s, not %s", query, rep, later, b)
				}
			}
		}
	})
}

// jsonText is s as a JSON string decodes: each byte that is not UTF-8
// read as U+FFFD (encoding/json's reading).
func jsonText(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// FuzzRead: no File decoded from TOML makes Read panic; each problem has a
// key and a rule; a File read without a problem passes Check, makes a pool,
// and steers.
func FuzzRead(f *testing.F) {
	f.Add([]byte(seedExample))
	f.Add([]byte("[steering]\nassign = \"buckets\"\nbuckets = 3\ncohort_param = \"c\"\n[[steering.edges]]\npathway = \"a\"\nhost = \"[::1]\"\nparams = { k = \"v\" }\n[[steering.rules]]\nbuckets = [1, 2]\npriority = [\"a\"]\ncohort = [\"x\"]\n"))
	f.Add([]byte("[[pool]]\nname = \"p\"\npath = \"/p\"\npublic_url = \"https://s.example\"\n[[pool.edges]]\npathway = \"a\"\nweight = 0\ncheck_url = \"http://a.example:81/h\"\n"))
	f.Add([]byte("[steering]\nttl_s = -1\n[[steering.edges]]\npathway = \"a b\"\nhost = \"h:1\"\n[[steering.rules]]\nbuckets = []\n"))
	f.Add([]byte("[steering]\nttl_s = 60\ncohort_header = \"X-R\"\n[[steering.edges]]\npathway = \"a\"\n[steering.qoe]\nwindow_s = 30\nmin_sessions = 3\nfloor_bps = 1000\nfraction = 0.5\nmargin = 0.1\nhold_s = 10\nshort_ttl_s = 5\nlowest_bps = 700000\n"))
	f.Add([]byte("[steering]\n[steering.qoe]\nfraction = nan\nmargin = inf\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 4096 {
			return
		}
		var v serverFile
		d := toml.NewDecoder(bytes.NewReader(doc))
		d.DisallowUnknownFields()
		if d.Decode(&v) != nil {
			return
		}
		files := []*File{v.Steering}
		for i := range v.Pool {
			files = append(files, &v.Pool[i])
		}
		for i, file := range files {
			if file == nil {
				continue
			}
			c, ps := Read(file, i > 0)
			for _, p := range ps {
				if p.Key == "" || p.Rule == "" {
					t.Fatalf("problem %+v", p)
				}
			}
			if len(ps) > 0 {
				continue
			}
			if ps := c.Check(); len(ps) > 0 {
				t.Fatalf("Read found nothing, Check %v", ps)
			}
			p, err := New(c, testKey)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Enabled() {
				continue
			}
			b, _, _ := p.Steer(nil, &Request{Base: "https://steer.example"})
			if m := decode(t, b); len(m.Priority) == 0 {
				t.Fatalf("%s", b)
			}
		}
	})
}
