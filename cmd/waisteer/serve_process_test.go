package main

// The real command as a process, stopped by a crash and by SIGTERM.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/demo"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/verify"
)

// TestServeProcess runs the real command as a process, built once, and
// stops it as an operator's machine would: by a crash, and by SIGTERM.
func TestServeProcess(t *testing.T) {
	bin := buildWaisteer(t, t.TempDir())
	t.Run("crash", func(t *testing.T) { testServeCrash(t, bin) })
	t.Run("SIGTERM", func(t *testing.T) { testServeSIGTERM(t, bin) })
}

// testServeCrash: a real server process is killed (SIGKILL) in the middle of
// a load of records and steering requests and restarted on the same
// data_dir. Every record it acknowledged and every decision whose manifest
// went out is still served, byte for byte, and each decision verifies (§9)
// against the manifest that was served with it (§8.4: the decision is kept
// as long as the records it names).
func testServeCrash(t *testing.T, bin string) {
	r, cfg := testRoomFiles(t, t.TempDir())
	srv := startServe(t, bin, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	if err := r.Backfill(ctx, &client.Client{HTTP: hc}, srv.url, time.Now()); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	acked := map[sig.Hash][]byte{}   // records the server acknowledged
	manifests := map[string][]byte{} // decision URI → the manifest that named it
	var order []string               // the decision URIs in the order answered
	var wg sync.WaitGroup
	p := r.Policy
	for g := range 3 { // hops posting records: new digests each time
		wg.Go(func() { hopLoad(ctx, t, hc, r, g, func(int) string { return srv.url }, &mu, acked) })
	}
	for g := range 6 { // players: new sessions, and sessions asking again
		wg.Go(func() {
			target := onServer(p.ServerURI, srv.url) + "?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000"
			for n := 0; ctx.Err() == nil; n++ {
				m, err := (&client.Client{HTTP: hc}).Steer(ctx, target)
				if err != nil {
					continue
				}
				mu.Lock()
				if manifests[m.Decision] == nil {
					order = append(order, m.Decision)
				}
				manifests[m.Decision] = m.Raw
				mu.Unlock()
				if (n+g)%2 == 0 {
					target = onServer(m.Reload, srv.url) + "&_HLS_pathway=%22" + m.Priority[0] + "%22&_HLS_throughput=6000000"
				}
			}
		})
	}
	// The kill comes in the middle of the load, once it has gone on for a
	// while and acknowledged enough (a busy machine is slower).
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		enough := len(acked) >= 200 && len(manifests) >= 200
		mu.Unlock()
		if enough && time.Since(start) > time.Second {
			break
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.exited
	cancel()
	wg.Wait()
	if len(acked) == 0 || len(manifests) == 0 {
		t.Fatalf("no load before the kill: %d records, %d manifests\n%s", len(acked), len(manifests), srv.logText())
	}
	t.Logf("killed after %d records and %d decisions acknowledged", len(acked), len(manifests))

	srv = startServe(t, bin, cfg)
	ctx = context.Background()
	// Every failure is counted; the first few are shown.
	k := newKeptCheck(t, hc)
	k.records(srv.url, acked)
	// Each decision, verified with the room's files and the records the
	// restarted server holds.
	k.decisions(r, srv.url, srv.url, order, manifests)
	// And through `verify -url`, as an auditor would, for the first
	// decision answered and the last before the kill.
	for _, uri := range []string{order[0], order[len(order)-1]} {
		out, errs, code := waisteer(t, "", "verify", "-url", onServer(uri, srv.url), "-authority", r.AuthorityPub.String())
		if code != 0 || !strings.HasPrefix(out, `{"outcome":"accept"`) {
			k.failf("verify -url %s: exit %d: %s %s", uri, code, out, errs)
		}
	}
}

// keptCheck checks, after a server was killed, that what it acknowledged
// is still served, counting every failure and showing the first few.
type keptCheck struct {
	t        *testing.T
	hc       *http.Client
	failures int
}

func newKeptCheck(t *testing.T, hc *http.Client) *keptCheck {
	k := &keptCheck{t: t, hc: hc}
	t.Cleanup(func() {
		if k.failures > 0 {
			t.Errorf("%d failures after the kill", k.failures)
		}
	})
	return k
}

func (k *keptCheck) failf(format string, args ...any) {
	k.t.Helper()
	if k.failures++; k.failures <= 5 {
		k.t.Errorf(format, args...)
	}
}

func (k *keptCheck) get(target string) []byte {
	b, err := (&client.Client{HTTP: k.hc}).Get(context.Background(), target, api.MaxDecisionBytes)
	if err != nil {
		k.failf("after the kill: %v", err)
	}
	return b
}

// records checks that the server at base serves each acknowledged record
// byte for byte.
func (k *keptCheck) records(base string, acked map[sig.Hash][]byte) {
	for d, raw := range acked {
		if b := k.get(base + "/v1/records/" + d.String()); b != nil && !bytes.Equal(b, raw) {
			k.failf("record %s: the server has other bytes", d)
		}
	}
}

// decisions fetches each decision of order from the server at
// decisionsAt and the records it names from recordsAt, and verifies it
// (§9) with the room's files against the manifest that named it.
func (k *keptCheck) decisions(r *demo.Room, decisionsAt, recordsAt string, order []string, manifests map[string][]byte) {
	base := verify.Input{Descriptor: r.Descriptor, KeyLogHead: r.Head, Policy: r.PolicyBytes}
	records := map[sig.Hash][]byte{}
	for _, uri := range order {
		in := base
		if in.Decision = k.get(onServer(uri, decisionsAt)); in.Decision == nil {
			continue
		}
		in.Manifest = manifests[uri]
		named, err := decisionOf(in.Decision)
		if err != nil {
			k.failf("%s: %v", uri, err)
			continue
		}
		for _, d := range named {
			if records[d] == nil {
				records[d] = k.get(recordsAt + "/v1/records/" + d.String())
			}
			in.Records = append(in.Records, records[d])
		}
		if _, err := verify.Verify(in); err != nil {
			k.failf("decision %s after the kill: %v", uri, err)
		}
	}
}

// hopLoad posts records as hop group g until ctx ends: one to three a POST,
// new digests each time, the n-th POST to the server at base(n). What a
// server acknowledges is added to acked, under mu; a POST that fails is
// not acknowledged.
func hopLoad(ctx context.Context, t *testing.T, hc *http.Client, r *demo.Room, g int, base func(n int) string, mu *sync.Mutex, acked map[sig.Hash][]byte) {
	p := r.Policy
	for n := 0; ctx.Err() == nil; n++ {
		end := uint64(time.Now().UnixMicro()) / p.PeriodUs * p.PeriodUs
		var body []byte
		sent := map[sig.Hash][]byte{}
		for k := range 1 + n%3 {
			h := (n + k) % len(r.Hops)
			raw := r.Record(h, end-uint64(1+(n+k)%6)*p.PeriodUs, func(rec *evidence.Record) {
				rec.Sessions = uint32(1_000_000*(g+1) + 10*n + k)
			})
			sent[evidence.NamedDigest(raw)] = raw
			body = append(body, raw...)
		}
		results, err := postResults(ctx, hc, r.RecordsURL(base(n)), body)
		if err != nil {
			continue
		}
		mu.Lock()
		for _, res := range results {
			if res.Outcome != "accepted" && res.Outcome != "duplicate" {
				t.Errorf("record refused: %+v", res)
				continue
			}
			d, err := sig.ParseHash(res.Digest)
			if err != nil || sent[d] == nil {
				t.Errorf("a server acknowledged %q, which was not sent", res.Digest)
				continue
			}
			acked[d] = sent[d]
		}
		mu.Unlock()
	}
}

// decisionOf lists the digests a decision names.
func decisionOf(b []byte) ([]sig.Hash, error) {
	d, err := decision.Parse(b)
	if err != nil {
		return nil, err
	}
	var out []sig.Hash
	for i := range d.Pathways {
		out = append(out, d.Pathways[i].Records...)
	}
	return out, nil
}

// testServeSIGTERM: SIGTERM lets a request in flight finish (its record is
// acknowledged and durable), then the server writes its decisions, closes
// its store and exits 0.
func testServeSIGTERM(t *testing.T, bin string) {
	r, cfg := testRoomFiles(t, t.TempDir())
	srv := startServe(t, bin, cfg)

	raw := r.Record(0, uint64(time.Now().UnixMicro())/r.Policy.PeriodUs*r.Policy.PeriodUs-r.Policy.PeriodUs, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/rooms/%s/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", r.ID, len(raw))
	conn.Write(raw[:100])
	time.Sleep(300 * time.Millisecond) // the handler is reading the body
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case <-srv.exited:
		t.Fatalf("the server exited with a request in flight: %v\n%s", srv.err, srv.logText())
	default:
	}
	conn.Write(raw[100:])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v\n%s", err, srv.logText())
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"accepted"`) {
		t.Errorf("the request in flight: %s %s", resp.Status, body)
	}
	select {
	case <-srv.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the server did not exit after SIGTERM:\n%s", srv.logText())
	}
	if srv.err != nil {
		t.Errorf("exit: %v\n%s", srv.err, srv.logText())
	}
	for _, want := range []string{"msg=\"shutting down\"", "msg=\"store closed\"", "msg=stopped"} {
		if !strings.Contains(srv.logText(), want) {
			t.Errorf("the log lacks %s:\n%s", want, srv.logText())
		}
	}
	srv = startServe(t, bin, cfg)
	b, err := client.New().Get(context.Background(), srv.url+"/v1/records/"+evidence.NamedDigest(raw).String(), api.MaxRecordBytes)
	if err != nil || !bytes.Equal(b, raw) {
		t.Errorf("the record acknowledged during the shutdown, after a restart: %v", err)
	}
}
