package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// loopbackSources are HTTP clients that each connect from one loopback address
// (Linux answers the whole of 127.0.0.0/8), so that a test's players
// come from as many client addresses as it says (issue 26 item 2: QoE
// weighs an address like one household).
type loopbackSources struct {
	mu  sync.Mutex
	tr  map[string]*http.Transport
	url string
}

func newLoopbackSources(t testing.TB, f *testFront) *loopbackSources {
	s := &loopbackSources{tr: map[string]*http.Transport{}, url: f.URL}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, tr := range s.tr {
			tr.CloseIdleConnections()
		}
	})
	return s
}

func (s *loopbackSources) client(ip string) *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	tr := s.tr[ip]
	if tr == nil {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		tr = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}, MaxIdleConnsPerHost: 4}
		s.tr[ip] = tr
	}
	return &http.Client{Transport: tr}
}

// do sends a request from ip; target is a path, or a URL on the server.
func (s *loopbackSources) do(t testing.TB, ip, method, target, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+strings.TrimPrefix(target, s.url), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := s.client(ip).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// steerFrom is env.steer from the loopback address ip.
func (e *env) steerFrom(s *loopbackSources, ip, target string, header http.Header) *manifest {
	e.t.Helper()
	resp, b := s.do(e.t, ip, "GET", target, "", header)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s from %s: status %d: %s", target, ip, resp.StatusCode, b)
	}
	checkSteerHeaders(e.t, resp)
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("manifest %s: %v", b, err)
	}
	m.raw = b
	return &m
}
