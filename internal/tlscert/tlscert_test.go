package tlscert_test

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/testca"
	"github.com/waisteer/waisteer/internal/tlscert"
)

func newCA(t testing.TB) *testca.CA {
	t.Helper()
	ca, err := testca.New()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issue(t testing.TB, ca *testca.CA, spec testca.Spec) *testca.Leaf {
	t.Helper()
	if spec.Names == nil {
		spec.Names = []string{"127.0.0.1", "localhost"}
	}
	l, err := ca.Issue(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestParseRefuses (issue 28, HTTPS; brief item 1): each mistake an
// operator makes with a pair is refused, in the file it is in, with the
// reason in words; the expected reasons are the package doc's list.
func TestParseRefuses(t *testing.T) {
	ca := newCA(t)
	l := issue(t, ca, testca.Spec{})
	other := issue(t, ca, testca.Spec{})
	now := time.Now()
	expired := issue(t, ca, testca.Spec{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
	leafOnly := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Cert.Raw})
	der, _ := pem.Decode(l.CertPEM)
	kder, _ := pem.Decode(l.KeyPEM)
	bad := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}})
	for _, c := range []struct {
		name       string
		cert, key  []byte
		part, want string
	}{
		{"empty certificate file", nil, l.KeyPEM, tlscert.PartCert, `holds no PEM "CERTIFICATE" block`},
		{"a key for a certificate", l.KeyPEM, l.KeyPEM, tlscert.PartCert, `holds no PEM "CERTIFICATE" block`},
		{"DER certificate", der.Bytes, l.KeyPEM, tlscert.PartCert, "looks like DER"},
		{"a block that does not parse", bad, l.KeyPEM, tlscert.PartCert, "certificate 1 of the chain does not parse"},
		{"a second block that does not parse", slices.Concat(leafOnly, bad), l.KeyPEM, tlscert.PartCert, "certificate 2 of the chain does not parse"},
		{"empty key file", l.CertPEM, nil, tlscert.PartKey, "holds no PEM private key block"},
		{"a certificate for a key", l.CertPEM, l.CertPEM, tlscert.PartKey, "holds no PEM private key block"},
		{"DER key", l.CertPEM, kder.Bytes, tlscert.PartKey, "looks like DER"},
		{"two keys", l.CertPEM, slices.Concat(l.KeyPEM, other.KeyPEM), tlscert.PartKey, "holds two private keys"},
		{"encrypted PKCS #8", l.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}), tlscert.PartKey, "is encrypted"},
		{"encrypted legacy", l.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"}, Bytes: []byte{1}}), tlscert.PartKey, "is encrypted"},
		{"a DSA key", l.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "DSA PRIVATE KEY", Bytes: []byte{1}}), tlscert.PartKey, `"DSA PRIVATE KEY" block, which is not a key the server reads`},
		{"a key that does not parse", l.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{0x30, 0}}), tlscert.PartKey, `its "PRIVATE KEY" block does not parse`},
		{"another certificate's key", l.CertPEM, other.KeyPEM, tlscert.PartKey, "is not the key of the chain's first certificate"},
		{"the chain upside down", slices.Concat(ca.PEM, leafOnly), l.KeyPEM, tlscert.PartCert, "the server's own certificate goes first"},
		{"expired", expired.CertPEM, expired.KeyPEM, tlscert.PartCert, "expired at " + expired.Cert.NotAfter.UTC().Format(time.RFC3339)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := tlscert.Parse(c.cert, c.key, now)
			var e *tlscert.Error
			if !errors.As(err, &e) || e.Part != c.part || !strings.Contains(e.Reason, c.want) {
				t.Errorf("Parse: %v (%#v), %v\nwant the %s refused: %q", p, e, err, c.part, c.want)
			}
		})
	}
}

// TestParseAccepts: the pairs operators have are read: a chain with its
// intermediate (and one with a CA that did not issue the leaf, with a
// warning), one file holding both, text around the blocks (RFC 7468
// §2), and openssl's own key forms (SEC 1 after "EC PARAMETERS", PKCS #1
// RSA, PKCS #8 Ed25519), made by openssl rather than by this test. A
// certificate not valid yet is accepted with a warning that says when it
// becomes valid.
func TestParseAccepts(t *testing.T) {
	ca := newCA(t)
	l := issue(t, ca, testca.Spec{})
	now := time.Now()
	check := func(name string, cert, key []byte, leafDER []byte) *tlscert.Pair {
		t.Helper()
		p, err := tlscert.Parse(cert, key, now)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return nil
		}
		if leafDER != nil && !bytes.Equal(p.Certificate.Certificate[0], leafDER) || p.Certificate.Leaf == nil {
			t.Errorf("%s: the first certificate is not the leaf", name)
		}
		return p
	}
	p := check("chain", l.CertPEM, l.KeyPEM, l.Cert.Raw)
	if p != nil && len(p.Certificate.Certificate) != 2 {
		t.Errorf("chain of %d certificates, want the leaf and the CA", len(p.Certificate.Certificate))
	}
	both := slices.Concat([]byte("subject=CN = 127.0.0.1\nissuer=CN = test\n"), l.CertPEM, l.KeyPEM)
	check("one file", both, both, l.Cert.Raw)

	future := issue(t, ca, testca.Spec{NotBefore: now.Add(time.Hour), NotAfter: now.Add(48 * time.Hour)})
	if p := check("not yet valid", future.CertPEM, future.KeyPEM, future.Cert.Raw); p != nil {
		if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "is not valid before "+future.Cert.NotBefore.UTC().Format(time.RFC3339)) {
			t.Errorf("warnings %q", p.Warnings)
		}
	}
	if p != nil && len(p.Warnings) != 0 {
		t.Errorf("a valid pair warns %q", p.Warnings)
	}
	// The leaf, then a CA that did not issue it.
	wrong := slices.Concat(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Cert.Raw}), newCA(t).PEM)
	if p := check("a wrong intermediate", wrong, l.KeyPEM, l.Cert.Raw); p != nil {
		if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "the chain's certificate 1 (the certificate \"127.0.0.1\"") ||
			!strings.Contains(p.Warnings[0], "is not issued by certificate 2 (the certificate \"waisteer test CA") {
			t.Errorf("warnings %q", p.Warnings)
		}
	}

	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatalf("openssl, which makes the keys of this test, is not on the machine: %v", err)
	}
	dir := t.TempDir()
	for _, c := range []struct{ name, genkey, keyType string }{
		{"SEC 1 after EC PARAMETERS", "ecparam -name prime256v1 -genkey", "EC PRIVATE KEY"},
		{"PKCS #1 RSA", "genrsa -traditional 2048", "RSA PRIVATE KEY"},
		{"PKCS #8 Ed25519", "genpkey -algorithm ed25519", "PRIVATE KEY"},
	} {
		keyFile, certFile := filepath.Join(dir, "k.pem"), filepath.Join(dir, "c.pem")
		if out, err := exec.Command(openssl, append([]string{strings.Fields(c.genkey)[0], "-out", keyFile}, strings.Fields(c.genkey)[1:]...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", c.name, err, out)
		}
		if out, err := exec.Command(openssl, "req", "-x509", "-new", "-key", keyFile, "-subj", "/CN=localhost", "-days", "1", "-out", certFile).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", c.name, err, out)
		}
		key, _ := os.ReadFile(keyFile)
		if !bytes.Contains(key, []byte("-----BEGIN "+c.keyType+"-----")) {
			t.Fatalf("%s: openssl wrote\n%s", c.name, key)
		}
		if _, err := tlscert.Load(certFile, keyFile, now); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		// openssl's encrypted form of the same key is refused.
		enc := filepath.Join(dir, "enc.pem")
		if out, err := exec.Command(openssl, "pkey", "-in", keyFile, "-aes256", "-passout", "pass:x", "-out", enc).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", c.name, err, out)
		}
		var e *tlscert.Error
		if _, err := tlscert.Load(certFile, enc, now); !errors.As(err, &e) || e.Part != tlscert.PartKey || !strings.Contains(e.Reason, "is encrypted") {
			t.Errorf("%s encrypted by openssl: %v", c.name, err)
		}
	}
}

// TestLoadFiles: a missing file is the error of its part.
func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	if _, err := ca.WriteFiles(dir, "localhost"); err != nil {
		t.Fatal(err)
	}
	cert, key, missing := filepath.Join(dir, testca.CertFile), filepath.Join(dir, testca.KeyFile), filepath.Join(dir, "missing.pem")
	var e *tlscert.Error
	if _, err := tlscert.Load(missing, key, time.Now()); !errors.As(err, &e) || e.Part != tlscert.PartCert || !strings.Contains(e.Reason, missing) {
		t.Errorf("missing certificate: %v", err)
	}
	if _, err := tlscert.Load(cert, missing, time.Now()); !errors.As(err, &e) || e.Part != tlscert.PartKey || !strings.Contains(e.Reason, missing) {
		t.Errorf("missing key: %v", err)
	}
	if _, err := tlscert.Load(cert, key, time.Now()); err != nil {
		t.Error(err)
	}
}

// TestReload (issue 28, HTTPS: "reloaded on SIGHUP without dropping
// connections"): a handshake after Reload presents the new certificate
// (its serial), a pair that does not load keeps the old one, and
// handshakes racing a reload each see one whole pair (run with -race).
func TestReload(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	l1, err := ca.WriteFiles(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, testca.CertFile), filepath.Join(dir, testca.KeyFile)
	p, err := tlscert.Load(certFile, keyFile, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := tlscert.New(p)
	if p := c.Pair(); p.CertFile != certFile || p.KeyFile != keyFile {
		t.Errorf("files %s %s", p.CertFile, p.KeyFile)
	}
	serial := func() string {
		t.Helper()
		got, err := c.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Leaf.SerialNumber.String()
	}
	if s := serial(); s != l1.Cert.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", s, l1.Cert.SerialNumber)
	}
	l2 := issue(t, ca, testca.Spec{Names: []string{"127.0.0.1"}})
	if err := l2.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reload(time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != l2.Cert.SerialNumber.String() {
		t.Errorf("after Reload: serial %s, want the new %s", s, l2.Cert.SerialNumber)
	}
	// A key of another certificate: refused, the old pair stays.
	if err := os.WriteFile(keyFile, l1.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var e *tlscert.Error
	if _, err := c.Reload(time.Now()); !errors.As(err, &e) || e.Part != tlscert.PartKey {
		t.Errorf("a mismatched pair reloaded: %v", err)
	}
	if s := serial(); s != l2.Cert.SerialNumber.String() {
		t.Errorf("after a refused Reload: serial %s, want %s still", s, l2.Cert.SerialNumber)
	}

	// Handshakes racing Set.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", c.Config("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { conn.(*tls.Conn).Handshake(); conn.Close() }()
		}
	}()
	p1, _ := tlscert.Parse(l1.CertPEM, l1.KeyPEM, time.Now())
	p2, _ := tlscert.Parse(l2.CertPEM, l2.KeyPEM, time.Now())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.Set([]*tlscert.Pair{p1, p2}[i%2])
		}
	}()
	seen := map[string]bool{}
	for range 40 {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		seen[conn.ConnectionState().PeerCertificates[0].SerialNumber.String()] = true
		conn.Close()
	}
	close(stop)
	wg.Wait()
	for s := range seen {
		if s != l1.Cert.SerialNumber.String() && s != l2.Cert.SerialNumber.String() {
			t.Errorf("a handshake saw serial %s", s)
		}
	}
}
