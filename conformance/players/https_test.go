package players

import (
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/testca"
	"github.com/waisteer/waisteer/internal/tlscert"
)

// serving is how the players and the test reach the test's waisteer
// server: plain HTTP, or HTTPS (issue 28) with a certificate the test's
// own CA issued. The pathway servers and the origin stay on plain HTTP: a
// page on http may ask an https steering server, and the segments' scheme
// is the content description's.
type serving struct {
	scheme string
	tls    *tls.Config  // the server's; nil for HTTP
	client *http.Client // the test's own requests to the server
	// spki is the leaf's SPKI hash, which Chromium is told to trust
	// (--ignore-certificate-errors-spki-list); "" for HTTP.
	spki string
	// caFile is the CA's certificate (PEM), which ffmpeg is told to trust
	// (-ca_file); "" for HTTP.
	caFile string
}

// plainHTTP is waisteer on plain HTTP, as the tests ran before issue 28.
func plainHTTP() *serving {
	return &serving{scheme: "http", client: &http.Client{Timeout: 10 * time.Second}}
}

// listen listens on addr, through TLS when the server speaks HTTPS, and
// returns the listener and the base URL the server is reached at.
func (sv *serving) listen(t *testing.T, addr string) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	base := sv.scheme + "://" + ln.Addr().String()
	if sv.tls != nil {
		ln = tls.NewListener(ln, sv.tls)
	}
	return ln, base
}

// ffmpeg is the input options ffmpeg needs to reach the server: verify
// its certificate against the test's CA.
func (sv *serving) ffmpeg() []string {
	if sv.caFile == "" {
		return nil
	}
	return []string{"-tls_verify", "1", "-ca_file", sv.caFile}
}

// chromium is the flags Chromium needs to reach the server.
func (sv *serving) chromium() []string {
	if sv.spki == "" {
		return nil
	}
	return []string{"--ignore-certificate-errors-spki-list=" + sv.spki}
}

// overHTTPS is waisteer on HTTPS (issue 28), as `waisteer serve` serves
// [http] cert and key: a CA the test makes issues a leaf for names (the
// addresses the server listens on), written to cert.pem and key.pem and
// read back by internal/tlscert, TLS 1.2 and 1.3, HTTP/1.1 on fasthttp.
// Chromium trusts the leaf by its SPKI hash, ffmpeg and the test's own
// client the CA.
func overHTTPS(t *testing.T, names ...string) *serving {
	t.Helper()
	ca, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	leaf, err := ca.WriteFiles(dir, names...)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tlscert.Load(filepath.Join(dir, testca.CertFile), filepath.Join(dir, testca.KeyFile), time.Now())
	if err != nil {
		t.Fatalf("the test's certificate: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	return &serving{
		scheme: "https", tls: tlscert.New(pair).Config("http/1.1"), client: client,
		spki: leaf.SPKI, caFile: filepath.Join(dir, testca.CAFile),
	}
}

// TestPlayersFollowWaisteerOverHTTPS is TestPlayersFollowWaisteer with
// waisteer, its front and its steering routes, on HTTPS (issue 28: the
// players' test runs a page per player over HTTPS with the test CA
// trusted): every page loads its content description from the front over
// https and steers over https, every steering request came over TLS, and
// Chromium trusts the test's leaf by its SPKI hash alone. The pages and
// the pathways stay on http: a page on http may ask an https server.
func TestPlayersFollowWaisteerOverHTTPS(t *testing.T) {
	followWaisteer(t, overHTTPS(t, "127.0.0.1"))
}

// TestFFmpegThroughTheFrontOverHTTPS is TestFFmpegThroughTheFront over
// HTTPS: ffmpeg verifies every certificate against the test's CA
// (-tls_verify 1 -ca_file), opens the front's https URL, is redirected to
// an edge's https URL (the request's scheme and port kept) and reads the
// stream from it over TLS.
func TestFFmpegThroughTheFrontOverHTTPS(t *testing.T) {
	fs := newFrontSetup("ffmpeg-tls", 11)
	names := []string{fs.ip}
	for _, e := range fs.edges {
		names = append(names, e.ip)
	}
	fs.sv = overHTTPS(t, names...)
	ffmpegThroughTheFront(t, fs)
}
