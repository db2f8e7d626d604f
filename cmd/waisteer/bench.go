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
	fs := newFlags(e, "bench", "[-quick] [-servers] [-soak DURATION] [-audit N] [-d DURATION] [-conns 64,256] [-players N] [-pathways 3,32] [-engines fasthttp,net/http] [-generator auto|wrk|go] [-profile DIR] [-flight DIR] [-startup-decisions N] [-results FILE]")
	o := bench.NewOptions(false) // the flags' defaults
	fs.DurationVar(&o.Duration, "d", o.Duration, "the `duration` of each measured phase")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "the `duration` of the warm-up before the phases of each server")
	conns := fs.String("conns", "64,256", "the saturated phases' counts of keep-alive connections, comma-separated; the least is also paced at half rate")
	fs.IntVar(&o.Players, "players", o.Players, "players (sessions) of each load, shared among its connections")
	pathways := fs.String("pathways", "3,32", "the rooms' counts of pathways, comma-separated")
	engines := fs.String("engines", strings.Join(o.Engines, ","), "the server's HTTP `engines` (serve's http.engine), comma-separated: fasthttp, net/http")
	engine := fs.String("engine", "", "the one HTTP `engine` to measure: the same as -engines with one")
	fs.StringVar(&o.Generator, "generator", o.Generator, "the saturated phases' load `generator`: wrk (Debian's wrk, one thread), go (bench's own), or auto (wrk where it is on PATH)")
	fs.DurationVar(&o.Soak, "soak", 0, "instead of the phases, serve at half its saturated rate with its hops posting for this `duration`, with a line each minute")
	fs.BoolVar(&o.Servers, "servers", false, "instead of the phases, issue 31's table: one server on bbolt, then 1, 2 and 3 servers on one PostgreSQL that the bench starts (PostgreSQL's programs needed), saturated together, each server with the least of -conns as one alone; with -audit N, the three servers' room is then filled to N decisions and audited")
	fs.IntVar(&o.Audit, "audit", 0, "instead of the phases, saturate the server until it has made this many decisions, then audit its log (issue 16)")
	fs.BoolVar(&o.AuditSaturated, "audit-saturated", false, "with -servers -audit N: load the audited room saturated (closed loop) rather than at half the saturated rate, so that the audit checks δ under overload")
	fs.IntVar(&o.AuditSample, "audit-sample", 2000, "with -audit: the decisions the audit verifies by §9 in full (0: all)")
	profile := fs.String("profile", "", "write the server's CPU, allocation and mutex profiles of its saturated phases, in turns of their own (the two-core phase's too), CPU profiles of its records phases and of the start-up's recount (and a trace of it) and the phase after it, and the soak's heap profiles, into this `directory` (profiling costs the figures a little)")
	fs.StringVar(&o.Flight, "flight", "", "with -soak: run the server's flight recorder (runtime/trace) and keep its trace of the seconds before each steering answer over 50 ms, six at most, in this `directory` (the recorder's buffers are in the soak's memory figures)")
	startupDecisions := fs.Int("startup-decisions", 0, "the decisions of the start-up's store, built through the store API (0: 3750000, or 50000 with -quick)")
	results := fs.String("results", "", "also put the report into this markdown `file`'s code block under \""+bench.ResultsRun+"\" (with -soak, \""+bench.ResultsSoak+"\"; with -servers, \""+bench.ResultsServers+"\"), keeping the text around it: cmd/waisteer/testdata/bench/RESULTS.md")
	quick := fs.Bool("quick", false, "a run of under a minute: phases of about a second, 64 connections, 3 pathways, both engines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if o.Flight != "" && o.Soak == 0 {
		return usagef("-flight keeps traces of the soak's slow answers: only with -soak")
	}
	if o.Servers && o.Soak > 0 {
		return usagef("-servers measures issue 31's table: not with -soak")
	}
	if *quick {
		q := bench.NewOptions(true)
		q.Generator, q.Soak, q.Flight, q.Audit, q.AuditSample, q.Servers, q.AuditSaturated = o.Generator, o.Soak, o.Flight, o.Audit, o.AuditSample, o.Servers, o.AuditSaturated
		o = q
	} else {
		var err error
		if o.Pathways, err = benchCounts("-pathways", *pathways); err != nil {
			return err
		}
		if o.Conns, err = benchCounts("-conns", *conns); err != nil {
			return err
		}
		o.Engines = nil
		if *engine != "" {
			*engines = *engine
		}
		for f := range strings.SplitSeq(*engines, ",") {
			o.Engines = append(o.Engines, strings.TrimSpace(f))
		}
	}
	o.Profile = *profile
	o.Results, o.Command = *results, strings.Join(append([]string{"waisteer bench"}, args...), " ")
	if *startupDecisions != 0 {
		o.StartupDecisions = *startupDecisions
	}
	if err := o.Finish(); err != nil {
		return usagef("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.Run(ctx, e.stdout, e.stderr, o)
}

// benchCounts reads a comma-separated list of counts.
func benchCounts(flag, list string) ([]int, error) {
	var ns []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, usagef("%s: %q is not a count", flag, f)
		}
		ns = append(ns, n)
	}
	return ns, nil
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
	fs := newFlags(e, "bench plain", "-manifest FILE [-sign FILE [-durable FILE]] [-listen ADDR]")
	manifestFile := fs.String("manifest", "", "the `file` of the manifest to answer")
	signFile := fs.String("sign", "", "sign the message in this `file` for every request")
	durableFile := fs.String("durable", "", "with -sign: make the message's SHA-256 and its signature durable in this new `file` (a group commit of one write and one fdatasync) before each answer")
	listen := fs.String("listen", "127.0.0.1:0", "the `address` to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *manifestFile == "" {
		return usagef("-manifest FILE is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.PlainChild(ctx, e.stdout, e.stderr, *manifestFile, *signFile, *durableFile, *listen)
}
