// Package testca is a certificate authority for tests: an ECDSA P-256 root
// made in the test, and server certificates it issues for IP addresses and
// DNS names. It writes what a test hands to a server and to its clients
// (ca.pem, cert.pem, key.pem) and gives what they trust: the CA's pool, and
// the base64 SHA-256 of the leaf's SubjectPublicKeyInfo, the form Chromium's
// --ignore-certificate-errors-spki-list takes.
//
// Nothing here is for a real server: the keys are made fresh each time and
// live in memory and in the test's directory.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a root certificate and its key.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // the root certificate, PEM ("CERTIFICATE")
	key  *ecdsa.PrivateKey
}

// New makes a root valid from an hour ago for a day.
func New() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "waisteer test CA " + serial.Text(16)[:8]},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, PEM: pemBlock("CERTIFICATE", der), key: key}, nil
}

// Pool is a pool that trusts the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Spec is what a leaf certifies. Zero times are an hour ago and a day
// from now.
type Spec struct {
	Names               []string // IP addresses ("127.0.0.1", "::1") and DNS names
	NotBefore, NotAfter time.Time
}

// Leaf is a server certificate the CA issued, and its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte // the leaf, then the CA: the chain a server sends
	KeyPEM  []byte // PKCS #8 ("PRIVATE KEY")
	// SPKI is the standard base64 of the SHA-256 of the leaf's DER
	// SubjectPublicKeyInfo (Chromium's --ignore-certificate-errors-spki-list).
	SPKI string
}

// Issue makes a fresh key and a server certificate for spec, signed by the
// CA, with a random serial number.
func (ca *CA) Issue(spec Spec) (*Leaf, error) {
	if len(spec.Names) == 0 {
		return nil, errors.New("testca: a leaf needs at least one IP address or DNS name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.Names[0]},
		NotBefore:    spec.NotBefore,
		NotAfter:     spec.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(24 * time.Hour)
	}
	for _, n := range spec.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return &Leaf{
		Cert:    cert,
		CertPEM: append(pemBlock("CERTIFICATE", der), ca.PEM...),
		KeyPEM:  pemBlock("PRIVATE KEY", kder),
		SPKI:    base64.StdEncoding.EncodeToString(sum[:]),
	}, nil
}

// The files WriteFiles writes in its directory.
const (
	CAFile   = "ca.pem"
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// WriteFiles issues a leaf for names (IP addresses and DNS names) and
// writes ca.pem (the root), cert.pem (the chain) and key.pem (the leaf's
// key, mode 0600) into dir.
func (ca *CA) WriteFiles(dir string, names ...string) (*Leaf, error) {
	l, err := ca.Issue(Spec{Names: names})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), ca.PEM, 0o644); err != nil {
		return nil, fmt.Errorf("testca: %w", err)
	}
	return l, l.WriteFiles(dir)
}

// WriteFiles writes the leaf's cert.pem and key.pem (mode 0600) into dir,
// replacing what is there: a server's certificate renewed in place.
func (l *Leaf) WriteFiles(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, CertFile), l.CertPEM, 0o644); err != nil {
		return fmt.Errorf("testca: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), l.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("testca: %w", err)
	}
	return nil
}

// newSerial is a random positive serial number of 128 bits (RFC 5280
// §4.1.2.2 allows up to 20 octets).
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	return n.Add(n, new(big.Int).Lsh(big.NewInt(1), 127)), nil // 128 bits, never 0
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
