package front

// The origin cache (issue 28, "An origin cache"): a thousand viewers of one
// live playlist are one origin fetch, not a thousand.
//
// # What is one playlist
//
// The key is what the origin sees: the path and the query the front sends
// (cacheKey). The front passes none of the player's other fields to the
// origin, so two requests with one key are the same request to it, and an
// origin's Vary (RFC 9111 §4.1) never tells them apart; only "Vary: *",
// which matches nothing, keeps an answer out.
//
// # One fetch
//
// Requests for a key that arrive while its fetch is under way wait for
// that fetch (request collapsing, RFC 9111 §4): one origin request, one
// answer for all of them, or one error (a dead origin is one timeout, not
// a thousand). An answer that may not be stored (below) is not reused for
// them either: it is the first request's, each other request fetches
// alone, and so do the key's requests for TTL after, rather than queue
// behind a fetch they could not share (RFC 9111 §5.2.2.5: no-store is no
// reuse; a CDN's "hit-for-pass"). The fetch is the cache's, not a
// player's: a player that leaves stops waiting (canceled) but the fetch
// goes on for the others, bounded by the origin's own timeout.
//
// # How long an answer is kept
//
// A 200 is stored unless it says no-store, no-cache or private (the front
// is a shared cache: RFC 9111 §5.2.2.4, §5.2.2.5, §5.2.2.7, a qualified
// no-cache or private read as the unqualified one), has Vary: *, or a
// Cache-Control that does not read. It is fresh (§4.2) while
//
//	current_age < freshness_lifetime
//	freshness_lifetime = s-maxage, else max-age, else Expires - received
//	current_age        = Age + (received - asked) + (now - received)
//
// and never longer than TTL (cache_ms) after it was received. The origin's
// fields pass to players through this package, so an answer kept longer
// than its origin allows would be kept longer by every player too. Without
// Date (the origin package keeps only caching fields) the time the answer
// was received stands for it (§4.2.1, RFC 9110 §6.6.1). No heuristic
// freshness (§4.2.2): an answer without explicit freshness is fresh for no
// time, though still one fetch for the requests that waited for it. A
// duplicated or invalid max-age, s-maxage, Expires or Age makes the answer
// stale (§4.2.1, §5.3: an Expires of "0" is in the past).
//
// A stale answer with a validator is kept, and the next request sends the
// origin its ETag as If-None-Match and its Last-Modified as
// If-Modified-Since (§4.3.1); a 304 replaces the stored fields it carries
// and makes the answer fresh again (§4.3.4), unless it names another
// strong ETag, when the answer is fetched whole. A stale answer without a
// validator is dropped. Errors, which are every status but 200, 203 and
// 304 (origin.Error), are never kept, and drop the key's answer.
//
// Served from the cache, an answer's Age is its current age in seconds
// (§5.1), so that a cache after the front counts the time spent here.
//
// # Bounds
//
// At most MaxEntries answers and MaxBytes of bodies and fields; storing
// one more evicts the oldest stored (or refreshed) first. An answer larger
// than MaxBytes alone is not stored.
//
// # Conditional fetches
//
// The front asks with If-None-Match when a player's tag names the line it
// would write now (validators.go). Answered from the cache, such a fetch
// gets what an origin evaluating If-None-Match (RFC 9110 §13.1.2, the weak
// comparison) would send for the stored answer: 304 when one of its tags
// is the answer's ETag, else the 200.

import (
	"container/list"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
)

// The cache's bounds when Config gives none.
const (
	DefaultCacheEntries = 1024
	DefaultCacheBytes   = 64 << 20
)

// fetchFunc is one origin request for a key, conditional on a validator
// when ifNoneMatch or ifModifiedSince is not "".
type fetchFunc func(ctx context.Context, ifNoneMatch, ifModifiedSince string) (*origin.Response, error)

// cache keeps the origin's answers by key.
type cache struct {
	ttl        time.Duration
	maxEntries int
	maxBytes   int64
	now        func() time.Time

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	order   *list.List               // oldest stored first
	bytes   int64
	calls   map[string]*call
	pass    map[string]time.Time // keys whose last answer might not be reused, until
}

// entry is a stored 200; never changed once stored (a refresh stores a
// new one).
type entry struct {
	key      string
	res      *origin.Response
	received time.Time
	initAge  time.Duration // corrected_initial_age (§4.2.3)
	until    time.Time     // fresh before this
	size     int64
}

// call is a fetch under way, and its outcome once done is closed.
type call struct {
	done    chan struct{}
	res     *origin.Response
	err     error
	waiting int  // the requests that waited for it, under cache.mu
	shared  bool // res or err may be given to every request that waited
}

func newCache(ttl time.Duration, maxEntries int, maxBytes int64) *cache {
	if maxEntries <= 0 {
		maxEntries = DefaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &cache{ttl: ttl, maxEntries: maxEntries, maxBytes: maxBytes, now: time.Now,
		entries: map[string]*list.Element{}, order: list.New(), calls: map[string]*call{}, pass: map[string]time.Time{}}
}

// cacheKey is the key of a fetch: the path, a NUL, the query. The origin
// refuses a path holding a control character (origin.checkPath), so the
// first NUL ends the path and two different requests never share a key.
func cacheKey(path, rawQuery string) string { return path + "\x00" + rawQuery }

// get is the answer for key: a fresh stored one, the one of a fetch under
// way, or a new fetch's. It is a 200; the caller must not change it.
func (c *cache) get(ctx context.Context, key string, fetch fetchFunc) (*origin.Response, error) {
	c.mu.Lock()
	now := c.now()
	var stale *entry
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*entry)
		if now.Before(e.until) {
			c.mu.Unlock()
			return e.served(now), nil
		}
		if e.res.Header.Get("ETag") == "" && e.res.Header.Get("Last-Modified") == "" {
			c.remove(el) // nothing to revalidate it with
		} else {
			stale = e
		}
	}
	if until, ok := c.pass[key]; ok {
		if now.Before(until) {
			c.mu.Unlock()
			return alone(ctx, fetch)
		}
		delete(c.pass, key)
	}
	cl, ok := c.calls[key]
	if !ok {
		cl = &call{done: make(chan struct{})}
		c.calls[key] = cl
		go c.run(context.WithoutCancel(ctx), key, cl, stale, fetch)
	}
	first := !ok
	cl.waiting++
	c.mu.Unlock()
	select {
	case <-cl.done:
		if !cl.shared && !first {
			return alone(ctx, fetch) // an answer for one request only
		}
		return cl.res, cl.err
	case <-ctx.Done():
		return nil, &origin.Error{Status: http.StatusBadGateway, Code: origin.CodeCanceled, Detail: "the request ended before the origin answered"}
	}
}

// alone is a fetch for one request, neither shared nor stored.
func alone(ctx context.Context, fetch fetchFunc) (*origin.Response, error) {
	res, err := fetch(ctx, "", "")
	if err == nil && res.Status != http.StatusOK {
		return nil, &origin.Error{Status: http.StatusBadGateway, Code: origin.CodeBadAnswer, Detail: "the origin answered 304 to a request that was not conditional"}
	}
	return res, err
}

// run is the one fetch of key, revalidating stale when there is one.
func (c *cache) run(ctx context.Context, key string, cl *call, stale *entry, fetch fetchFunc) {
	asked := c.now()
	var res *origin.Response
	var err error
	if stale != nil {
		res, err = fetch(ctx, stale.res.Header.Get("ETag"), stale.res.Header.Get("Last-Modified"))
		if err == nil && res.Status == http.StatusNotModified {
			if merged, ok := refreshed(stale.res, res.Header); ok {
				res = merged
			} else {
				asked = c.now()
				res, err = fetch(ctx, "", "") // a 304 for another answer (§4.3.4)
			}
		}
	} else {
		res, err = fetch(ctx, "", "")
	}
	received := c.now()
	if err == nil && res.Status != http.StatusOK {
		err = &origin.Error{Status: http.StatusBadGateway, Code: origin.CodeBadAnswer, Detail: "the origin answered 304 to a request that was not conditional"}
	}

	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	cl.shared = true // an error is every waiter's: one timeout, not a thousand
	if err == nil {
		if _, _, ok := freshness(res.Header, asked, received); ok {
			c.store(key, res, asked, received)
		} else {
			// no-store and its kin: this answer is its first request's
			// alone, and the next requests of the key fetch alone for TTL
			// rather than queue behind a fetch they cannot share.
			cl.shared = false
			if len(c.pass) >= c.maxEntries {
				clear(c.pass)
			}
			c.pass[key] = received.Add(c.ttl)
		}
	}
	delete(c.calls, key)
	c.mu.Unlock()
	cl.res, cl.err = res, err
	close(cl.done)
}

// refreshed is the stored answer with the fields of the origin's 304
// (§4.3.4); false when the 304 names a strong ETag other than the stored
// one, or any ETag the weak comparison does not match.
func refreshed(stored *origin.Response, h http.Header) (*origin.Response, bool) {
	if tag := h.Get("ETag"); tag != "" {
		old := stored.Header.Get("ETag")
		if old == "" || opaqueTag(old) != opaqueTag(tag) {
			return nil, false
		}
		strong := !strings.HasPrefix(tag, "W/")
		if strong && tag != old {
			return nil, false
		}
	}
	nh := stored.Header.Clone()
	for k, vs := range h {
		nh[k] = vs
	}
	return &origin.Response{Status: http.StatusOK, Body: stored.Body, ContentType: stored.ContentType, Header: nh}, true
}

// store keeps res if it may be kept, evicting the oldest to make room.
// c.mu is held.
func (c *cache) store(key string, res *origin.Response, asked, received time.Time) {
	if c.ttl <= 0 {
		return
	}
	lifetime, initAge, ok := freshness(res.Header, asked, received)
	if !ok {
		return
	}
	keep := min(lifetime-initAge, c.ttl)
	if keep <= 0 && res.Header.Get("ETag") == "" && res.Header.Get("Last-Modified") == "" {
		return // never fresh, nothing to revalidate with
	}
	size := int64(len(key) + len(res.Body) + len(res.ContentType))
	for k, vs := range res.Header {
		size += int64(len(k))
		for _, v := range vs {
			size += int64(len(v))
		}
	}
	if size > c.maxBytes {
		return
	}
	e := &entry{key: key, res: res, received: received, initAge: initAge, until: received.Add(max(keep, 0)), size: size}
	c.entries[key] = c.order.PushBack(e)
	c.bytes += size
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.order.Front())
	}
}

// remove drops a stored answer. c.mu is held.
func (c *cache) remove(el *list.Element) {
	e := el.Value.(*entry)
	c.order.Remove(el)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// served is the stored answer as sent at now: its Age the current age in
// whole seconds (§4.2.3, §5.1) when that is not 0 or the origin sent one.
func (e *entry) served(now time.Time) *origin.Response {
	age := int64((e.initAge + now.Sub(e.received)) / time.Second)
	if age == 0 && len(e.res.Header.Values("Age")) == 0 {
		return e.res
	}
	r := *e.res
	r.Header = e.res.Header.Clone()
	r.Header.Set("Age", strconv.FormatInt(age, 10))
	return &r
}

// cached is the front's fetch through the cache: the key's answer, or for
// a conditional fetch, 304 with its fields when one of ifNoneMatch's tags
// is its ETag by the weak comparison (RFC 9110 §13.1.2), as the origin
// would judge it.
func (f *Front) cached(r *http.Request, query, ifNoneMatch string) (*origin.Response, error) {
	// The fetch may outlive the request, whose bytes an engine may reuse
	// (fasthttp): its own copies.
	path, query := strings.Clone(r.URL.Path), strings.Clone(query)
	res, err := f.cache.get(r.Context(), cacheKey(path, query), func(ctx context.Context, inm, ims string) (*origin.Response, error) {
		return f.origin.Fetch(ctx, &origin.Request{Path: path, RawQuery: query, IfNoneMatch: inm, IfModifiedSince: ims})
	})
	if err != nil || ifNoneMatch == "" {
		return res, err
	}
	if fresh(http.Header{"If-None-Match": {ifNoneMatch}}, res.Header) {
		return &origin.Response{Status: http.StatusNotModified, Header: res.Header}, nil
	}
	return res, nil
}
