package tlscert_test

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/testca"
	"github.com/waisteer/waisteer/internal/tlscert"
)

// FuzzParse (issue 28, Must show: a fuzz target for the certificate
// configuration): no pair of files makes Parse panic; what it refuses is an
// *Error naming the certificate or the key with a reason; what it accepts
// has a chain whose first certificate is the leaf, the leaf's public key is
// the private key's, and the leaf has not expired. Seeds: a good pair and
// the mistakes of TestParseRefuses.
func FuzzParse(f *testing.F) {
	ca, err := testca.New()
	if err != nil {
		f.Fatal(err)
	}
	l, err := ca.Issue(testca.Spec{Names: []string{"localhost"}})
	if err != nil {
		f.Fatal(err)
	}
	other, err := ca.Issue(testca.Spec{Names: []string{"localhost"}})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now()
	expired, err := ca.Issue(testca.Spec{Names: []string{"localhost"}, NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	leaf := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Cert.Raw})
	for _, s := range [][2][]byte{
		{l.CertPEM, l.KeyPEM}, {leaf, l.KeyPEM}, {slices.Concat(ca.PEM, leaf), l.KeyPEM}, {l.CertPEM, other.KeyPEM},
		{expired.CertPEM, expired.KeyPEM}, {nil, nil}, {l.Cert.Raw, l.KeyPEM}, {l.KeyPEM, l.CertPEM},
		{slices.Concat(l.CertPEM, l.KeyPEM), slices.Concat(l.CertPEM, l.KeyPEM)},
		{l.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}})},
		{l.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte{0x30, 0}})},
		{[]byte("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"), l.KeyPEM},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte) {
		p, err := tlscert.Parse(certPEM, keyPEM, now)
		if err != nil {
			var e *tlscert.Error
			if !errors.As(err, &e) || (e.Part != tlscert.PartCert && e.Part != tlscert.PartKey) || e.Reason == "" {
				t.Fatalf("refused without a part and a reason: %#v", err)
			}
			return
		}
		c := p.Certificate
		if len(c.Certificate) == 0 || c.Leaf == nil {
			t.Fatal("accepted without a leaf")
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil || !leaf.Equal(c.Leaf) {
			t.Fatalf("the leaf is not the chain's first certificate: %v", err)
		}
		pub := c.PrivateKey.(crypto.Signer).Public()
		if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
			t.Fatal("accepted a key that is not the leaf's")
		}
		if now.After(leaf.NotAfter) {
			t.Fatal("accepted an expired leaf")
		}
	})
}
