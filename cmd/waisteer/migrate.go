package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/store/postgres"
)

func init() {
	register(&command{
		name:    "migrate",
		summary: "apply the pending schema migrations to the PostgreSQL store of a configuration ([store] engine = \"postgres\")",
		run:     runMigrate,
	})
}

func runMigrate(e *env, args []string) error {
	fs := newFlags(e, "migrate", "-c FILE")
	cfgFile := fs.String("c", "", "the configuration `file` of waisteer serve, whose [store] names the database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *cfgFile == "" {
		return usagef("-c FILE is required")
	}
	cfg, err := serve.Load(*cfgFile, os.Getenv)
	if err != nil {
		return err
	}
	if cfg.Store.Engine != serve.StorePostgres {
		return fmt.Errorf("%s: [store] engine is %q: only a PostgreSQL store has migrations (bbolt's file needs none)", *cfgFile, cfg.Store.Engine)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	applied, err := postgres.Migrate(ctx, cfg.Store.DSN)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(e.stdout, "schema at version %d: nothing to apply\n", postgres.Version)
		return nil
	}
	fmt.Fprintf(e.stdout, "schema at version %d: applied %v\n", postgres.Version, applied)
	return nil
}
