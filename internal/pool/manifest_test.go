package pool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// seedManifest is the station seed's example manifest, verbatim.
const seedManifest = `{
  "VERSION": 1,
  "TTL": 300,
  "RELOAD-URI": "steering?session=4f0c2a9e6d7b4e1f9a3c5b8d2e6f1a07",
  "PATHWAY-PRIORITY": ["edge-2", "edge-1", "bunny"],
  "PATHWAY-CLONES": [
    { "BASE-ID": ".", "ID": "edge-2", "URI-REPLACEMENT": { "HOST": "edge-2.edges.example" } },
    { "BASE-ID": ".", "ID": "edge-1", "URI-REPLACEMENT": { "HOST": "edge-1.edges.example" } },
    { "BASE-ID": ".", "ID": "bunny", "URI-REPLACEMENT": { "HOST": "kettle-cdn.example" } }
  ]
}`

// TestSeedManifest: the seed's example configuration steers, and a
// session that puts edge-2 first gets the seed's example manifest, but for
// a RELOAD-URI that is absolute (players.md) and carries its own session;
// compact, in the seed's order of members.
func TestSeedManifest(t *testing.T) {
	_, v := decodeFile(t, seedExample)
	c, ps := Read(v.Steering, false)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	p := newPool(t, c)
	want := decode(t, []byte(seedManifest))
	for i := 0; ; i++ {
		m, first, s := steer(t, p, "")
		if m.Priority[0] != "edge-2" {
			if i > 100 {
				t.Fatal("no session of 100 puts edge-2 first")
			}
			continue
		}
		if first != 1 {
			t.Errorf("edge-2 first, and first is %d", first)
		}
		if w := "https://steer.example/api/v1/steering?session=" + s.String(); m.Reload != w {
			t.Errorf("RELOAD-URI %q, want %q", m.Reload, w)
		}
		m.Reload, m.raw = want.Reload, nil
		want.raw = nil
		if !reflect.DeepEqual(m, want) {
			t.Errorf("manifest\n%+v\nwant the seed's\n%+v", m, want)
		}
		break
	}
	b, _, _ := p.Steer(nil, &Request{Base: "https://steer.example"})
	if bytes.ContainsAny(b, " \n\t") {
		t.Errorf("manifest %s is not compact", b)
	}
}

// TestZhClones: an edge's params and per-variant and per-rendition URIs are
// written into its clone's URI-REPLACEMENT as the zh seed shows them, with
// the members of each object sorted by key (hls.js applies PARAMS sorted).
func TestZhClones(t *testing.T) {
	c := config()
	c.CloneFrom = "CDN1"
	c.Edges = []Edge{
		{Pathway: "CDN3", Host: "cdn3.example.com", Weight: 1, Params: map[string]string{"token": "abc123"}},
		{Pathway: "CDN4", Host: "cdn3.example.com", Weight: 1,
			PerVariantURIs:   map[string]string{"video-4k-dv": "https://faster.example.com/4k.m3u8"},
			PerRenditionURIs: map[string]string{"audio-en-ac3": "https://faster.example.com/ac3.m3u8"}},
		{Pathway: "CDN5", Host: "cdn5.example.com", Weight: 1, Params: map[string]string{"b": "2", "a": "1", "c": "3", "A": "0"}},
		// The playlist's own pathways carry no clone.
		{Pathway: "CDN1", Weight: 1}, {Pathway: "CDN2", Weight: 1},
	}
	p := newPool(t, c)
	m, _, _ := steer(t, p, "")
	seed := map[string]string{
		"CDN3": `{"BASE-ID":"CDN1","ID":"CDN3","URI-REPLACEMENT":{"HOST":"cdn3.example.com","PARAMS":{"token":"abc123"}}}`,
		"CDN4": `{
      "BASE-ID": "CDN1",
      "ID": "CDN4",
      "URI-REPLACEMENT": {
        "HOST": "cdn3.example.com",
        "PER-VARIANT-URIS": {
          "video-4k-dv": "https://faster.example.com/4k.m3u8"
        },
        "PER-RENDITION-URIS": {
          "audio-en-ac3": "https://faster.example.com/ac3.m3u8"
        }
      }
    }`,
		"CDN5": `{"BASE-ID":"CDN1","ID":"CDN5","URI-REPLACEMENT":{"HOST":"cdn5.example.com","PARAMS":{"A":"0","a":"1","b":"2","c":"3"}}}`,
	}
	var raw struct {
		Clones []json.RawMessage `json:"PATHWAY-CLONES"`
	}
	if err := json.Unmarshal(m.raw, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Clones) != 3 {
		t.Fatalf("%d clones, want 3: %s", len(raw.Clones), m.raw)
	}
	for i, cl := range raw.Clones {
		id := m.Clones[i].ID
		var got, want any
		json.Unmarshal(cl, &got)
		if err := json.Unmarshal([]byte(seed[id]), &want); err != nil {
			t.Fatal(id, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("clone %s\n%s\nwant\n%s", id, cl, seed[id])
		}
	}
	if !bytes.Contains(m.raw, []byte(`"PARAMS":{"A":"0","a":"1","b":"2","c":"3"}`)) {
		t.Errorf("PARAMS not sorted by key: %s", m.raw)
	}
}

// TestClones: every edge with a host has its clone, those listed in the
// priority's order first and then the others (an edge down) in the order
// written; no pathway ID twice anywhere, none a clone of itself (Media3
// refuses both). With clone_from empty, or no edge with a host, there is
// no PATHWAY-CLONES member at all, never an empty one.
func TestClones(t *testing.T) {
	c := config("a", 1, "b", 2, "c", 3, "d", 1)
	c.Edges[3].Host = ""
	p := newPool(t, c)
	p.SetUp("a", false)
	for range 300 {
		m, _, _ := steer(t, p, "")
		var ids []string
		for _, cl := range m.Clones {
			ids = append(ids, cl.ID)
			if cl.Base != "." || cl.ID == cl.Base || cl.Replacement.Host != cl.ID+".edges.example" {
				t.Fatalf("clone %+v", cl)
			}
		}
		want := append(without(m.Priority, "d"), "a")
		if !slices.Equal(ids, want) {
			t.Fatalf("clones %q for the priority %q, want %q", ids, m.Priority, want)
		}
		if len(m.Priority) != 3 || slices.Contains(m.Priority, "a") {
			t.Fatalf("priority %q with a down", m.Priority)
		}
		seen := map[string]bool{}
		for _, id := range m.Priority {
			if seen[id] {
				t.Fatalf("%q twice in %q", id, m.Priority)
			}
			seen[id] = true
		}
	}

	c.CloneFrom = ""
	m, _, _ := steer(t, newPool(t, c), "")
	if bytes.Contains(m.raw, []byte("PATHWAY-CLONES")) {
		t.Errorf("clone_from empty: %s", m.raw)
	}
	c.CloneFrom = "."
	for i := range c.Edges {
		c.Edges[i].Host = ""
	}
	m, _, _ = steer(t, newPool(t, c), "")
	if bytes.Contains(m.raw, []byte("PATHWAY-CLONES")) {
		t.Errorf("no edge with a host: %s", m.raw)
	}
}

// TestReloadURI: the RELOAD-URI is absolute, under public_url when set and
// the request's base otherwise, and never carries the players' _HLS_ or
// _DASH_ parameters or CMCD; the TTL is ttl_s. The base is outside bytes,
// JSON-escaped.
func TestReloadURI(t *testing.T) {
	c := config("a", 1, "b", 1)
	c.TTL = 10
	p := newPool(t, c)
	s := refSession(t, testKey, 1, 0)
	q := `_HLS_pathway=a&_HLS_throughput=500000&_DASH_pathway="a,b"&CMCD=bl%3D21300%2Cbr%3D3200&session=` + s.String() + "&x=1"
	m, _, got := steer(t, p, q)
	if got != s || m.Reload != "https://steer.example/api/v1/steering?session="+s.String() || m.TTL != 10 {
		t.Errorf("%s: %s", q, m.raw)
	}
	for _, base := range []string{`http://a"b\c`, "http://a\x01b", "http://a\xffb", "http://é\u2028.example"} {
		b, _, s := p.Steer(nil, &Request{Base: base})
		if !json.Valid(b) {
			t.Fatalf("base %q: %s is not JSON", base, b)
		}
		m := decode(t, b)
		want := strings.ToValidUTF8(base, "\uFFFD") + DefaultPath + "?session=" + s.String()
		if m.Reload != want {
			t.Errorf("base %q: RELOAD-URI %q, want %q", base, m.Reload, want)
		}
		if !utf8.Valid(b) || bytes.Contains(b, []byte("\u2028")) {
			t.Errorf("base %q: %q", base, b)
		}
	}
	c.PublicURL = "https://steer.example:8443"
	c.Path = "/pools/station"
	p = newPool(t, c)
	b, _, s := p.Steer(nil, &Request{Base: "http://127.0.0.1:8080"})
	if m := decode(t, b); m.Reload != "https://steer.example:8443/pools/station?session="+s.String() {
		t.Errorf("public_url: RELOAD-URI %q", m.Reload)
	}
}

// TestSessions: a session this server did not mint gets a fresh one (issue
// 12 item 3); one it minted is kept however its hexadecimal is spelled; the
// first session parameter is the one read.
func TestSessions(t *testing.T) {
	p := newPool(t, config("a", 1, "b", 1))
	s := refSession(t, testKey, 42, 0)
	hexS := s.String()
	for _, q := range []string{
		"session=" + hexS,
		"session=" + strings.ToUpper(hexS),
		"session=" + fmt.Sprintf("%%%02X", hexS[0]) + hexS[1:],
		"session=" + hexS + "&session=00000000000000000000000000000000",
		"a=b&&=&session=" + hexS + "&session",
	} {
		if _, _, got := steer(t, p, q); got != s {
			t.Errorf("%s: the session was replaced", q)
		}
	}
	for _, q := range []string{
		"",
		"session=00000000000000000000000000000000",
		"session=" + hexS[:31],
		"session=" + hexS + "0",
		"session=" + hexS[:30] + "zz",
		"session=&session=" + hexS,
		"session=" + refSession(t, [16]byte{9}, 42, 0).String(),
		"Session=" + hexS,
		"session%3D" + hexS,
	} {
		if _, _, got := steer(t, p, q); got == s {
			t.Errorf("%s: the session was kept", q)
		}
	}
	// Fresh sessions are minted under the key, with bucket 0 under
	// rendezvous, and differ.
	seen := map[Session]bool{}
	for range 1000 {
		_, _, got := steer(t, p, "")
		if b, ok := refBucket(t, testKey, got); !ok || b != 0 {
			t.Fatalf("minted %s: bucket %d, zeros %v", got, b, ok)
		}
		if seen[got] {
			t.Fatalf("%s minted twice", got)
		}
		seen[got] = true
	}
}
