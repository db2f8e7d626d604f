package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/waisteer/waisteer/internal/demo"
)

func init() {
	register(&command{
		name:    "demo",
		summary: "serve a fresh room on localhost with simulated hops, steer a client and verify the decision",
		run:     runDemo,
	})
}

func runDemo(e *env, args []string) error {
	fs := newFlags(e, "demo", "[-listen ADDR] [-for DURATION] [-seed TEXT] [-dir DIR] [-edge-stop DURATION] [-v] | -offline [-dir DIR]")
	var o demo.Options
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "the `address` to serve on; port 0 picks a free one")
	fs.DurationVar(&o.For, "for", 0, "stop by itself after this `duration`, saying so (0: serve until Ctrl-C)")
	fs.StringVar(&o.Seed, "seed", "", "derive every key from this `text` instead of fresh randomness, so that a run can be repeated")
	fs.StringVar(&o.Dir, "dir", "", "write the room's files, its keys and a configuration for waisteer serve into this `directory`, and keep the store there (default: nothing written; the store in a temporary directory, removed when the demo stops)")
	fs.DurationVar(&o.EdgeStop, "edge-stop", demo.DefaultEdgeStop, "stop one of the pool's edges after this `duration`, to show which sessions move")
	verbose := fs.Bool("v", false, "log the server's messages of level info too")
	offline := fs.Bool("offline", false, "no server: write a room, a policy, records and one decision to -dir and verify them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *offline {
		return demo.Offline(e.stdout, o.Dir, e.name())
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Prog = e.name()
	return demo.Serve(ctx, stop, e.stdout, logger, o)
}
