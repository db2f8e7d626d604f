package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/store"
)

// The public host the viewers of the proxy tests reach: the TLS
// terminator's name and port, which the server behind it never sees in
// its own Host (the proxy sends its target's).
const publicHost = "viewers.example:8443"

// proxyMode is what the TLS terminator in front of the server says of the
// viewer: RFC 7239's Forwarded, or X-Forwarded-For, -Proto and -Host.
type proxyMode string

const (
	viaForwarded  proxyMode = "Forwarded"
	viaXForwarded proxyMode = "X-Forwarded"
)

// behindProxy is a server with the station seed's pool and a front over
// a directory origin (frontMultivariant), served by testEngine, and a
// TLS-terminating reverse proxy on loopback in front of it.
type behindProxy struct {
	srv    *Server
	proxy  *httptest.Server
	direct *testFront
}

func newBehindProxy(t *testing.T, mode proxyMode, proxies limit.Proxies, publicURL string) *behindProxy {
	t.Helper()
	noPanics(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hls", "live.m3u8"), []byte(frontMultivariant), 0o644); err != nil {
		t.Fatal(err)
	}
	og, err := origin.New(dir, origin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(context.Background(), Config{
		Pools: []pool.Config{seedPool(nil, nil)}, OperatorToken: testToken,
		Front:     &FrontConfig{Origin: og, Playlists: []FrontPlaylist{{Path: "/hls/"}}},
		Limits:    SteerLimits{TrustedProxies: proxies},
		PublicURL: publicURL,
		Logger:    slog.New(slog.DiscardHandler),
	}, store.NewMemory(), store.NewLoads())
	if err != nil {
		t.Fatal(err)
	}
	direct := serveTest(t, srv)
	target, err := url.Parse(direct.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target) // the server is reached as 127.0.0.1:<port>, plain http
		viewer, _, _ := strings.Cut(pr.In.RemoteAddr, ":")
		switch mode {
		case viaXForwarded:
			pr.SetXForwarded() // For the viewer, Host the one it reached, Proto https
		case viaForwarded:
			pr.Out.Header.Set("Forwarded", fmt.Sprintf(`for=%s;proto=https;host="%s"`, viewer, pr.In.Host))
		}
	}}
	proxy := httptest.NewTLSServer(rp)
	t.Cleanup(func() { proxy.Close(); direct.Close(); srv.Close(context.Background()) })
	return &behindProxy{srv: srv, proxy: proxy, direct: direct}
}

// get sends a viewer's GET to the proxy, as if for publicHost.
func (b *behindProxy) get(t *testing.T, target, ua string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", b.proxy.URL+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = publicHost
	req.Header.Set("User-Agent", ua)
	c := b.proxy.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// written is every URL the server wrote for one viewer through the proxy:
// the pool's RELOAD-URI, the front's SERVER-URI, the redirect's Location
// and the backup playlist's URIs.
type written struct {
	reload, serverURI, location string
	backups                     []string
}

func (b *behindProxy) written(t *testing.T) written {
	t.Helper()
	var w written
	resp, body := b.get(t, pool.DefaultPath, chrome)
	var m struct {
		Reload string `json:"RELOAD-URI"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &m) != nil {
		t.Fatalf("steering: %d %s", resp.StatusCode, body)
	}
	w.reload = m.Reload
	resp, body = b.get(t, "/hls/live.m3u8", chrome)
	if resp.StatusCode != 200 {
		t.Fatalf("the playlist: %d %s", resp.StatusCode, body)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, `#EXT-X-CONTENT-STEERING:SERVER-URI="`); ok {
			w.serverURI, _, _ = strings.Cut(v, `"`)
		}
	}
	resp, _ = b.get(t, "/hls/live.m3u8?x=1", "Lavf/60.16.100")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("ffmpeg: %d, want a redirect", resp.StatusCode)
	}
	w.location = resp.Header.Get("Location")
	resp, body = b.get(t, "/hls/live.m3u8?waisteer_mode=backup", chrome)
	if resp.StatusCode != 200 {
		t.Fatalf("backups: %d %s", resp.StatusCode, body)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			w.backups = append(w.backups, line)
		}
	}
	return w
}

// edgeHosts are the seed pool's clones' hosts (seedPool).
var edgeHosts = map[string]bool{"edge-1.edges.example": true, "edge-2.edges.example": true, "kettle-cdn.example": true}

// onEdge reports whether u is scheme://<an edge's host>[:port]<path>.
func onEdge(u, scheme, port, path string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != scheme || p.Port() != port || !edgeHosts[p.Hostname()] || p.Path != path {
		return false
	}
	return true
}

// TestBehindTLSProxy (issue 28, "Trusted proxies"; Must show: "behind a
// TLS-terminating proxy the test starts, every URL written is https on the
// public host"), on both engines: a reverse proxy on loopback terminates
// TLS for viewers.example:8443 and sends plain HTTP to the server, saying
// what the viewer reached in RFC 7239's Forwarded (for, proto, host, §5)
// or in X-Forwarded-For, -Proto and -Host. The pool's RELOAD-URI is
// https://viewers.example:8443/..., the front's redirect and its backups
// (clones of the playlist's own pathway, clone_from ".": the host replaced,
// scheme and port kept, RFC 8216bis §7.3) are https on port 8443, and the
// SERVER-URI stays the pool's path, which the player resolves against the
// playlist it reached. From a proxy the server does not trust, the same
// headers are not read: every URL is on what the server itself was
// reached by (http, 127.0.0.1 and its own port). public_url wins over
// both.
func TestBehindTLSProxy(t *testing.T) {
	loopback := limit.Proxies{netip.MustParsePrefix("127.0.0.1/32")}
	elsewhere := limit.Proxies{netip.MustParsePrefix("192.0.2.0/24")}
	for _, mode := range []proxyMode{viaForwarded, viaXForwarded} {
		t.Run(string(mode)+"/trusted", func(t *testing.T) {
			b := newBehindProxy(t, mode, loopback, "")
			w := b.written(t)
			if !strings.HasPrefix(w.reload, "https://"+publicHost+pool.DefaultPath+"?session=") {
				t.Errorf("RELOAD-URI %q, want https://%s%s?session=...", w.reload, publicHost, pool.DefaultPath)
			}
			if w.serverURI != pool.DefaultPath {
				t.Errorf("SERVER-URI %q, want the pool's path %q", w.serverURI, pool.DefaultPath)
			}
			if !onEdge(w.location, "https", "8443", "/hls/live.m3u8") {
				t.Errorf("Location %q, want https://<edge>:8443/hls/live.m3u8", w.location)
			}
			// frontMultivariant: a relative variant (low/index.m3u8) and
			// an absolute one on https://origin.example; three pathways
			// of the viewer's order each.
			if len(w.backups) != 6 {
				t.Fatalf("backups %q, want 6 URIs", w.backups)
			}
			for _, u := range w.backups {
				scheme, port, path := "https", "8443", "/hls/low/index.m3u8"
				if strings.Contains(u, "/high/") {
					port, path = "", "/hls/high/index.m3u8" // the origin's own https URI, of no port
				}
				if !onEdge(u, scheme, port, path) {
					t.Errorf("backup %q, want %s on an edge, port %q", u, scheme, port)
				}
			}
		})
		t.Run(string(mode)+"/untrusted", func(t *testing.T) {
			b := newBehindProxy(t, mode, elsewhere, "")
			own, err := url.Parse(b.direct.URL)
			if err != nil {
				t.Fatal(err)
			}
			w := b.written(t)
			if !strings.HasPrefix(w.reload, b.direct.URL+pool.DefaultPath+"?session=") {
				t.Errorf("RELOAD-URI %q, want on the server's own %s", w.reload, b.direct.URL)
			}
			if !onEdge(w.location, "http", own.Port(), "/hls/live.m3u8") {
				t.Errorf("Location %q, want http://<edge>:%s/hls/live.m3u8", w.location, own.Port())
			}
			for _, u := range w.backups {
				if strings.Contains(u, "/low/") && !onEdge(u, "http", own.Port(), "/hls/low/index.m3u8") {
					t.Errorf("backup %q, want http on the server's own port %s", u, own.Port())
				}
			}
		})
	}
	t.Run("public_url", func(t *testing.T) {
		b := newBehindProxy(t, viaForwarded, loopback, "https://steer.example")
		w := b.written(t)
		if !strings.HasPrefix(w.reload, "https://steer.example"+pool.DefaultPath+"?session=") {
			t.Errorf("RELOAD-URI %q, want on public_url", w.reload)
		}
		if w.serverURI != "https://steer.example"+pool.DefaultPath {
			t.Errorf("SERVER-URI %q, want on public_url", w.serverURI)
		}
		if !onEdge(w.location, "https", "", "/hls/live.m3u8") {
			t.Errorf("Location %q, want https://<edge>/hls/live.m3u8", w.location)
		}
		for _, u := range w.backups {
			if strings.Contains(u, "/low/") && !onEdge(u, "https", "", "/hls/low/index.m3u8") {
				t.Errorf("backup %q, want https on an edge, no port", u)
			}
		}
	})
	t.Run("a pool's public_url wins over the server's", func(t *testing.T) {
		// Through the pool's own configuration, as the station seed's
		// [steering] public_url.
		c := seedPool(nil, nil)
		c.PublicURL = "https://pool.example"
		srv, err := New(context.Background(), Config{Pools: []pool.Config{c}, PublicURL: "https://steer.example", Logger: slog.New(slog.DiscardHandler)},
			store.NewMemory(), store.NewLoads())
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close(context.Background())
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", pool.DefaultPath, nil))
		if !strings.Contains(rec.Body.String(), `"RELOAD-URI":"https://pool.example`+pool.DefaultPath+"?session=") {
			t.Errorf("%s", rec.Body.String())
		}
	})
}

// TestPublicURLRefused: New refuses a public_url that is not
// scheme://host[:port].
func TestPublicURLRefused(t *testing.T) {
	for _, u := range []string{"https://steer.example/", "steer.example", "https://u@steer.example", "gopher://steer.example"} {
		if srv, err := New(context.Background(), Config{Pools: []pool.Config{seedPool(nil, nil)}, PublicURL: u, Logger: slog.New(slog.DiscardHandler)},
			store.NewMemory(), store.NewLoads()); err == nil {
			srv.Close(context.Background())
			t.Errorf("%q was taken", u)
		}
	}
}
