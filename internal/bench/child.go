package bench

// The children of `waisteer bench`: the real server with an optional
// profiling listener, and the plain servers it is measured against.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/internal/sig"
)

// ServeChild is `waisteer bench serve`: `waisteer serve` of the
// configuration cfgFile (the same configuration, store and server) that
// prints "ready URL" on stdout once it listens, for bench; with pprofAddr
// it serves profiles on that loopback address, which serve never does.
func ServeChild(ctx context.Context, stop func(), stdout, stderr io.Writer, cfgFile, pprofAddr string) error {
	logger, err := serve.NewLogger(stderr, "text", "warn")
	if err != nil {
		return err
	}
	cfg, err := serve.Load(cfgFile, os.Getenv)
	if err != nil {
		return err
	}
	cfg.Server.Logger = logger
	// Under taskset the runtime sizes GOMAXPROCS from the affinity: bench
	// prints the child's own, not its.
	fmt.Fprintf(stdout, "gomaxprocs %d\n", runtime.GOMAXPROCS(0))
	if pprofAddr != "" {
		u, err := benchProfiles(ctx, pprofAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pprof %s\n", u)
	}
	return serve.Run(ctx, stop, logger, cfg, func(u string) { fmt.Fprintf(stdout, "ready %s\n", u) })
}

// benchProfiles serves the process's profiles on a loopback address until
// ctx ends: /debug/pprof/profile?seconds=N (CPU), /debug/pprof/trace?seconds=N
// (the runtime's execution trace), allocs, heap, mutex, block and
// goroutine by name, and the flight recorder (benchFlight).
func benchProfiles(ctx context.Context, addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("-pprof %q: a loopback address, such as 127.0.0.1:6060", addr)
	}
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", timedProfile(600, 10, pprof.StartCPUProfile, pprof.StopCPUProfile))
	mux.HandleFunc("/debug/pprof/trace", timedProfile(60, 1, trace.Start, trace.Stop))
	fl := &benchFlight{}
	mux.HandleFunc("POST /debug/flight", fl.start)
	mux.HandleFunc("GET /debug/flight", fl.write)
	mux.HandleFunc("/debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := pprof.Lookup(r.PathValue("name"))
		if p == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		p.WriteTo(w, 0)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	go func() { <-ctx.Done(); hs.Close(); fl.stop() }()
	return "http://" + ln.Addr().String(), nil
}

// benchFlight is the child's flight recorder (runtime/trace): started by
// POST /debug/flight, it keeps the last benchFlightAge of the execution
// trace in memory, which GET /debug/flight writes out, so that bench can
// fetch the seconds around a slow answer once it has seen one (the soak).
type benchFlight struct {
	mu sync.Mutex
	fr *trace.FlightRecorder
}

// benchFlightAge is how much of the trace the recorder keeps at least:
// more than bench's poll of the server's histograms, so that a slow answer
// seen at a poll is in what it fetches.
const benchFlightAge = 5 * time.Second

func (f *benchFlight) start(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fr != nil {
		return
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: benchFlightAge, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	f.fr = fr
}

func (f *benchFlight) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fr != nil {
		f.fr.Stop()
		f.fr = nil
	}
}

func (f *benchFlight) write(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fr == nil {
		http.Error(w, "the flight recorder is not started", http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	f.fr.WriteTo(w)
}

// timedProfile serves a profile taken over ?seconds=N (1 to most; def
// when absent or out of range), or until the request ends: start writes it
// to the answer, stop ends it.
func timedProfile(most, def int, start func(io.Writer) error, stop func()) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs < 1 || secs > most {
			secs = def
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := start(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		stop()
	}
}

// benchSink keeps the plain server's signatures observable.
var benchSink atomic.Uint32

// PlainChild is `waisteer bench plain`, the baseline servers (b), (c) and
// (d): net/http on listen answering every request with the manifest in
// manifestFile and, when signFile is not "", after an Ed25519 signature of
// the message it holds (made as the server makes its decisions' signatures,
// sig.PrivateKey), and, when durableFile is not "" too, once the
// message's SHA-256 and its signature are durable in that file
// (durable.go); until ctx ends.
func PlainChild(ctx context.Context, stdout, stderr io.Writer, manifestFile, signFile, durableFile, listen string) error {
	manifest, err := os.ReadFile(manifestFile)
	if err != nil {
		return err
	}
	var msg []byte
	if signFile != "" {
		if msg, err = os.ReadFile(signFile); err != nil {
			return err
		}
	}
	var dl *durableLog
	if durableFile != "" {
		if msg == nil {
			return errors.New("bench plain: -durable needs -sign")
		}
		if dl, err = openDurableLog(durableFile); err != nil {
			return err
		}
		defer dl.close()
	}
	key := sig.NewPrivateKey(floorSeed)
	length := strconv.Itoa(len(manifest))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg != nil {
			s := key.SignRaw(msg)
			benchSink.Store(binary.LittleEndian.Uint32(s[:]))
			if dl != nil {
				// What the answer was, in the least bytes a store could
				// keep of it: the digest of what was signed, and the
				// signature (durable.go).
				d := sha256.Sum256(msg)
				if err := dl.append(append(d[:], s[:]...)); err != nil {
					http.Error(w, "not stored", http.StatusInternalServerError)
					return
				}
			}
		}
		hd := w.Header()
		hd.Set("Content-Type", server.ManifestType)
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Length", length)
		w.Write(manifest)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: serve.DefaultReadHeaderTimeout, IdleTimeout: serve.DefaultIdleTimeout,
		ErrorLog: slog.NewLogLogger(slog.NewTextHandler(stderr, nil), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "gomaxprocs %d\nready http://%s\n", runtime.GOMAXPROCS(0), ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
