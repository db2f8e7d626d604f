package main

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/waisteer/waisteer/internal/bench"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure the steering server on this machine beside a bare signature and plain servers",
		run:     runBench,
	})
	register(&command{
		name:    "bench serve",
		summary: "(for bench) waisteer serve, with an optional loopback profiling listener",
		run:     runBenchServe,
	})
	register(&command{
		name:    "bench plain",
		summary: "(for bench) a plain net/http server answering a fixed manifest, signing or not",
		run:     runBenchPlain,
	})
}

func runBench(e *env, args []string) error {
	fs := newFlags(e, "bench", "[-quick] [-d DURATION] [-clients N] [-players N] [-pathways 3,32] [-engine fasthttp|net/http] [-profile DIR]")
	o := bench.NewOptions(false) // the flags' defaults
	fs.DurationVar(&o.Duration, "d", o.Duration, "the `duration` of each measured phase")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "the `duration` of the warm-up before the phases of each server")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent clients, each one keep-alive connection: enough that the group commit, not the clients, bounds the rate")
	fs.IntVar(&o.Players, "players", o.Players, "players (sessions), shared among the clients")
	pathways := fs.String("pathways", "3,32", "the rooms' counts of pathways, comma-separated")
	profile := fs.String("profile", "", "write the server's CPU, allocation and mutex profiles of its saturated phases, and CPU profiles of its records phases, into this `directory` (profiling costs the figures a little)")
	engine := fs.String("engine", o.Engine, "the server's HTTP `engine` (serve's http.engine): fasthttp or net/http")
	quick := fs.Bool("quick", false, "a smoke run of a few seconds: short phases, few clients, 3 pathways")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *quick {
		o = bench.NewOptions(true)
	} else {
		o.Pathways = nil
		for f := range strings.SplitSeq(*pathways, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return usagef("-pathways: %q is not a count", f)
			}
			o.Pathways = append(o.Pathways, n)
		}
	}
	o.Profile, o.Engine = *profile, *engine
	if err := o.Finish(); err != nil {
		return usagef("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.Run(ctx, e.stdout, e.stderr, o)
}

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.ServeChild(ctx, stop, e.stdout, e.stderr, *cfgFile, *pprofAddr)
}

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.PlainChild(ctx, e.stdout, e.stderr, *manifestFile, *signFile, *listen)
}
