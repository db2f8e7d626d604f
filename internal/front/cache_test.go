package front

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// mediaBody is a live media playlist: the front serves it as written.
const mediaBody = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:7\n#EXTINF:2,\nseg7.ts\n"

// cachingOrigin is an HTTP origin that counts its requests and answers
// each with the fields a test sets: 304 when If-None-Match is its ETag,
// else status (200 when 0) with mediaBody. It keeps each request's
// conditional fields.
type cachingOrigin struct {
	mu       sync.Mutex
	status   int
	header   http.Header // of every answer
	notMod   http.Header // added to a 304's
	hold     chan struct{}
	body     string // "": mediaBody
	requests int
	seen     [][2]string // If-None-Match, If-Modified-Since
}

func (o *cachingOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.requests++
	o.seen = append(o.seen, [2]string{r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")})
	hold, status := o.hold, o.status
	h := o.header.Clone()
	nm := o.notMod.Clone()
	o.mu.Unlock()
	if hold != nil {
		<-hold
	}
	for k, vs := range h {
		w.Header()[k] = vs
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == h.Get("ETag") {
		for k, vs := range nm {
			w.Header()[k] = vs
		}
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
	w.WriteHeader(status)
	if o.body != "" {
		w.Write([]byte(o.body))
		return
	}
	w.Write([]byte(mediaBody))
}

func (o *cachingOrigin) set(status int, h http.Header) {
	o.mu.Lock()
	o.status, o.header = status, h
	o.mu.Unlock()
}

func (o *cachingOrigin) count() (int, [][2]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests, append([][2]string(nil), o.seen...)
}

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// cachedFront is a front with an origin cache of ttl over o, on a clock
// the test moves (nil: the real one).
func cachedFront(t *testing.T, o *cachingOrigin, ttl time.Duration, clk *clock) *Front {
	t.Helper()
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	og, err := origin.New(srv.URL, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Origin: og, Playlists: []Playlist{{Path: "/live/", Steering: &reloaded{}}}, CacheTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		f.cache.now = clk.now
	}
	return f
}

func get(f *Front, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

// expect asks for target at the clock's time and checks the status, the
// origin's requests so far and, when age is not "", the Age sent.
func expect(t *testing.T, f *Front, o *cachingOrigin, at string, status, requests int, age string) {
	t.Helper()
	w := get(f, "/live/a.m3u8")
	n, _ := o.count()
	if w.Code != status || n != requests {
		t.Fatalf("%s: status %d after %d origin requests, want %d after %d", at, w.Code, n, status, requests)
	}
	if status == http.StatusOK && w.Body.String() != mediaBody {
		t.Fatalf("%s: body %q", at, w.Body.String())
	}
	if age != "" && w.Header().Get("Age") != age {
		t.Fatalf("%s: Age %q, want %q", at, w.Header().Get("Age"), age)
	}
}

// TestCacheMaxAge: an answer with max-age=2 (RFC 9111 §5.2.2.1) is fresh
// while its age is under 2 s (§4.2): at 0 and 1.999 s one origin request;
// at 2 s stale, so revalidated with its ETag and Last-Modified (§4.3.1);
// the origin's 304 makes it fresh for 2 s more (§4.3.4), so 3.999 s asks
// nothing and 4 s asks again. Age counts the seconds kept (§5.1).
func TestCacheMaxAge(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	o := &cachingOrigin{}
	o.set(0, http.Header{"Cache-Control": {"max-age=2"}, "Etag": {`"v1"`}, "Last-Modified": {originLM}})
	f := cachedFront(t, o, 10*time.Second, clk)
	expect(t, f, o, "0 s", 200, 1, "")
	clk.add(time.Second)
	expect(t, f, o, "1 s", 200, 1, "1")
	clk.add(999 * time.Millisecond)
	expect(t, f, o, "1.999 s", 200, 1, "1")
	clk.add(time.Millisecond)
	expect(t, f, o, "2 s", 200, 2, "")
	clk.add(1999 * time.Millisecond)
	expect(t, f, o, "3.999 s", 200, 2, "1")
	clk.add(time.Millisecond)
	expect(t, f, o, "4 s", 200, 3, "")
	_, seen := o.count()
	want := [][2]string{{"", ""}, {`"v1"`, originLM}, {`"v1"`, originLM}}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("origin request %d: If-None-Match, If-Modified-Since %q, want %q", i, seen[i], want[i])
		}
	}
}

// TestCacheRefresh304: the origin's 304 replaces the stored fields it
// carries (RFC 9111 §4.3.4): a 304 with max-age=5 keeps the answer 5 s
// from the revalidation (until 7 s), and players get the new field.
func TestCacheRefresh304(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	o := &cachingOrigin{notMod: http.Header{"Cache-Control": {"max-age=5"}}}
	o.set(0, http.Header{"Cache-Control": {"max-age=2"}, "Etag": {`"v1"`}})
	f := cachedFront(t, o, time.Minute, clk)
	expect(t, f, o, "0 s", 200, 1, "")
	clk.add(2 * time.Second)
	expect(t, f, o, "2 s", 200, 2, "")
	clk.add(4999 * time.Millisecond)
	w := get(f, "/live/a.m3u8")
	if n, _ := o.count(); n != 2 || w.Header().Get("Cache-Control") != "max-age=5" || w.Body.String() != mediaBody {
		t.Fatalf("6.999 s: %d origin requests, Cache-Control %q, body %q; want 2, the 304's max-age=5, the stored body", n, w.Header().Get("Cache-Control"), w.Body.String())
	}
	clk.add(time.Millisecond)
	expect(t, f, o, "7 s", 200, 3, "")
}

// TestCacheNotStored: no-store (RFC 9111 §5.2.2.5), no-cache (§5.2.2.4),
// private (§5.2.2.7, the front being a shared cache), Vary: * (§4.1) and
// an Expires of "0" with no validator (§5.3) are never kept: each of three
// requests at one instant asks the origin.
func TestCacheNotStored(t *testing.T) {
	for _, h := range []http.Header{
		{"Cache-Control": {"no-store, max-age=60"}, "Etag": {`"v1"`}},
		{"Cache-Control": {"max-age=60, no-cache"}},
		{"Cache-Control": {`private="Set-Cookie", max-age=60`}},
		{"Cache-Control": {"max-age=60"}, "Vary": {"Accept-Encoding, *"}},
		{"Expires": {"0"}},
		{"Cache-Control": {"max-age=60, ,, bad directive"}},
	} {
		clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
		o := &cachingOrigin{}
		o.set(0, h)
		f := cachedFront(t, o, 10*time.Second, clk)
		for i := 1; i <= 3; i++ {
			get(f, "/live/a.m3u8")
			if n, _ := o.count(); n != i {
				t.Fatalf("%v: %d origin requests after %d, want %d", h, n, i, i)
			}
		}
		if len(f.cache.entries) != 0 {
			t.Errorf("%v: %d answers stored", h, len(f.cache.entries))
		}
	}
}

// TestCacheTTLCapsMaxAge: max-age=60 under cache_ms 1000 is kept 1 s:
// 0.999 s asks nothing, 1 s revalidates.
func TestCacheTTLCapsMaxAge(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	o := &cachingOrigin{}
	o.set(0, http.Header{"Cache-Control": {"max-age=60"}, "Etag": {`"v1"`}})
	f := cachedFront(t, o, time.Second, clk)
	expect(t, f, o, "0 s", 200, 1, "")
	clk.add(999 * time.Millisecond)
	expect(t, f, o, "0.999 s", 200, 1, "")
	clk.add(time.Millisecond)
	expect(t, f, o, "1 s", 200, 2, "")
}

// TestCacheAgeExpires: freshness from the origin's Age (RFC 9111 §4.2.3:
// max-age=3 with Age: 1 is fresh 2 s more) and from Expires without Date
// (§4.2.1: Expires minus the time received; 3 s) and s-maxage over max-age
// (§5.2.2.10).
func TestCacheAgeExpires(t *testing.T) {
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h     http.Header
		fresh time.Duration
		age   string // at fresh - 1 ms
	}{
		{http.Header{"Cache-Control": {"max-age=3"}, "Age": {"1"}, "Etag": {`"v1"`}}, 2 * time.Second, "2"},
		{http.Header{"Expires": {start.Add(3 * time.Second).Format(http.TimeFormat)}, "Etag": {`"v1"`}}, 3 * time.Second, "2"},
		{http.Header{"Cache-Control": {"max-age=60, s-maxage=1"}, "Etag": {`"v1"`}}, time.Second, ""},
	} {
		clk := &clock{t: start}
		o := &cachingOrigin{}
		o.set(0, c.h)
		f := cachedFront(t, o, time.Minute, clk)
		expect(t, f, o, "0 s", 200, 1, "")
		clk.add(c.fresh - time.Millisecond)
		expect(t, f, o, "just before", 200, 1, c.age)
		clk.add(time.Millisecond)
		expect(t, f, o, "at the end", 200, 2, "")
	}
}

// TestCacheErrorsNotKept: a 503 (the front's 502) and a 404 are not kept,
// and drop the stored answer: the next request asks again and gets the
// origin's new answer.
func TestCacheErrorsNotKept(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	o := &cachingOrigin{}
	o.set(http.StatusServiceUnavailable, http.Header{"Cache-Control": {"max-age=60"}})
	f := cachedFront(t, o, 10*time.Second, clk)
	expect(t, f, o, "503", http.StatusBadGateway, 1, "")
	expect(t, f, o, "503 again", http.StatusBadGateway, 2, "")
	o.set(0, http.Header{"Cache-Control": {"max-age=1"}, "Etag": {`"v1"`}})
	expect(t, f, o, "200", 200, 3, "")
	clk.add(time.Second)
	o.set(http.StatusNotFound, http.Header{"Cache-Control": {"max-age=60"}})
	expect(t, f, o, "404", http.StatusNotFound, 4, "")
	expect(t, f, o, "404 again", http.StatusNotFound, 5, "")
}

// TestCacheOtherTag: a 304 naming a strong ETag other than the stored
// one refreshes nothing (RFC 9111 §4.3.4): the answer is fetched whole.
func TestCacheOtherTag(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	o := &cachingOrigin{notMod: http.Header{"Etag": {`"v2"`}}}
	o.set(0, http.Header{"Cache-Control": {"max-age=1"}, "Etag": {`"v1"`}})
	f := cachedFront(t, o, 10*time.Second, clk)
	expect(t, f, o, "0 s", 200, 1, "")
	clk.add(time.Second)
	expect(t, f, o, "1 s", 200, 3, "")
	if _, seen := o.count(); seen[1][0] != `"v1"` || seen[2][0] != "" {
		t.Errorf("origin requests %q: want the revalidation, then an unconditional fetch", seen)
	}
}

// TestCacheConcurrent: a hundred requests for one playlist while its
// fetch is under way are one origin request, and each gets the playlist.
func TestCacheConcurrent(t *testing.T) {
	o := &cachingOrigin{hold: make(chan struct{})}
	o.set(0, http.Header{"Cache-Control": {"max-age=60"}})
	f := cachedFront(t, o, time.Second, nil)
	const n = 100
	codes := make(chan *httptest.ResponseRecorder, n)
	for range n {
		go func() { codes <- get(f, "/live/a.m3u8") }()
	}
	waitFor(t, f, o, n)
	close(o.hold)
	for range n {
		if w := <-codes; w.Code != 200 || w.Body.String() != mediaBody {
			t.Fatalf("%d %q", w.Code, w.Body.String())
		}
	}
	if got, _ := o.count(); got != 1 {
		t.Errorf("%d origin requests for %d concurrent requests, want 1", got, n)
	}
}

// TestCacheKeys: a path or a query apart are two answers.
func TestCacheKeys(t *testing.T) {
	o := &cachingOrigin{}
	o.set(0, http.Header{"Cache-Control": {"max-age=60"}})
	f := cachedFront(t, o, time.Second, nil)
	for i, target := range []string{"/live/a.m3u8", "/live/a.m3u8?x=1", "/live/b.m3u8", "/live/a.m3u8?x=1", "/live/a.m3u8"} {
		get(f, target)
		want := min(i+1, 3)
		if n, _ := o.count(); n != want {
			t.Fatalf("%s: %d origin requests, want %d", target, n, want)
		}
	}
}

// TestCacheBounds: at most the entries and bytes given, the oldest
// evicted first.
func TestCacheBounds(t *testing.T) {
	c := newCache(time.Minute, 2, 1000)
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	res := func(n int) *origin.Response {
		return &origin.Response{Status: 200, Body: []byte(strings.Repeat("#", n)), Header: http.Header{"Cache-Control": {"max-age=60"}}}
	}
	c.store("a", res(10), now, now)
	c.store("b", res(10), now, now)
	c.store("c", res(10), now, now)
	if _, ok := c.entries["a"]; ok || len(c.entries) != 2 {
		t.Errorf("after 3 of 2: %d entries, a kept %v", len(c.entries), ok)
	}
	c.store("d", res(900), now, now) // b (10 + fields) + c + d > 1000: b goes
	if _, ok := c.entries["b"]; ok || c.bytes > 1000 {
		t.Errorf("b kept %v, %d bytes", ok, c.bytes)
	}
	c.store("e", res(1001), now, now)
	if _, ok := c.entries["e"]; ok {
		t.Error("an answer over the bytes alone was kept")
	}
}

// TestCacheConditional: a conditional fetch answered from the cache is
// 304 when one of its tags is the stored ETag by the weak comparison (RFC
// 9110 §13.1.2), the 200 otherwise, and asks the origin nothing more.
func TestCacheConditional(t *testing.T) {
	o := &cachingOrigin{}
	o.set(0, http.Header{"Cache-Control": {"max-age=60"}, "Etag": {`W/"v1"`}})
	f := cachedFront(t, o, time.Minute, nil)
	r := httptest.NewRequest(http.MethodGet, "/live/a.m3u8", nil)
	for _, c := range []struct {
		inm    string
		status int
	}{{"", 200}, {`"v0", "v1"`, 304}, {`W/"v1"`, 304}, {`"v0"`, 200}} {
		res, aerr := f.fetch(r, "", c.inm)
		if aerr != nil || res.Status != c.status {
			t.Errorf("If-None-Match %q: %v %v, want %d", c.inm, res, aerr, c.status)
		}
	}
	if n, _ := o.count(); n != 1 {
		t.Errorf("%d origin requests, want 1", n)
	}
}

// TestCacheThousandViewers measures the figure: origin requests
// for 1 000 viewers of one live media playlist (max-age=1, an ETag, as a
// live origin sends), all at once and then spread evenly over 2 s, without
// the cache (cache_ms = 0: one request each) and with cache_ms = 1000. All
// at once is one fetch; over 2 s the answer is kept a second at a time, so
// at most one fetch per second begun (0, 1 and 2 s: 3), the later ones
// revalidations the origin answers 304.
func TestCacheThousandViewers(t *testing.T) {
	const viewers = 1000
	for _, ttl := range []time.Duration{0, time.Second} {
		o := &cachingOrigin{}
		o.set(0, http.Header{"Cache-Control": {"max-age=1"}, "Etag": {`"v1"`}})
		f := cachedFront(t, o, ttl, nil)
		run := func(spread time.Duration) int {
			before, _ := o.count()
			var wg sync.WaitGroup
			start := time.Now()
			for i := range viewers {
				wg.Go(func() {
					time.Sleep(time.Until(start.Add(spread * time.Duration(i) / viewers)))
					if w := get(f, "/live/a.m3u8"); w.Code != 200 {
						t.Errorf("viewer %d: %d", i, w.Code)
					}
				})
			}
			wg.Wait()
			after, _ := o.count()
			return after - before
		}
		at := run(0)
		time.Sleep(1100 * time.Millisecond) // the answer of the first run is stale
		spread := run(2 * time.Second)
		t.Logf("cache_ms %d: %d origin requests for %d viewers at once, %d for %d over 2 s", ttl.Milliseconds(), at, viewers, spread, viewers)
		switch {
		case ttl == 0 && (at != viewers || spread != viewers):
			t.Errorf("without the cache: %d and %d origin requests, want %d each", at, spread, viewers)
		case ttl > 0 && (at > 2 || spread > 3):
			t.Errorf("with the cache: %d and %d origin requests, want 1 (2 should the run outlast the second) and at most 3", at, spread)
		}
	}
}

// TestCacheNoStoreNotShared: an answer with no-store is not reused, not
// even for the requests that waited for its fetch (RFC 9111 §5.2.2.5):
// five requests during the fetch are five origin requests, and a sixth
// right after fetches alone at once, waiting for no other.
func TestCacheNoStoreNotShared(t *testing.T) {
	o := &cachingOrigin{hold: make(chan struct{})}
	o.set(0, http.Header{"Cache-Control": {"no-store"}})
	f := cachedFront(t, o, time.Second, nil)
	const n = 5
	codes := make(chan int, n)
	for range n {
		go func() { codes <- get(f, "/live/a.m3u8").Code }()
	}
	waitFor(t, f, o, n)
	close(o.hold)
	for range n {
		if c := <-codes; c != 200 {
			t.Fatalf("status %d", c)
		}
	}
	if got, _ := o.count(); got != n {
		t.Errorf("%d origin requests for %d requests of a no-store answer, want %d", got, n, n)
	}
	get(f, "/live/a.m3u8")
	f.cache.mu.Lock()
	_, pass := f.cache.pass[cacheKey("/live/a.m3u8", "")]
	f.cache.mu.Unlock()
	if got, _ := o.count(); got != n+1 || !pass {
		t.Errorf("then %d origin requests, key passed %v; want %d, true", got, pass, n+1)
	}
}

// waitFor waits until n requests wait for the fetch of /live/a.m3u8, for
// at most 10 s (then it lets the origin answer, and fails).
func waitFor(t *testing.T, f *Front, o *cachingOrigin, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for waiting := 0; waiting < n; {
		if time.Now().After(deadline) {
			close(o.hold)
			t.Fatalf("%d requests wait for one fetch after 10 s, want %d", waiting, n)
		}
		time.Sleep(time.Millisecond)
		f.cache.mu.Lock()
		if cl := f.cache.calls[cacheKey("/live/a.m3u8", "")]; cl != nil {
			waiting = cl.waiting
		}
		f.cache.mu.Unlock()
	}
}

// TestCacheValidators: the front's validators (validators.go) through the
// cache. A steered playlist's ETag is the origin's with the line's digest;
// the player's If-None-Match of it is answered 304 from the stored answer
// (the weak comparison, RFC 9110 §13.1.2) without asking the origin; once
// the line changes, the old tag gets the new playlist (issue 28,
// "Validators exact"), still from the stored answer.
func TestCacheValidators(t *testing.T) {
	o := &cachingOrigin{body: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n"}
	o.set(0, http.Header{"Cache-Control": {"max-age=60"}, "Etag": {`W/"v1"`}})
	st := &reloaded{}
	st.set(lineA, "")
	f := cachedFront(t, o, time.Minute, nil)
	f.exact["/live/main.m3u8"] = st
	ask := func(inm string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/live/main.m3u8", nil)
		r.Header.Set("User-Agent", chromeUA)
		if inm != "" {
			r.Header.Set("If-None-Match", inm)
		}
		w := httptest.NewRecorder()
		f.ServeHTTP(w, r)
		return w
	}
	tagA := `W/"v1-ws` + digestA + `"`
	if w := ask(""); w.Code != 200 || w.Header().Get("ETag") != tagA || !strings.Contains(w.Body.String(), lineA) {
		t.Fatalf("first: %d ETag %q\n%s", w.Code, w.Header().Get("ETag"), w.Body.String())
	}
	if w := ask(tagA); w.Code != 304 || w.Header().Get("ETag") != tagA || w.Header().Get("Vary") != "User-Agent" {
		t.Errorf("the served tag: %d ETag %q Vary %q, want 304 %s User-Agent", w.Code, w.Header().Get("ETag"), w.Header().Get("Vary"), tagA)
	}
	st.set(lineB, "")
	if w := ask(tagA); w.Code != 200 || w.Header().Get("ETag") != `W/"v1-ws`+digestB+`"` || !strings.Contains(w.Body.String(), lineB) {
		t.Errorf("after the line changed: %d ETag %q\n%s", w.Code, w.Header().Get("ETag"), w.Body.String())
	}
	if n, _ := o.count(); n != 1 {
		t.Errorf("%d origin requests, want 1", n)
	}
}
