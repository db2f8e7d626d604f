package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/waisteer/waisteer/internal/serve"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "run the steering server for the rooms and pools of a TOML configuration",
		run:     runServe,
	})
}

// runServe is `waisteer serve -c FILE`: internal/serve runs the server of
// the configuration (testdata/serve/example.toml documents it) until
// SIGINT or SIGTERM.
func runServe(e *env, args []string) error {
	fs := newFlags(e, "serve", "-c FILE [-log text|json] [-log-level LEVEL]")
	cfgFile := fs.String("c", "", "the configuration `file` (TOML; cmd/waisteer/testdata/serve/example.toml documents it)")
	logFormat := fs.String("log", "text", "the log's format: text or json")
	logLevel := fs.String("log-level", "info", "the least level logged: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *cfgFile == "" {
		return usagef("-c FILE is required")
	}
	logger, err := serve.NewLogger(e.stderr, *logFormat, *logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	cfg, err := serve.Load(*cfgFile, os.Getenv)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	cfg.Server.Logger = logger

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve.Run(ctx, stop, logger, cfg, nil)
}
