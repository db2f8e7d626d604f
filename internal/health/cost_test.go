//go:build unix

package health

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/guard"
)

// serversEnv makes the test binary, run as a child, the edges of the cost
// measurement: that many loopback listeners answering every GET with 200,
// so that their CPU is the child's and not counted as the checker's.
const serversEnv = "WAISTEER_HEALTH_SERVERS"

func TestMain(m *testing.M) {
	if n := os.Getenv(serversEnv); n != "" {
		os.Exit(serveEdges(n))
	}
	guard.Seen = func(e *guard.PanicError) { fmt.Fprintf(os.Stderr, "recovered: %v\n%s\n", e, e.Stack) }
	code := m.Run()
	if n, want := guard.Total(), expectedPanics.Load(); n != want {
		// A panic in a check is recovered so that the checker goes on
		// (issue 26); a test still fails on one it did not cause.
		fmt.Fprintf(os.Stderr, "FAIL: %d panics recovered in the checkers, %d of them caused on purpose\n", n, want)
		code = 1
	}
	os.Exit(code)
}

// serveEdges listens on n loopback ports, prints them on one line, and
// serves until its stdin closes.
func serveEdges(count string) int {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ports := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ports[i] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go edge(c)
			}
		}()
	}
	fmt.Println(strings.Join(ports, " "))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// edge answers each request on c with a small 200, keeping c open.
func edge(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	for readRequest(br) == nil {
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

// edgesInChild starts n edges in a child process and returns their URLs.
func edgesInChild(tb testing.TB, n int) []string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serversEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("the edges' child: %v", err)
	}
	ports := strings.Fields(line)
	if len(ports) != n {
		tb.Fatalf("the child listens on %d ports, want %d", len(ports), n)
	}
	urls := make([]string, n)
	for i, p := range ports {
		urls[i] = "http://127.0.0.1:" + p + "/health"
	}
	return urls
}

// cpu is the process's user and system time so far.
func cpu(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pool runs a checker of n edges in a child every period, lets a warm-up
// pass, then measures for the given time: the share of one core the
// process used, and the checks done and failed.
func pool(tb testing.TB, n int, every, warm, measure time.Duration) (core float64, checks, failed int64) {
	urls := edgesInChild(tb, n)
	targets := make([]Target, n)
	for i, u := range urls {
		targets[i] = Target{fmt.Sprint("edge-", i), u}
	}
	var done, bad atomic.Int64
	var c *Checker
	var err error
	c, err = New(Settings{Every: every, Timeout: every, DownAfter: 2}, targets, Options{
		OnCheck: func(name string, o Outcome, _ time.Duration) {
			done.Add(1)
			if o != OutcomePass {
				if bad.Add(1) <= 5 {
					st, _ := c.Status(name)
					tb.Logf("%s: %s", name, st.LastError)
				}
			}
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	c.Start(tb.Context())
	defer c.Stop()
	time.Sleep(warm)
	cpu0, t0, n0, b0 := cpu(tb), time.Now(), done.Load(), bad.Load()
	time.Sleep(measure)
	cpu1, t1, n1, b1 := cpu(tb), time.Now(), done.Load(), bad.Load()
	for i := range n {
		if st, _ := c.Status(targets[i].Name); !st.Up || st.Checks == 0 {
			tb.Fatalf("%s: %+v", targets[i].Name, st)
		}
	}
	return float64(cpu1-cpu0) / float64(t1.Sub(t0)), n1 - n0, b1 - b0
}

// BenchmarkPool1000 measures the figure: a pool of 1 000 edges
// checked every second takes at most 5 % of a core. The edges, loopback
// listeners answering 200 on kept connections, run in a child process; the
// figure is this process's CPU (getrusage) over 10 s, after a warm-up
// period in which the connections are made.
//
//	go test -run '^$' -bench Pool1000 -benchtime 1x ./internal/health/
//
// Measured on the project's 2-core machine: 2.2 to 2.5 % of a core.
func BenchmarkPool1000(b *testing.B) {
	const n, every, measure = 1000, time.Second, 10 * time.Second
	for b.Loop() {
		core, checks, failed := pool(b, n, every, 2*every, measure)
		b.ReportMetric(100*core, "%core")
		b.ReportMetric(float64(checks)/measure.Seconds(), "checks/s")
		if failed != 0 {
			b.Fatalf("%d checks of %d failed", failed, checks)
		}
		if core > 0.05 {
			b.Fatalf("%.2f %% of a core, more than 5 %%", 100*core)
		}
	}
}
