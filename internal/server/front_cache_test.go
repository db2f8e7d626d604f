package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// TestFrontOriginCache (issue 28, "An origin cache"): behind either engine,
// 40 viewers asking at once for each of three requests of a live playlist
// (one path, two queries: the origin sees three requests) are three origin
// fetches, each viewer served its own query's answer; with no cache
// (CacheTTL 0, as on bd4ceba) they are 120.
func TestFrontOriginCache(t *testing.T) {
	for _, ttl := range []time.Duration{10 * time.Second, 0} {
		var fetches atomic.Int64
		og := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fetches.Add(1)
			time.Sleep(50 * time.Millisecond) // a fetch the others overlap
			w.Header().Set("Cache-Control", "max-age=60")
			w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
			fmt.Fprintf(w, "%s#query=%s\n", frontMedia, r.URL.RawQuery)
		}))
		t.Cleanup(og.Close)
		o, err := origin.New(og.URL, origin.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := &poolEnv{t: t, loads: store.NewLoads(), logs: &syncBuffer{}}
		srv, err := New(context.Background(), Config{
			Pools: []pool.Config{seedPool(nil, nil)}, OperatorToken: testToken,
			Front:  &FrontConfig{Origin: o, Playlists: []FrontPlaylist{{Path: "/hls/"}}, CacheTTL: ttl},
			Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
		}, store.NewMemory(), e.loads)
		if err != nil {
			t.Fatal(err)
		}
		e.srv = srv
		e.ts = serveTest(t, srv)
		t.Cleanup(func() { e.ts.Close(); srv.Close(context.Background()) })

		queries := []string{"", "?token=a%2Fb", "?token=c"}
		var wg sync.WaitGroup
		for i := range 120 {
			q := queries[i%len(queries)]
			wg.Go(func() {
				resp, b := e.do("GET", "/hls/low/index.m3u8"+q, "", nil)
				if want := frontMedia + "#query=" + trimQ(q) + "\n"; resp.StatusCode != 200 || string(b) != want {
					t.Errorf("GET %s: %d %q, want 200 %q", q, resp.StatusCode, b, want)
				}
			})
		}
		wg.Wait()
		want := int64(3)
		if ttl == 0 {
			want = 120
		}
		if got := fetches.Load(); got != want {
			t.Errorf("%s, CacheTTL %v: %d origin fetches for 120 viewers of 3 requests, want %d", testEngine, ttl, got, want)
		}
	}
}

func trimQ(q string) string {
	if q == "" {
		return ""
	}
	return q[1:]
}
