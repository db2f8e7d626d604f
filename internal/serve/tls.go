package serve

// The server's certificate: [http] cert and key (tls_cert and tls_key, their
// old names), read at start and on SIGHUP (internal/tlscert).

import (
	"errors"
	"log/slog"
	"time"

	"github.com/waisteer/waisteer/internal/tlscert"
)

// The application protocols each engine offers (ALPN, RFC 7301): net/http
// speaks HTTP/2 and HTTP/1.1, fasthttp HTTP/1.1 alone, so that a client
// that speaks only h2 is refused in the handshake rather than spoken to in
// a protocol it did not ask for.
var (
	stdProtos  = []string{"h2", "http/1.1"}
	fastProtos = []string{"http/1.1"}
)

// cert reads the pair the file names, both files or neither, under [http]
// or by the old names, not both. The pair is loaded now, so that a bad one
// stops the server before it listens (and a reload before it replaces the
// pair served).
func (r *serveReader) cert(f *serveFile, cfg *Config) {
	certKey, keyKey, certPath, keyPath := "http.cert", "http.key", f.HTTP.Cert, f.HTTP.Key
	if f.TLSCert != nil || f.TLSKey != nil {
		if f.HTTP.Cert != nil || f.HTTP.Key != nil {
			old := "tls_cert"
			if f.TLSCert == nil {
				old = "tls_key"
			}
			r.Errorf(old, "is the old name of [http] cert and key, which the file gives too: give the pair under [http] alone")
			return
		}
		certKey, keyKey, certPath, keyPath = "tls_cert", "tls_key", f.TLSCert, f.TLSKey
	}
	switch {
	case certPath == nil && keyPath == nil:
		return
	case keyPath == nil:
		r.Errorf(certKey, "is given without %s: TLS takes a certificate and its key", keyKey)
		return
	case certPath == nil:
		r.Errorf(keyKey, "is given without %s: TLS takes a certificate and its key", certKey)
		return
	}
	certFile, keyFile := r.path(*certPath), r.path(*keyPath)
	p, err := tlscert.Load(certFile, keyFile, time.Now())
	if err != nil {
		key := certKey
		if e := (*tlscert.Error)(nil); errors.As(err, &e) && e.Part == tlscert.PartKey {
			key = keyKey
		}
		r.Errorf(key, "%v", err)
		return
	}
	for _, w := range p.Warnings {
		cfg.Warnings = append(cfg.Warnings, r.At(certKey)+": "+w)
	}
	cfg.Cert = tlscert.New(p)
	cfg.TLS = cfg.Cert.Config()
}

// reloadCert makes the pair next read the one new handshakes take;
// connections already made keep theirs. Whether the server speaks TLS is
// read at start only (its listener is made then).
func reloadCert(cfg, next *Config, logger *slog.Logger) {
	switch {
	case cfg.Cert == nil && next.Cert == nil:
	case cfg.Cert == nil || next.Cert == nil:
		logger.Warn("the configuration's certificate was given or taken away: HTTPS is set at start only; restart the server to change it", "file", cfg.source)
	default:
		cfg.Cert.Set(next.Cert.Pair())
		logCert(logger, "certificate reloaded", cfg.Cert)
	}
}

// logCert logs the certificate c serves now.
func logCert(logger *slog.Logger, msg string, c *tlscert.Cert) {
	p := c.Pair()
	leaf := p.Certificate.Leaf
	logger.Info(msg, "cert", p.CertFile, "key", p.KeyFile, "subject", leaf.Subject.String(),
		"serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
}
