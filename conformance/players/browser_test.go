package players

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chromiumFlags keep the browser to loopback: no background services, and
// every host name resolved to nothing (the test names only IP addresses),
// so that nothing leaves the machine, not even a DNS query.
var chromiumFlags = []string{
	"--headless",
	"--no-sandbox", // CI runs as root
	"--remote-debugging-address=127.0.0.1",
	"--remote-debugging-port=0",
	"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.*",
	// What playwright-core gives a browser it launches itself
	// (chromiumSwitches.ts): no background services, and no throttling of
	// pages that are not in front, since every player plays at once.
	"--disable-field-trial-config",
	"--disable-background-networking",
	"--disable-background-timer-throttling",
	"--disable-backgrounding-occluded-windows",
	"--disable-renderer-backgrounding",
	"--disable-back-forward-cache",
	"--disable-breakpad",
	"--disable-client-side-phishing-detection",
	"--disable-component-extensions-with-background-pages",
	"--disable-component-update",
	"--disable-default-apps",
	"--disable-domain-reliability",
	"--disable-extensions",
	"--disable-hang-monitor",
	"--disable-ipc-flooding-protection",
	"--disable-sync",
	"--metrics-recording-only",
	"--no-first-run",
	"--no-default-browser-check",
	"--password-store=basic",
	"--use-mock-keychain",
	"--disable-features=MediaRouter,OptimizationHints,NetworkTimeServiceQuerying,AimEnabled,PreconnectToSearch,Translate,AutofillServerCommunication,CertificateTransparencyComponentUpdater,PaintHolding",
	"--enable-features=SkipListAccountsWithoutGaiaCookies",
	"--autoplay-policy=no-user-gesture-required",
	"--mute-audio",
	"about:blank",
}

var devtools = regexp.MustCompile(`DevTools listening on (ws://127\.0\.0\.1:[0-9]+/devtools/browser/[^\s]+)`)

// startChromium starts headless Chromium in its own process group, killed
// with everything it started when the test ends (or the test process dies),
// and returns the address of its DevTools endpoint.
func startChromium(t *testing.T, chromium string, extra ...string) string {
	t.Helper()
	profile := filepath.Join(t.TempDir(), "chromium")
	args := append(append([]string{"--user-data-dir=" + profile}, extra...), chromiumFlags...)
	cmd := exec.Command(chromium, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "HOME="+profile) // nothing of the machine's user
	out := &devtoolsSink{found: make(chan string, 1)}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { killGroup(t, "chromium", cmd, exited, profile) })
	select {
	case ws := <-out.found:
		return ws
	case <-exited:
	case <-time.After(30 * time.Second):
	}
	t.Fatalf("chromium gave no DevTools address; its output:\n%s", out.text())
	return ""
}

// devtoolsSink reads Chromium's stderr for the DevTools address, keeping
// the start of it for a failure's message.
type devtoolsSink struct {
	mu    sync.Mutex
	buf   []byte
	found chan string
	done  bool
}

func (s *devtoolsSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done && len(s.buf) < 64<<10 {
		s.buf = append(s.buf, b...)
		if m := devtools.FindSubmatch(s.buf); m != nil {
			s.found <- string(m[1])
			s.done = true
		}
	}
	return len(b), nil
}

func (s *devtoolsSink) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf)
}

// killGroup ends a process and its process group: politely, then for good,
// and checks that nothing started with the profile's path is left.
func killGroup(t *testing.T, name string, cmd *exec.Cmd, exited chan struct{}, marker string) {
	if cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	if marker == "" {
		return
	}
	// A helper that left the group would still name the profile.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesNaming(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("%s left processes %v running; killed them", name, left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesNaming lists the processes whose command line holds s.
func processesNaming(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pageRun is one page the driver opens.
type pageRun struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// line is one JSON line of the driver (driver.mjs).
type line struct {
	Kind        string  `json:"kind"`
	Page        string  `json:"page"`
	Text        string  `json:"text"`
	Type        string  `json:"type"`
	URL         string  `json:"url"`
	Failure     string  `json:"failure"`
	Player      string  `json:"player"`
	Version     string  `json:"version"`
	T           int64   `json:"t"` // ms since the Unix epoch
	CurrentTime float64 `json:"currentTime"`
	ReadyState  int     `json:"readyState"`
	Paused      bool    `json:"paused"`
	Ended       bool    `json:"ended"`
	BufferedEnd float64 `json:"bufferedEnd"`
	Visibility  string  `json:"visibility"`
	Dropped     int     `json:"dropped"`
	Events      []struct {
		T      int64           `json:"t"`
		Kind   string          `json:"kind"`
		Detail json.RawMessage `json:"detail"`
	} `json:"events"`
	Errors []struct {
		T     int64  `json:"t"`
		Text  string `json:"text"`
		Fatal bool   `json:"fatal"`
	} `json:"errors"`
	at time.Time // when the test read it
}

// driver is the running node driver and what it has reported.
type driver struct {
	*nodeScript
	mu    sync.Mutex
	lines []line
}

// nodeScript is a node script the test drives: its stdin, and its stdout
// read line by line.
type nodeScript struct {
	stdin  io.WriteCloser
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

// startNode runs node's script with the JSON cfg as its argument, in a
// process group of its own that dies with the test, its stderr in the
// test's log under prefix; each line of its stdout (at most maxLine bytes)
// is given to each, in order. It stops at the test's end.
func startNode(t *testing.T, node, script string, cfg []byte, prefix string, maxLine int, each func([]byte)) *nodeScript {
	t.Helper()
	n := &nodeScript{exited: make(chan struct{})}
	n.cmd = exec.Command(node, script, string(cfg))
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	n.cmd.Stderr = &logWriter{t: t, prefix: prefix}
	var err error
	if n.stdin, err = n.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), maxLine)
		for sc.Scan() {
			each(sc.Bytes())
		}
	}()
	go func() { <-read; n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

// stop closes the script's stdin, gives it 10 s to end, and kills its
// group.
func (n *nodeScript) stop(t *testing.T) {
	n.once.Do(func() {
		n.stdin.Close()
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
		}
		killGroup(t, "node", n.cmd, n.exited, "")
	})
}

func (d *driver) all() []line {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]line(nil), d.lines...)
}

// startDriver runs driver.mjs on the pages against the browser at ws.
func startDriver(t *testing.T, node, ws string, pages []pageRun) *driver {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{"cdp": ws, "pages": pages, "sampleMs": 500})
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{}
	d.nodeScript = startNode(t, node, "driver.mjs", cfg, "driver: ", 1<<20, func(b []byte) {
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			l = line{Kind: "console", Type: "driver", Text: string(b)}
		}
		l.at = time.Now()
		d.mu.Lock()
		d.lines = append(d.lines, l)
		d.mu.Unlock()
	})
	return d
}

// stop closes the driver's stdin, which ends it, and then its group.

// logWriter passes a child's stderr to the test's log.
type logWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
