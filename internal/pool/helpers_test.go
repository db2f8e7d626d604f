package pool

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testKey is the server's secret in these tests.
var testKey = [16]byte{0: 0x2b, 1: 0x7e, 2: 0x15, 3: 0x16, 15: 0x3c}

// refSession is a session as the package doc defines one, made here from
// the text alone: AES-128 under key of 8 bytes (n, big-endian, standing for
// the random ones), the bucket (u16, big-endian) and 6 zero bytes.
func refSession(t testing.TB, key [16]byte, n uint64, bucket uint16) Session {
	t.Helper()
	b := refCipher(t, key)
	var plain [16]byte
	binary.BigEndian.PutUint64(plain[:8], n)
	binary.BigEndian.PutUint16(plain[8:10], bucket)
	var s Session
	b.Encrypt(s[:], plain[:])
	return s
}

// refBucket reads a session's bucket back as the text says, and whether
// its last 6 bytes decrypt to zeros.
func refBucket(t testing.TB, key [16]byte, s Session) (uint16, bool) {
	t.Helper()
	b := refCipher(t, key)
	var plain [16]byte
	b.Decrypt(plain[:], s[:])
	return binary.BigEndian.Uint16(plain[8:10]), bytes.Equal(plain[10:], make([]byte, 6))
}

// refCiphers holds each key's AES, made once: the tests make a few million
// sessions.
var refCiphers sync.Map

func refCipher(t testing.TB, key [16]byte) cipher.Block {
	if b, ok := refCiphers.Load(key); ok {
		return b.(cipher.Block)
	}
	b, err := aes.NewCipher(key[:])
	if err != nil {
		t.Fatal(err)
	}
	refCiphers.Store(key, b)
	return b
}

// manifest is the steering manifest as the station seed shows it.
type manifest struct {
	Version  int      `json:"VERSION"`
	TTL      int      `json:"TTL"`
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
	Clones   []clone  `json:"PATHWAY-CLONES"`
	raw      []byte
}

type clone struct {
	Base        string      `json:"BASE-ID"`
	ID          string      `json:"ID"`
	Replacement replacement `json:"URI-REPLACEMENT"`
}

type replacement struct {
	Host             string            `json:"HOST"`
	Params           map[string]string `json:"PARAMS"`
	PerVariantURIs   map[string]string `json:"PER-VARIANT-URIS"`
	PerRenditionURIs map[string]string `json:"PER-RENDITION-URIS"`
}

// manifestKeys are the manifest's members in the order the seed writes
// them.
var manifestKeys = []string{"VERSION", "TTL", "RELOAD-URI", "PATHWAY-PRIORITY", "PATHWAY-CLONES"}

// decode reads a manifest with encoding/json, refusing a member the seed
// does not show, and checks that its members come in the seed's order and
// that PATHWAY-CLONES, when present, is not empty (Media3 refuses one).
func decode(t testing.TB, b []byte) manifest {
	t.Helper()
	var m manifest
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("manifest %s: %v", b, err)
	}
	if d.More() {
		t.Fatalf("manifest %s: bytes after the object", b)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		t.Fatal(err)
	}
	keys := topKeys(t, b)
	want := manifestKeys
	if _, ok := members["PATHWAY-CLONES"]; !ok {
		want = want[:4]
	} else if len(m.Clones) == 0 {
		t.Errorf("manifest %s: an empty PATHWAY-CLONES", b)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("manifest %s: members %q, want %q", b, keys, want)
	}
	m.raw = b
	return m
}

// topKeys lists an object's members in the order written.
func topKeys(t testing.TB, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("manifest %s is not an object", b)
	}
	var keys []string
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// reload reads the RELOAD-URI's query.
func (m *manifest) reload(t testing.TB) url.Values {
	t.Helper()
	u, err := url.Parse(m.Reload)
	if err != nil || !u.IsAbs() {
		t.Fatalf("RELOAD-URI %q is not an absolute URL", m.Reload)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		t.Fatalf("RELOAD-URI %q: %v", m.Reload, err)
	}
	return q
}

// bucket is the RELOAD-URI's bucket.
func (m *manifest) bucket(t testing.TB) int {
	t.Helper()
	n, err := strconv.Atoi(m.reload(t).Get("bucket"))
	if err != nil {
		t.Fatalf("RELOAD-URI %q has no bucket", m.Reload)
	}
	return n
}

// session is the RELOAD-URI's session.
func (m *manifest) session(t testing.TB) Session {
	t.Helper()
	var s Session
	v := m.reload(t).Get("session")
	if len(v) != 32 || v != hex.EncodeToString(mustHex(t, v)) {
		t.Fatalf("RELOAD-URI %q: session %q is not 32 lowercase hexadecimal digits", m.Reload, v)
	}
	copy(s[:], mustHex(t, v))
	return s
}

func mustHex(t testing.TB, v string) []byte {
	t.Helper()
	b, err := hex.DecodeString(v)
	if err != nil {
		t.Fatalf("%q: %v", v, err)
	}
	return b
}

// newPool makes a pool of c under testKey.
func newPool(t testing.TB, c Config) *Pool {
	t.Helper()
	p, err := New(c, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// steer asks p for the manifest of a request with the raw query q.
func steer(t testing.TB, p *Pool, q string) (manifest, int, Session) {
	t.Helper()
	b, first, s := p.Steer(nil, &Request{RawQuery: q, Base: "https://steer.example"})
	m := decode(t, b)
	if got := m.session(t); got != s {
		t.Fatalf("RELOAD-URI %q carries another session than %s", m.Reload, s)
	}
	return m, first, s
}

// config is a rendezvous pool of edges with hosts, named and weighted as
// given, with the seed's defaults.
func config(edges ...any) Config {
	c := Config{
		Path: DefaultPath, TTL: 300, CheckEvery: 5 * time.Second, CheckTimeout: 2 * time.Second,
		DownAfter: 2, CloneFrom: ".", Assign: AssignRendezvous, Buckets: 12,
	}
	for i := 0; i < len(edges); i += 2 {
		id := edges[i].(string)
		c.Edges = append(c.Edges, Edge{Pathway: id, Host: strings.ReplaceAll(id, "_", "-") + ".edges.example", Weight: uint32(edges[i+1].(int))})
	}
	return c
}

// orders steers n sessions, made by refSession with bucket 0, and returns
// each one's priority.
func orders(t testing.TB, p *Pool, n int) [][]string {
	t.Helper()
	out := make([][]string, n)
	edges := p.Config().Edges
	var buf []byte
	for i := range n {
		s := refSession(t, testKey, uint64(i), 0)
		var first int
		var got Session
		buf, first, got = p.Steer(buf[:0], &Request{RawQuery: "session=" + s.String(), Base: "https://steer.example"})
		if got != s {
			t.Fatalf("session %s was replaced by %s", s, got)
		}
		// A sample is read by encoding/json; the rest by cutting the
		// priority out, which is the test's time under -race.
		priority := cutPriority(t, buf)
		if i%500 == 0 {
			if m := decode(t, buf); !slices.Equal(m.Priority, priority) {
				t.Fatalf("%s: the priority cut out is %q", buf, priority)
			}
		}
		if edges[first].Pathway != priority[0] {
			t.Fatalf("first is %d, the manifest's first %q", first, priority[0])
		}
		out[i] = priority
	}
	return out
}

// without is order less one pathway.
func without(order []string, id string) []string {
	return slices.DeleteFunc(slices.Clone(order), func(s string) bool { return s == id })
}

// shares counts each pathway's first places, as a fraction of all.
func shares(os [][]string) map[string]float64 {
	f := map[string]float64{}
	for _, o := range os {
		f[o[0]] += 1 / float64(len(os))
	}
	return f
}

// near reports whether got is within ±0.01 (absolute) of want.
func near(got, want float64) bool { return got >= want-0.01 && got <= want+0.01 }

// cutPriority reads PATHWAY-PRIORITY of a manifest whose pathway IDs need
// no escaping (the test's own).
func cutPriority(t testing.TB, b []byte) []string {
	t.Helper()
	const key = `"PATHWAY-PRIORITY":[`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		t.Fatalf("%s: no priority", b)
	}
	rest := b[i+len(key):]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		t.Fatalf("%s: no priority", b)
	}
	var ids []string
	for _, q := range bytes.Split(rest[:end], []byte(",")) {
		ids = append(ids, string(bytes.Trim(q, `"`)))
	}
	return ids
}
