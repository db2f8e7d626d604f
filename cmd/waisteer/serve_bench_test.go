package main

// The benchmark of one room through HTTP.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/demo"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/store"
)

// BenchmarkServeHTTP measures one room through HTTP on this machine: 32
// players in a closed loop (each asks again from its manifest's RELOAD-URI
// as soon as it has its answer), against the real server on the bbolt
// store, client and server in one process. It reports decisions per second
// and the bytes each stored decision takes in the store's decision buckets
// (bbolt's in-use bytes of its pages, evidence snapshots included) and in
// the file's growth.
//
// It runs once on each HTTP engine (http.engine).
//
//	go test -run=NONE -bench=ServeHTTP -benchtime=5s ./cmd/waisteer
func BenchmarkServeHTTP(b *testing.B) {
	for _, engine := range []string{serve.EngineFast, serve.EngineStd} {
		b.Run(strings.ReplaceAll(engine, "/", "-"), func(b *testing.B) { benchServeHTTP(b, engine) })
	}
}

func benchServeHTTP(b *testing.B, engine string) {
	b.ReportAllocs()
	dir := b.TempDir()
	r, err := demo.NewRoom("bench", "http://127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, serve.StoreFile)
	st, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg := &serve.Config{HTTP: serve.DefaultLimits()}
	cfg.HTTP.Engine = engine
	logger := slog.New(slog.DiscardHandler)
	cfg.Server = server.Config{Rooms: []server.RoomConfig{r.RoomConfig()}, Logger: logger}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	urls := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Serve(ctx, nil, logger, ln, cfg, st, store.NewLoads(), func(u string) { urls <- u })
	}()
	base := <-urls
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	if err := r.Backfill(ctx, &client.Client{HTTP: hc}, base, time.Now()); err != nil {
		b.Fatal(err)
	}
	var fileBefore int64
	if fi, err := os.Stat(path); err == nil {
		fileBefore = fi.Size()
	}

	var mu sync.Mutex
	decisions := 0
	b.SetParallelism(16) // 32 players on 2 cores
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		target := base + "/v1/steer?_HLS_pathway=%22cdn-a%22&_HLS_throughput=6000000"
		n := 0
		for pb.Next() {
			m, err := (&client.Client{HTTP: hc}).Steer(ctx, target)
			if err != nil {
				b.Error(err)
				return
			}
			n++
			target = onServer(m.Reload, base) + "&_HLS_pathway=%22" + m.Priority[0] + "%22&_HLS_throughput=6000000"
		}
		mu.Lock()
		decisions += n
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	// No decision was stored before the players began: the backfill
	// stores records only.
	var inUse int
	err = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"decisions", "decision_digests", "contexts", "context_ids", "snapshots", "snapshot_bodies"} {
			bk := tx.Bucket([]byte(name))
			if bk == nil {
				return fmt.Errorf("the store has no bucket %q", name)
			}
			s := bk.Stats()
			inUse += s.LeafInuse + s.BranchInuse
		}
		return nil
	})
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(decisions)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(inUse)/float64(decisions), "B/decision")
	b.ReportMetric(float64(fi.Size()-fileBefore)/float64(decisions), "file-B/decision")
}
