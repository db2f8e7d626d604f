package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a buffer that a command writes to while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	demoSessions = regexp.MustCompile(`300 sessions: edge-1 first for (\d+), edge-2 first for (\d+), edge-3 first for (\d+)\.`)
	demoMoved    = regexp.MustCompile(`the (\d+) sessions edge-2 had first moved: (\d+) to edge-1, (\d+) to edge-3 \(by their weights\); the other (\d+) kept theirs`)
)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

var demoVerifyLine = regexp.MustCompile(`  waisteer verify -url (\S+) -authority ([0-9a-f]{64})`)

// TestDemoServes: `waisteer demo` serves a fresh room on localhost, prints
// the HLS tag and DASH element (§8.2, §8.3), the manifest it got (§8.1), and
// a `verify -url` command for its decision that the verifier accepts while
// the demo runs (§9), and refuses when another authority is pinned; Ctrl-C
// (SIGINT) stops it cleanly.
func TestDemoServes(t *testing.T) {
	var out, errs lockedBuffer
	done := make(chan int, 1)
	go func() {
		// -for bounds the demo should the test fail before its SIGINT.
		done <- run(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs}, []string{"demo", "-listen", "127.0.0.1:0", "-for", "60s", "-edge-stop", "2s"})
	}()
	exited := false
	t.Cleanup(func() {
		if !exited {
			syscall.Kill(os.Getpid(), syscall.SIGINT)
			<-done
		}
	})
	var m []string
	for deadline := time.Now().Add(20 * time.Second); m == nil; time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-done:
			exited = true
			t.Fatalf("demo exited %d before printing its verify command:\n%s\n%s", code, out.String(), errs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no verify command within 20 s:\n%s\n%s", out.String(), errs.String())
		}
		m = demoVerifyLine.FindStringSubmatch(out.String())
	}
	text := out.String()
	for _, want := range []string{`#EXT-X-CONTENT-STEERING:SERVER-URI="http://127.0.0.1:`, `<ContentSteering defaultServiceLocation="cdn-b"`,
		`"PATHWAY-CLONES":[{"BASE-ID":"cdn-b","ID":"cdn-b-edge2","URI-REPLACEMENT":{"HOST":"edge2.cdn-b.example","PARAMS":{"via":"edge2"}}}]`,
		"curl 'http://127.0.0.1:", "_HLS_throughput=6000000'"} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %s:\n%s", want, text)
		}
	}
	// Every pathway has a figure from the backfilled window (§5.3).
	if n := strings.Count(text, " figure  class "); n != 3 {
		t.Errorf("%d pathways with a figure, not 3:\n%s", n, text)
	}

	// The pool (issue 12 item 9): edge-2 stopped, its sessions moved and
	// no other, and back once it starts again.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "have their first edge back"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool's edge did not come back within 30 s:\n%s\n%s", out.String(), errs.String())
		}
	}
	text = out.String()
	if m := demoSessions.FindStringSubmatch(text); m == nil {
		t.Errorf("no count of the pool's sessions by first edge:\n%s", text)
	} else if n1, n2, n3 := atoi(m[1]), atoi(m[2]), atoi(m[3]); n1+n2+n3 != 300 || n2 < 110 || n2 > 190 {
		// edge-2 has weight 2 of 4: half of 300, within about 4.5 standard deviations.
		t.Errorf("sessions by first edge %d, %d, %d: want 300, about half on edge-2", n1, n2, n3)
	}
	if m := demoMoved.FindStringSubmatch(text); m == nil {
		t.Errorf("no line of what moved:\n%s", text)
	} else if moved, a, b, kept := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4]); a+b != moved || moved+kept != 300 {
		t.Errorf("moved %d (%d + %d), kept %d: want the moved split over edge-1 and edge-3, the rest kept", moved, a, b, kept)
	}
	if !strings.Contains(text, "300 of 300 sessions have their first edge back") {
		t.Errorf("not every session came back:\n%s", text)
	}

	vout, verrs, code := waisteer(t, "", "verify", "-url", m[1], "-authority", m[2])
	if code != 0 || !strings.HasPrefix(vout, `{"outcome":"accept"`) {
		t.Errorf("verify -url: exit %d: %s %s", code, vout, verrs)
	}
	// The audit command it prints (issue 16): the room's whole log holds.
	am := regexp.MustCompile(`  waisteer audit -url (\S+) -room ([0-9a-f]{64})`).FindStringSubmatch(text)
	if am == nil {
		t.Errorf("the demo prints no audit command:\n%s", text)
	} else {
		aout, aerrs, code := waisteer(t, "", "audit", "-url", am[1], "-room", am[2], "-state", filepath.Join(t.TempDir(), "cp"))
		if code != 0 || !strings.Contains(aout, "outcome: every check holds") {
			t.Errorf("audit: exit %d: %s %s", code, aout, aerrs)
		}
	}
	other := strings.Repeat("ab", 32)
	vout, verrs, code = waisteer(t, "", "verify", "-url", m[1], "-authority", other)
	if code != 1 || vout != `{"outcome":"refuse","reason":"authority_mismatch","where":"room"}`+"\n" || !strings.Contains(verrs, "not the pinned "+other) {
		t.Errorf("verify -url with another authority: exit %d: %s %s", code, vout, verrs)
	}

	// Ctrl-C.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		exited = true
		if code != 0 {
			t.Errorf("demo exited %d after SIGINT:\n%s", code, errs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("demo did not stop on SIGINT")
	}
}

// TestDemoBusy: a port in use is said so, with what to do.
func TestDemoBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, errs, code := waisteer(t, "", "demo", "-listen", ln.Addr().String())
	if code != 1 || !strings.Contains(errs, "is in use") || !strings.Contains(errs, "-listen 127.0.0.1:0") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// TestDemoOffline: `demo -offline` makes a decision that `waisteer verify`
// accepts from files, manifest included (§9.1).
func TestDemoOffline(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := waisteer(t, "", "demo", "-offline", "-dir", dir)
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, errs)
	}
	if !strings.Contains(out, `"PATHWAY-PRIORITY"`) || !strings.Contains(out, "#EXT-X-CONTENT-STEERING:") {
		t.Errorf("demo output lacks the manifest or the tag:\n%s", out)
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	out, errs, code = waisteer(t, "", "verify", "-room", f("room.cbor"), "-keylog", f("keylog.cbor"),
		"-policy", f("policy.wsp1"), "-decision", f("decision.wsd1"), "-records", f("records.wmh1"), "-manifest", f("manifest.json"))
	if code != 0 || !strings.HasPrefix(out, `{"outcome":"accept"`) {
		t.Fatalf("verify exited %d: %s %s", code, out, errs)
	}
	// One record short: the decision names it, so it is refused (§9.1 step 4.1).
	out, _, code = waisteer(t, "", "verify", "-room", f("room.cbor"), "-keylog", f("keylog.cbor"),
		"-policy", f("policy.wsp1"), "-decision", f("decision.wsd1"))
	if code != 1 || !strings.Contains(out, `"reason":"record_missing"`) || !strings.Contains(out, `"where":"evidence/0/0"`) {
		t.Errorf("verify without records: exit %d, %s", code, out)
	}
}

// TestDemoDirAgain: `waisteer demo -dir DIR` run twice makes a new room
// each time on the store it keeps in DIR; the second run serves beside the
// first's room rather than refusing it as another deployment's (issue 26:
// a store holding rooms the configuration does not name is refused unless
// the configuration keeps them), and the serve.toml it writes keeps them
// too.
func TestDemoDirAgain(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		_, errs, code := waisteer(t, "", "demo", "-dir", dir, "-listen", "127.0.0.1:0", "-for", "1s")
		if code != 0 {
			t.Fatalf("demo -dir, run %d: exit %d: %s", i+1, code, errs)
		}
	}
	conf, err := os.ReadFile(filepath.Join(dir, "serve.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "keep_foreign_rooms = true") {
		t.Errorf("the demo's serve.toml does not keep the earlier runs' rooms:\n%s", conf)
	}
}
