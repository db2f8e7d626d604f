package serve_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/testca"
)

// tlsServer is a server of one pool over HTTPS, its files in dir.
type tlsServer struct {
	url, dir string
	ca       *testca.CA
	logs     *lockedLog
}

// startTLS writes a CA's files for 127.0.0.1 and a configuration of the
// pair under [http] with engine into a new directory, and serves it as
// `waisteer serve` does (serve.Run, which reloads on SIGHUP).
func startTLS(t *testing.T, engine string) (*tlsServer, *testca.Leaf) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.WriteFiles(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	doc := "listen = \"127.0.0.1:0\"\n[http]\nengine = \"" + engine + "\"\ncert = \"cert.pem\"\nkey = \"key.pem\"\n" +
		"[steering]\n[[steering.edges]]\npathway = \"a\"\n[[steering.edges]]\npathway = \"b\"\n"
	s := &tlsServer{dir: dir, ca: ca, logs: &lockedLog{}}
	s.url = runServe(t, dir, doc, s.logs)
	return s, leaf
}

// runServe writes doc into dir as serve.toml and serves it as `waisteer
// serve` does (serve.Run, which reloads on SIGHUP), logging into logs,
// until the test ends; it returns the server's URL.
func runServe(t *testing.T, dir, doc string, logs io.Writer) string {
	t.Helper()
	name := filepath.Join(dir, "serve.toml")
	writeFile(t, name, doc)
	cfg, err := serve.Load(name, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	cfg.Server.Logger = logger
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve.Run(ctx, nil, logger, cfg, func(u string) { urls <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

// client is an HTTPS client that trusts the test CA alone, with tc's
// versions and protocols; h2 asks for HTTP/2 when the server offers it.
func (s *tlsServer) client(tc *tls.Config, h2 bool) *http.Client {
	tc = tc.Clone()
	tc.RootCAs = s.ca.Pool()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: h2}}
}

// get GETs path and checks a 200; it returns the answer's body, and the
// answer (its body read).
func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v %s", u, resp.Status, err, b)
	}
	return resp, string(b)
}

// TestHTTPS (issue 28, Build, HTTPS: "TLS 1.2 and 1.3; HTTP/2 where the
// engine has it (net/http); both engines serve TLS"): on each engine, a
// client that speaks TLS 1.2 alone and one that speaks TLS 1.3 alone both
// get /healthz and the pool's steering manifest; net/http answers over
// HTTP/2 (ALPN "h2", RFC 7301, RFC 9113 §3.2), fasthttp over HTTP/1.1
// (ALPN "http/1.1") and refuses in the handshake a client that speaks h2
// alone; curl --http2 trusting ca.pem gets HTTP/2 from net/http and
// HTTP/1.1 from fasthttp. Before this item the fasthttp listener offered no
// ALPN at all.
func TestHTTPS(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl, which this test speaks HTTP/2 to the server with, is not on the machine: %v", err)
	}
	for _, c := range []struct {
		engine, proto, alpn, curlVersion string
	}{
		{serve.EngineStd, "HTTP/2.0", "h2", "2"},
		{serve.EngineFast, "HTTP/1.1", "http/1.1", "1.1"},
	} {
		t.Run(strings.ReplaceAll(c.engine, "/", "-"), func(t *testing.T) {
			s, leaf := startTLS(t, c.engine)
			for _, v := range []struct {
				name    string
				version uint16
			}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}} {
				hc := s.client(&tls.Config{MinVersion: v.version, MaxVersion: v.version}, true)
				resp, _ := get(t, hc, s.url+"/healthz")
				if resp.TLS.Version != v.version || resp.Proto != c.proto || resp.TLS.NegotiatedProtocol != c.alpn {
					t.Errorf("%s: /healthz over %s, ALPN %q, TLS %s; want %s, %q, %s", v.name, resp.Proto, resp.TLS.NegotiatedProtocol,
						tls.VersionName(resp.TLS.Version), c.proto, c.alpn, v.name)
				}
				if got := resp.TLS.PeerCertificates[0].SerialNumber; got.Cmp(leaf.Cert.SerialNumber) != 0 {
					t.Errorf("%s: serial %x, want the leaf's %x", v.name, got, leaf.Cert.SerialNumber)
				}
				resp, body := get(t, hc, s.url+"/api/v1/steering")
				var m struct {
					Version  int      `json:"VERSION"`
					Reload   string   `json:"RELOAD-URI"`
					Priority []string `json:"PATHWAY-PRIORITY"`
				}
				// Both pathways, in the session's order; the reload
				// over the scheme the player reached.
				err := json.Unmarshal([]byte(body), &m)
				if err != nil || m.Version != 1 || len(m.Priority) != 2 || !slices.Contains(m.Priority, "a") || !slices.Contains(m.Priority, "b") ||
					!strings.HasPrefix(m.Reload, s.url+"/api/v1/steering?session=") || resp.Proto != c.proto {
					t.Errorf("%s: the steering manifest over %s: %v %s", v.name, resp.Proto, err, body)
				}
			}
			// A client of TLS 1.1 is refused: MinVersion is 1.2.
			if _, err := s.client(&tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, true).Get(s.url + "/healthz"); err == nil {
				t.Error("a TLS 1.1 client was served")
			}
			// A client that speaks h2 alone.
			conn, err := tls.Dial("tcp", strings.TrimPrefix(s.url, "https://"), &tls.Config{RootCAs: s.ca.Pool(), NextProtos: []string{"h2"}})
			switch {
			case c.alpn == "h2" && (err != nil || conn.ConnectionState().NegotiatedProtocol != "h2"):
				t.Errorf("an h2 client: %v", err)
			case c.alpn != "h2" && err == nil:
				t.Errorf("fasthttp, which has no HTTP/2, negotiated %q with an h2-only client", conn.ConnectionState().NegotiatedProtocol)
			}
			if conn != nil {
				conn.Close()
			}
			// curl, trusting the CA's file.
			out, err := exec.Command(curl, "-sS", "--http2", "--cacert", filepath.Join(s.dir, testca.CAFile),
				"-o", "/dev/null", "-w", "%{http_code} %{http_version}", s.url+"/api/v1/steering").CombinedOutput()
			if err != nil || string(out) != "200 "+c.curlVersion {
				t.Errorf("curl --http2: %v %q, want \"200 %s\"", err, out, c.curlVersion)
			}
		})
	}
}

// TestHTTPSReload (issue 28, HTTPS: "reloaded on SIGHUP without dropping
// connections"): on each engine, after the pair's files are replaced and
// the process gets SIGHUP, a new connection sees the new
// certificate (its serial) while a connection made before keeps being
// served on the old one (its request after the reload answered on the
// same connection); a pair whose key is another certificate's, and an
// expired one, are refused on reload with the key and the reason in the
// log, and the certificate served stays the last good one.
func TestHTTPSReload(t *testing.T) {
	for _, engine := range []string{serve.EngineStd, serve.EngineFast} {
		t.Run(strings.ReplaceAll(engine, "/", "-"), func(t *testing.T) {
			s, l1 := startTLS(t, engine)
			serial := func(hc *http.Client) (string, bool) {
				t.Helper()
				var reused bool
				req, _ := http.NewRequest("GET", s.url+"/healthz", nil)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
				}))
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s", resp.Status)
				}
				return resp.TLS.PeerCertificates[0].SerialNumber.String(), reused
			}
			old := s.client(&tls.Config{}, true)
			if got, _ := serial(old); got != l1.Cert.SerialNumber.String() {
				t.Fatalf("serial %s, want %s", got, l1.Cert.SerialNumber)
			}
			reload := func(want string) {
				t.Helper()
				n := strings.Count(s.logs.String(), want)
				if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(5 * time.Second); strings.Count(s.logs.String(), want) == n; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("no %q in the log 5 s after the reload:\n%s", want, s.logs.String())
					}
				}
			}

			l2, err := s.ca.Issue(testca.Spec{Names: []string{"127.0.0.1"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := l2.WriteFiles(s.dir); err != nil {
				t.Fatal(err)
			}
			reload("certificate reloaded")
			if got, _ := serial(s.client(&tls.Config{}, true)); got != l2.Cert.SerialNumber.String() {
				t.Errorf("a new connection after the reload: serial %s, want the new %s", got, l2.Cert.SerialNumber)
			}
			if got, reused := serial(old); got != l1.Cert.SerialNumber.String() || !reused {
				t.Errorf("the connection made before the reload: serial %s, reused %v; want %s on the same connection", got, reused, l1.Cert.SerialNumber)
			}

			// Refused pairs: the new certificate with the first one's key,
			// then an expired pair.
			if err := os.WriteFile(filepath.Join(s.dir, testca.KeyFile), l1.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			reload("not reloaded")
			if log := s.logs.String(); !strings.Contains(log, "http.key: "+filepath.Join(s.dir, testca.KeyFile)+": is not the key of the chain's first certificate") {
				t.Errorf("the log does not say the key is wrong:\n%s", log)
			}
			now := time.Now()
			expired, err := s.ca.Issue(testca.Spec{Names: []string{"127.0.0.1"}, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if err := expired.WriteFiles(s.dir); err != nil {
				t.Fatal(err)
			}
			reload("not reloaded")
			if log := s.logs.String(); !strings.Contains(log, "http.cert: "+filepath.Join(s.dir, testca.CertFile)+": the certificate") || !strings.Contains(log, "expired at") {
				t.Errorf("the log does not say the certificate expired:\n%s", log)
			}
			if got, _ := serial(s.client(&tls.Config{}, true)); got != l2.Cert.SerialNumber.String() {
				t.Errorf("after refused reloads: serial %s, want the last good %s", got, l2.Cert.SerialNumber)
			}
			if got, reused := serial(old); got != l1.Cert.SerialNumber.String() || !reused {
				t.Errorf("the first connection after refused reloads: serial %s, reused %v", got, reused)
			}
		})
	}
}

// TestTLSConfig (issue 28, HTTPS; brief item 1): [http] cert and key name
// the pair, relative to the file; tls_cert and tls_key are their old names;
// each mistake is refused at its line and key with the file and why. The
// lines are counted by hand in the documents below.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.WriteFiles(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := ca.Issue(testca.Spec{Names: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	expired, err := ca.Issue(testca.Spec{Names: []string{"127.0.0.1"}, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	future, err := ca.Issue(testca.Spec{Names: []string{"127.0.0.1"}, NotBefore: now.Add(time.Hour), NotAfter: now.Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "other-key.pem"), string(other.KeyPEM))
	writeFile(t, filepath.Join(dir, "expired-cert.pem"), string(expired.CertPEM))
	writeFile(t, filepath.Join(dir, "expired-key.pem"), string(expired.KeyPEM))
	writeFile(t, filepath.Join(dir, "future-cert.pem"), string(future.CertPEM))
	writeFile(t, filepath.Join(dir, "future-key.pem"), string(future.KeyPEM))
	const pool = "[steering]\n[[steering.edges]]\npathway = \"a\"\n"
	name := filepath.Join(dir, "serve.toml")
	pair := func(cert, key string) string {
		return "[http]\ncert = \"" + cert + "\"\nkey = \"" + key + "\"\n" + pool
	}
	for _, c := range []struct{ name, doc, want string }{
		{"old and new", "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n" + pair("cert.pem", "key.pem"),
			"serve.toml:1: tls_cert: is the old name of [http] cert and key, which the file gives too"},
		{"old key and new", "tls_key = \"key.pem\"\n" + pair("cert.pem", "key.pem"), "serve.toml:1: tls_key: is the old name"},
		{"cert alone", "[http]\ncert = \"cert.pem\"\n" + pool, "serve.toml:2: http.cert: is given without http.key"},
		{"key alone", "[http]\nkey = \"key.pem\"\n" + pool, "serve.toml:2: http.key: is given without http.cert"},
		{"old cert alone", "tls_cert = \"cert.pem\"\n" + pool, "serve.toml:1: tls_cert: is given without tls_key"},
		{"missing cert", pair("missing.pem", "key.pem"), "serve.toml:2: http.cert: open " + filepath.Join(dir, "missing.pem")},
		{"missing key", pair("cert.pem", "missing.pem"), "serve.toml:3: http.key: open " + filepath.Join(dir, "missing.pem")},
		{"a directory", pair(".", "key.pem"), "serve.toml:2: http.cert: " + dir + " is not a regular file"},
		{"no certificate", pair("key.pem", "key.pem"), "serve.toml:2: http.cert: " + filepath.Join(dir, "key.pem") + ": holds no PEM \"CERTIFICATE\" block"},
		{"no key", pair("cert.pem", "cert.pem"), "serve.toml:3: http.key: " + filepath.Join(dir, "cert.pem") + ": holds no PEM private key block"},
		{"another key", pair("cert.pem", "other-key.pem"), "serve.toml:3: http.key: " + filepath.Join(dir, "other-key.pem") + ": is not the key of the chain's first certificate"},
		{"old names, another key", "tls_cert = \"cert.pem\"\ntls_key = \"other-key.pem\"\n" + pool, "serve.toml:2: tls_key: " + filepath.Join(dir, "other-key.pem") + ": is not the key"},
		{"expired", pair("expired-cert.pem", "expired-key.pem"), "serve.toml:2: http.cert: " + filepath.Join(dir, "expired-cert.pem") + ": the certificate \"127.0.0.1\" (serial " + expired.Cert.SerialNumber.Text(16) + ") expired at " + expired.Cert.NotAfter.UTC().Format(time.RFC3339)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := serve.Parse(name, []byte(c.doc), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant it to hold %q", err, c.want)
			}
		})
	}

	// Accepted: [http] and the old names, relative to the file from any
	// working directory; net/http by default under TLS (for HTTP/2).
	t.Chdir(t.TempDir())
	for _, doc := range []string{pair("cert.pem", "key.pem"), "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n" + pool,
		pair(filepath.Join(dir, "cert.pem"), "key.pem")} {
		cfg, err := serve.Parse(name, []byte(doc), func(string) string { return "" })
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		p := cfg.Cert.Pair()
		if p.CertFile != filepath.Join(dir, "cert.pem") || p.KeyFile != filepath.Join(dir, "key.pem") ||
			p.Certificate.Leaf.SerialNumber.Cmp(leaf.Cert.SerialNumber) != 0 || cfg.HTTP.Engine != serve.EngineStd ||
			cfg.TLS == nil || cfg.TLS.MinVersion != tls.VersionTLS12 || cfg.TLS.MaxVersion != 0 || len(cfg.Warnings) != 1 {
			t.Errorf("%s: read as %s %s, engine %s, TLS %+v, warnings %q", doc, p.CertFile, p.KeyFile, cfg.HTTP.Engine, cfg.TLS, cfg.Warnings)
		}
	}
	// Not valid yet: accepted, with a warning at the key.
	cfg, err := serve.Parse(name, []byte(pair("future-cert.pem", "future-key.pem")), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := "serve.toml:2: http.cert: the certificate \"127.0.0.1\" (serial " + future.Cert.SerialNumber.Text(16) + ") is not valid before " + future.Cert.NotBefore.UTC().Format(time.RFC3339)
	if !strings.Contains(strings.Join(cfg.Warnings, "\n"), want) {
		t.Errorf("warnings %q\nwant %q", cfg.Warnings, want)
	}
}
