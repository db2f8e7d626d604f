package testca_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/testca"
)

// TestWriteFiles (issue 28, HTTPS: "tests make their own CA"): the files
// WriteFiles writes are judged by openssl, not by this package: `openssl
// verify` accepts cert.pem's leaf under ca.pem alone and for the names
// asked (-verify_ip, -verify_hostname); the leaf and key are ECDSA P-256;
// and SPKI is what Chromium's documentation computes for
// --ignore-certificate-errors-spki-list: `openssl x509 -pubkey | openssl pkey
// -pubin -outform der | openssl dgst -sha256 -binary | base64`.
func TestWriteFiles(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatalf("openssl, which judges the CA's files, is not on the machine: %v", err)
	}
	dir := t.TempDir()
	ca, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.WriteFiles(dir, "127.0.0.1", "::1", "localhost", "edge.test")
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-ca.pem")
	if err := os.WriteFile(other, ca2.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(stdin []byte, args ...string) (string, error) {
		cmd := exec.Command(openssl, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	cert, ca1 := filepath.Join(dir, testca.CertFile), filepath.Join(dir, testca.CAFile)
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"verify", "-CAfile", ca1, "-purpose", "sslserver", cert}, true},
		{[]string{"verify", "-CAfile", ca1, "-verify_ip", "127.0.0.1", cert}, true},
		{[]string{"verify", "-CAfile", ca1, "-verify_ip", "::1", cert}, true},
		{[]string{"verify", "-CAfile", ca1, "-verify_hostname", "edge.test", cert}, true},
		{[]string{"verify", "-CAfile", ca1, "-verify_hostname", "other.test", cert}, false},
		{[]string{"verify", "-CAfile", ca1, "-verify_ip", "127.0.0.2", cert}, false},
		{[]string{"verify", "-CAfile", other, cert}, false},
	} {
		out, err := run(nil, c.args...)
		if ok := err == nil && strings.Contains(out, ": OK"); ok != c.ok {
			t.Errorf("openssl %s: %v %s, want ok %v", strings.Join(c.args, " "), err, out, c.ok)
		}
	}
	// The key file's key is the leaf's, and both are P-256.
	out, err := run(nil, "pkey", "-in", filepath.Join(dir, testca.KeyFile), "-pubout")
	if err != nil {
		t.Fatal(err, out)
	}
	pub, err := run(nil, "x509", "-in", cert, "-noout", "-pubkey")
	if err != nil || pub != out {
		t.Errorf("the key's public key\n%s\nis not the certificate's\n%s (%v)", out, pub, err)
	}
	if k, ok := leaf.Cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("leaf key %T, want ECDSA P-256", leaf.Cert.PublicKey)
	}
	if text, err := run(nil, "x509", "-in", cert, "-noout", "-text"); err != nil || !strings.Contains(text, "prime256v1") {
		t.Errorf("openssl does not read a P-256 key in the leaf: %v\n%s", err, text)
	}
	// Chromium's recipe for the SPKI hash.
	der, err := run([]byte(pub), "pkey", "-pubin", "-outform", "der")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := run([]byte(der), "dgst", "-sha256", "-binary")
	if err != nil {
		t.Fatal(err)
	}
	b64, err := run([]byte(sum), "base64")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(b64) != leaf.SPKI {
		t.Errorf("SPKI %q, openssl's %q", leaf.SPKI, strings.TrimSpace(b64))
	}
	// The pool trusts the leaf; the other CA's does not.
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost"}); err != nil {
		t.Errorf("the CA's pool refuses its leaf: %v", err)
	}
	if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: ca2.Pool(), DNSName: "localhost"}); err == nil {
		t.Error("another CA's pool accepts the leaf")
	}
	// Two leaves have two serials.
	l2, err := ca.Issue(testca.Spec{Names: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	if l2.Cert.SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0 || l2.SPKI == leaf.SPKI {
		t.Error("two leaves share a serial or a key")
	}
	if _, err := ca.Issue(testca.Spec{}); err == nil {
		t.Error("a leaf of no name was issued")
	}
}
