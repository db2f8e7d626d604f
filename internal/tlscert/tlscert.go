// Package tlscert keeps the server's TLS certificate: a chain and its
// private key, read from PEM files, checked, and swapped atomically, so that
// a certificate renewed on disk is served to the next handshake while every
// connection already made keeps the one it was made with.
//
// # Files
//
// The certificate file holds the chain, the server's own certificate first
// and then the intermediates that sign it, each a "CERTIFICATE" block (RFC
// 7468 §5). The key file holds exactly one unencrypted private key: PKCS #8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY");
// ECDSA, RSA or Ed25519. Text outside the blocks is ignored, as RFC 7468
// §2 asks of parsers (openssl writes such text); so are blocks of another
// kind ("EC PARAMETERS", which `openssl ecparam -genkey` writes, and a key in
// the certificate file or certificates in the key file: one file may hold
// both). Each file is at most MaxFileBytes.
//
// A pair is refused, with the file it is wrong in and why, when a file
// holds no certificate or no key (or two keys, or an encrypted one), a block
// does not parse, the key is not the first certificate's, or the first
// certificate has expired: every client refuses an expired certificate, so
// a server that started with one would serve nothing. A certificate that is
// not valid yet (a clock behind the issuer's) is accepted, with a warning; so
// is a chain in which a certificate is not issued by the next.
//
// # Reload
//
// [Cert.GetCertificate] reads the current pair through an atomic pointer; a
// [tls.Config] that names it ([Cert.Config]) never holds the pair itself.
// [Cert.Set] and [Cert.Reload] replace it for the handshakes that follow;
// a pair that does not load replaces nothing.
package tlscert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/files"
)

// MaxFileBytes bounds each file: a chain of a few certificates is a few
// kilobytes.
const MaxFileBytes = 1 << 20

// The files of a pair, which an Error names.
const (
	PartCert = "certificate"
	PartKey  = "key"
)

// Error is why a pair was refused, and in which of its files.
type Error struct {
	Part   string // PartCert or PartKey
	File   string // the file's path, when Load read it and its bytes are wrong
	Reason string
}

func (e *Error) Error() string {
	if e.File != "" {
		return e.File + ": " + e.Reason
	}
	return e.Reason
}

func certErr(format string, args ...any) error {
	return &Error{Part: PartCert, Reason: fmt.Sprintf(format, args...)}
}

func keyErr(format string, args ...any) error {
	return &Error{Part: PartKey, Reason: fmt.Sprintf(format, args...)}
}

// Pair is a certificate chain and its key, checked.
type Pair struct {
	Certificate       *tls.Certificate // Leaf set
	Warnings          []string         // what the operator should know of an accepted pair
	CertFile, KeyFile string           // the files Load read it from
}

// Parse reads a pair from the PEM bytes of its two files and checks it at
// time now.
func Parse(certPEM, keyPEM []byte, now time.Time) (*Pair, error) {
	var chain [][]byte
	var certs []*x509.Certificate
	rest := certPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, certErr("certificate %d of the chain does not parse: %v", len(certs)+1, err)
		}
		chain, certs = append(chain, b.Bytes), append(certs, c)
	}
	if len(certs) == 0 {
		if looksDER(certPEM) {
			return nil, certErr("holds no PEM \"CERTIFICATE\" block (it looks like DER: `openssl x509 -inform der -in FILE` converts it)")
		}
		return nil, certErr("holds no PEM \"CERTIFICATE\" block")
	}

	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	// The key must be the first certificate's: that is the one a client
	// checks the handshake's signature with (RFC 8446 §4.4.2).
	leaf := certs[0]
	if !samePublic(leaf.PublicKey, key.Public()) {
		for i, c := range certs[1:] {
			if samePublic(c.PublicKey, key.Public()) {
				return nil, certErr("the key is the public key of the chain's certificate %d (%s), not of the first: the server's own certificate goes first", i+2, name(c))
			}
		}
		return nil, keyErr("is not the key of the chain's first certificate (%s)", name(leaf))
	}
	if now.After(leaf.NotAfter) {
		return nil, certErr("%s expired at %s: clients refuse it", name(leaf), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	p := &Pair{Certificate: &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}}
	if now.Before(leaf.NotBefore) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s is not valid before %s: clients refuse it until then (is the clock right?)", name(leaf), leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	// Each certificate should be issued by the next (RFC 8446 §4.4.2).
	// Clients build the path from what they are sent in any order and
	// ignore what they do not need, so this is a warning: the chain may
	// still lack the intermediate a client needs.
	for i := 0; i+1 < len(certs); i++ {
		if certs[i].CheckSignatureFrom(certs[i+1]) != nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("the chain's certificate %d (%s) is not issued by certificate %d (%s): a client that lacks the intermediate refuses the chain", i+1, name(certs[i]), i+2, name(certs[i+1])))
		}
	}
	return p, nil
}

// parseKey reads the one private key of a key file.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	var found *pem.Block
	rest := keyPEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "":
			return nil, keyErr("is encrypted: the server reads an unencrypted key (`openssl pkey -in FILE` decrypts it)")
		case !strings.HasSuffix(b.Type, "PRIVATE KEY"):
			continue
		case found != nil:
			return nil, keyErr("holds two private keys (%q and %q): give the certificate's alone", found.Type, b.Type)
		}
		found = b
	}
	if found == nil {
		if looksDER(keyPEM) {
			return nil, keyErr("holds no PEM private key block (it looks like DER: `openssl pkey -inform der -in FILE` converts it)")
		}
		return nil, keyErr("holds no PEM private key block (\"PRIVATE KEY\", \"EC PRIVATE KEY\" or \"RSA PRIVATE KEY\")")
	}
	var k any
	var err error
	switch found.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(found.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(found.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(found.Bytes)
	default:
		return nil, keyErr("holds a %q block, which is not a key the server reads (\"PRIVATE KEY\", \"EC PRIVATE KEY\" or \"RSA PRIVATE KEY\")", found.Type)
	}
	if err != nil {
		return nil, keyErr("its %q block does not parse: %v", found.Type, err)
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
		return k.(crypto.Signer), nil
	default:
		return nil, keyErr("holds a %T, which TLS does not sign with (ECDSA, RSA or Ed25519)", k)
	}
}

// samePublic reports whether two public keys are one.
func samePublic(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// looksDER reports whether b starts as a DER SEQUENCE does, a file saved
// in the wrong form.
func looksDER(b []byte) bool {
	return len(b) > 1 && b[0] == 0x30 && !bytes.Contains(b, []byte("-----BEGIN"))
}

// name names a certificate in a message: its subject and serial number.
func name(c *x509.Certificate) string {
	subject := c.Subject.CommonName
	if subject == "" {
		subject = c.Subject.String()
	}
	return fmt.Sprintf("the certificate %q (serial %s)", subject, c.SerialNumber.Text(16))
}

// Load reads and checks the pair of two files at time now. Its errors are
// *Error, with the file's path.
func Load(certFile, keyFile string, now time.Time) (*Pair, error) {
	certPEM, err := files.Read(certFile, MaxFileBytes)
	if err != nil {
		return nil, &Error{Part: PartCert, Reason: err.Error()} // the path is in it
	}
	keyPEM, err := files.Read(keyFile, MaxFileBytes)
	if err != nil {
		return nil, &Error{Part: PartKey, Reason: err.Error()}
	}
	p, err := Parse(certPEM, keyPEM, now)
	if e := (*Error)(nil); errors.As(err, &e) {
		e.File = certFile
		if e.Part == PartKey {
			e.File = keyFile
		}
		return nil, err
	}
	p.CertFile, p.KeyFile = certFile, keyFile
	return p, nil
}

// Cert is the certificate a server presents: one pair at a time, replaced
// whole.
type Cert struct {
	cur atomic.Pointer[Pair]
}

// New is the Cert that presents p.
func New(p *Pair) *Cert {
	c := &Cert{}
	c.cur.Store(p)
	return c
}

// Pair is the pair handshakes take now.
func (c *Cert) Pair() *Pair { return c.cur.Load() }

// Set makes p the pair of the handshakes that follow.
func (c *Cert) Set(p *Pair) { c.cur.Store(p) }

// Reload reads the current pair's files again and, when their pair loads,
// makes it the pair of the handshakes that follow; when it does not, the
// current pair stays and the error says why.
func (c *Cert) Reload(now time.Time) (*Pair, error) {
	cur := c.cur.Load()
	p, err := Load(cur.CertFile, cur.KeyFile, now)
	if err != nil {
		return nil, err
	}
	c.Set(p)
	return p, nil
}

// GetCertificate is tls.Config's: the current pair, whatever the client
// asked for.
func (c *Cert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if p := c.cur.Load(); p != nil {
		return p.Certificate, nil
	}
	return nil, errors.New("tlscert: no certificate")
}

// Config is a server's tls.Config over c: TLS 1.2 and 1.3 (no maximum, so
// that a later version is offered once crypto/tls has it), and the
// application protocols of nextProtos (ALPN, RFC 7301), most preferred
// first.
func (c *Cert) Config(nextProtos ...string) *tls.Config {
	return &tls.Config{
		GetCertificate: c.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     nextProtos,
	}
}
