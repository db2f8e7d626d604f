package main

// The server over HTTPS, behind each HTTP engine.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/store"
)

// TestServeTLS: with tls_cert and tls_key the server answers HTTPS, over
// HTTP/2 behind net/http (the default under TLS) and HTTP/1.1 behind
// fasthttp when http.engine asks for it, steers through it, and stops
// cleanly when its context ends.
func TestServeTLS(t *testing.T) {
	for _, c := range []struct{ engine, doc string }{
		{serve.EngineStd, ""},
		{serve.EngineFast, "[http]\nengine = \"fasthttp\"\n"},
	} {
		t.Run(strings.ReplaceAll(c.engine, "/", "-"), func(t *testing.T) { testServeTLS(t, c.doc, c.engine == serve.EngineStd) })
	}
}

func testServeTLS(t *testing.T, httpDoc string, wantHTTP2 bool) {
	dir := t.TempDir()
	testRoomFiles(t, dir)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "waisteer test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	doc := "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n" + httpDoc + "[[room]]\ndescriptor = \"room.cbor\"\nkeylog = \"keylog.cbor\"\npolicy = \"policy.wsp1\"\nsteering_key = \"steer.key\"\n"
	cfg, err := serve.Parse(filepath.Join(dir, "serve.toml"), []byte(doc), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logb lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logb, nil))
	ctx, stop := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Serve(ctx, nil, logger, ln, cfg, store.NewMemory(), store.NewLoads(), func(u string) { urls <- u })
	}()
	var u string
	select {
	case u = <-urls:
	case err := <-served:
		t.Fatalf("serve: %v", err)
	}
	if !strings.HasPrefix(u, "https://127.0.0.1:") {
		t.Errorf("url %q", u)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := hc.Get(u + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || (resp.ProtoMajor == 2) != wantHTTP2 {
		t.Errorf("%s over %s", resp.Status, resp.Proto)
	}
	resp, err = hc.Get(u + "/v1/steer")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != server.ManifestType || !bytes.Contains(body, []byte("PATHWAY-PRIORITY")) {
		t.Errorf("steering over TLS: %s %q %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	stop()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	if !strings.Contains(logb.String(), "msg=stopped") {
		t.Errorf("log:\n%s", logb.String())
	}
}
