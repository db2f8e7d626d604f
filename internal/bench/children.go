package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/internal/client"
)

// The children.

// benchChild is a server running as a child process.
type benchChild struct {
	cmd    *exec.Cmd
	addr   string // host:port
	pprof  string // host:port of its profiling listener, or ""
	procs  int    // its GOMAXPROCS, as it printed it (0: not printed)
	path   string // the demo's steering route
	stderr *benchTail
	done   chan error
}

// benchTail keeps the last few KiB a child wrote to its standard error.
type benchTail struct {
	mu sync.Mutex
	b  []byte
}

func (t *benchTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
	return len(p), nil
}

func (t *benchTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// start runs this binary with args and waits for the line "ready URL" on
// its standard output (and "pprof URL" before it, when it profiles).
func (b *bencher) start(ctx context.Context, args ...string) (*benchChild, error) {
	return b.startChild(ctx, benchReady, args...)
}

// benchReady reads bench serve's and bench plain's lines: "gomaxprocs
// N", "pprof URL" when it profiles, then "ready URL".
func benchReady(c *benchChild, line string) {
	if v, ok := strings.CutPrefix(line, "gomaxprocs "); ok {
		c.procs, _ = strconv.Atoi(v)
	}
	if u, ok := strings.CutPrefix(line, "pprof http://"); ok {
		c.pprof = u
	}
	if u, ok := strings.CutPrefix(line, "ready http://"); ok {
		c.addr = u
	}
}

// startChild runs this binary with args, on the servers' core when
// pinned, and gives each line it prints to ready until ready has set the
// child's address.
func (b *bencher) startChild(ctx context.Context, ready func(*benchChild, string), args ...string) (*benchChild, error) {
	return b.startChildOn(ctx, ready, b.pin.serverCore(), nil, args...)
}

// startChildOn is startChild on the cpu list cpus (when pinned), with env
// added to the child's environment.
func (b *bencher) startChildOn(ctx context.Context, ready func(*benchChild, string), cpus string, env []string, args ...string) (*benchChild, error) {
	cmd, err := Spawn(args...)
	if err != nil {
		return nil, err
	}
	if len(env) > 0 {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, env...)
	}
	cmd = b.pin.wrap(cmd, cpus)
	c := &benchChild{cmd: cmd, stderr: &benchTail{}, done: make(chan error, 1)}
	cmd.Stderr = c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// Buffered, so that no line before the one awaited is lost; past it
	// the lines are read and dropped, so that the child never blocks.
	lines := make(chan string, 4096)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
		c.done <- cmd.Wait()
	}()
	timeout := time.After(60 * time.Second)
	for c.addr == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				return nil, fmt.Errorf("%s exited before it was ready: %s", strings.Join(args, " "), c.stderr)
			}
			ready(c, line)
		case <-timeout:
			c.kill()
			return nil, fmt.Errorf("%s was not ready in 60 s: %s", strings.Join(args, " "), c.stderr)
		case <-ctx.Done():
			c.kill()
			return nil, ctx.Err()
		}
	}
	return c, nil
}

func (c *benchChild) kill() {
	c.cmd.Process.Kill()
	<-c.done
}

// stop asks the child to shut down (SIGTERM: serve finishes its requests
// and writes its pending decisions) and waits for it.
func (c *benchChild) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			return fmt.Errorf("%v: %s", err, c.stderr)
		}
		return nil
	case <-time.After(60 * time.Second):
		c.kill()
		return errors.New("the child did not stop in 60 s")
	}
}

// cpu is the child's CPU time so far, user and system, from /proc; false
// where /proc does not give it.
func (c *benchChild) cpu() (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command's closing parenthesis: state is the first,
	// utime the 12th and stime the 13th (proc(5)), in clock ticks of
	// 1/100 s (USER_HZ).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * 10 * time.Millisecond, true
}

// peakRSS is the child's peak resident set, from /proc; 0 when unknown.
func (c *benchChild) peakRSS() int64 { return c.status("VmHWM:") }

// rss is the child's resident set now.
func (c *benchChild) rss() int64 { return c.status("VmRSS:") }

// status reads a field in kB of the child's /proc/PID/status.
func (c *benchChild) status(field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profile fetches the child's CPU profile of the next d into the profile
// directory, in the background; wait waits for it and fetches its
// allocation and mutex profiles.
func (b *bencher) profile(c *benchChild, name string, d time.Duration, heaps bool) (wait func() []string) {
	if b.o.Profile == "" || c.pprof == "" {
		return func() []string { return nil }
	}
	var profiled []string
	var wg sync.WaitGroup
	wg.Go(func() {
		file := filepath.Join(b.o.Profile, "cpu-"+name+".pprof")
		secs := max(1, int((d+time.Second/2)/time.Second))
		if err := benchFetch(c.pprof, fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), file); err != nil {
			b.logf("profile: %v", err)
			return
		}
		profiled = append(profiled, file)
	})
	return func() []string {
		wg.Wait()
		if heaps {
			for _, kind := range []string{"allocs", "mutex"} {
				file := filepath.Join(b.o.Profile, kind+"-"+name+".pprof")
				if err := benchFetch(c.pprof, "/debug/pprof/"+kind, file); err == nil {
					profiled = append(profiled, file)
				}
			}
		}
		return profiled
	}
}

// benchFetch writes what a GET of path on addr answers into the file name.
func benchFetch(addr, path, name string) error {
	b, err := benchGet(context.Background(), addr, path)
	if err != nil {
		return err
	}
	return os.WriteFile(name, b, 0o644)
}

// benchGet fetches target from the server at addr, which must answer 200.
// A CPU profile's answer begins only once its seconds are over, so
// neither the whole exchange nor the wait for the answer's header is
// bounded by the client's usual 15 s (client.New).
func benchGet(ctx context.Context, addr, target string) ([]byte, error) {
	c := client.New()
	c.HTTP.Timeout = 15 * time.Minute
	if t, ok := c.HTTP.Transport.(*http.Transport); ok {
		t.ResponseHeaderTimeout = 15 * time.Minute
	}
	return c.Get(ctx, "http://"+addr+target, 1<<30)
}

// post posts records on c and returns the answer's status.
func benchPost(c *benchConn, path string, body []byte) (int, []byte, error) {
	c.req = fmt.Appendf(c.req[:0], "POST %s HTTP/1.1\r\nHost: steer.example\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", path, len(body))
	c.req = append(c.req, body...)
	return c.roundTrip()
}

// real measures the real server over a room of n pathways: it serves the
// room from a fresh bbolt store, gets a full window of records, is driven
// to saturation and then at half that rate, takes records in batches, and
