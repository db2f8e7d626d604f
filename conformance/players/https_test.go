package players

import (
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"
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
