package main

// The children of `waisteer bench`: the real server with an optional
// profiling listener, and the plain servers it is measured against.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/waisteer/waisteer/internal/server"
)

// runBenchServe is `waisteer serve` (the same configuration, store and
// server) that prints "ready URL" once it listens, for bench; with -pprof
// it serves profiles on a loopback address, which serve never does.
func runBenchServe(e *env, args []string) error {
	fs := newFlags(e, "bench serve", "-c FILE [-pprof 127.0.0.1:PORT]")
	cfgFile := fs.String("c", "", "the configuration `file`, as serve reads it")
	pprofAddr := fs.String("pprof", "", "serve CPU, allocation and mutex profiles on this loopback `address`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *cfgFile == "" {
		return usagef("-c FILE is required, and nothing else")
	}
	logger, err := newLogger(e.stderr, "text", "warn")
	if err != nil {
		return err
	}
	cfg, err := loadServeConfig(*cfgFile, os.Getenv)
	if err != nil {
		return err
	}
	cfg.server.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pprofAddr != "" {
		u, err := benchProfiles(ctx, *pprofAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "pprof %s\n", u)
	}
	return openAndServe(ctx, stop, logger, cfg, func(u string) { fmt.Fprintf(e.stdout, "ready %s\n", u) })
}

// benchProfiles serves the process's profiles on a loopback address until
// ctx ends: /debug/pprof/profile?seconds=N (CPU), and allocs, heap, mutex,
// block and goroutine by name.
func benchProfiles(ctx context.Context, addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return "", usagef("-pprof %q: a loopback address, such as 127.0.0.1:6060", addr)
	}
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs < 1 || secs > 600 {
			secs = 10
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	})
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
	go func() { <-ctx.Done(); hs.Close() }()
	return "http://" + ln.Addr().String(), nil
}

// benchSink keeps the plain server's signatures observable.
var benchSink atomic.Uint32

// runBenchPlain is the baseline servers (b) and (c): net/http answering
// every request with a fixed manifest and, with -sign, after an Ed25519
// signature of the message the file holds.
func runBenchPlain(e *env, args []string) error {
	fs := newFlags(e, "bench plain", "-manifest FILE [-sign FILE] [-listen ADDR]")
	manifestFile := fs.String("manifest", "", "the `file` of the manifest to answer")
	signFile := fs.String("sign", "", "sign the message in this `file` for every request")
	listen := fs.String("listen", "127.0.0.1:0", "the `address` to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *manifestFile == "" {
		return usagef("-manifest FILE is required")
	}
	manifest, err := os.ReadFile(*manifestFile)
	if err != nil {
		return err
	}
	var msg []byte
	if *signFile != "" {
		if msg, err = os.ReadFile(*signFile); err != nil {
			return err
		}
	}
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	length := strconv.Itoa(len(manifest))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg != nil {
			s := ed25519.Sign(key, msg)
			benchSink.Store(binary.LittleEndian.Uint32(s))
		}
		hd := w.Header()
		hd.Set("Content-Type", server.ManifestType)
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Length", length)
		w.Write(manifest)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: defaultReadHeaderTimeout, IdleTimeout: defaultIdleTimeout,
		ErrorLog: slog.NewLogLogger(slog.NewTextHandler(e.stderr, nil), slog.LevelWarn)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(e.stdout, "ready http://%s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
