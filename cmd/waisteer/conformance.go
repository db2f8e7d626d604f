package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/waisteer/waisteer/conformance"
)

func init() {
	register(&command{
		name:    "conformance gen",
		summary: "write the steering corpus (§11) from its fixed seeds",
		run:     runConformanceGen,
	})
	register(&command{
		name:    "conformance verify",
		summary: "check a steering corpus file (COMPANION §8) against this implementation",
		run:     runConformanceVerify,
	})
}

func runConformanceGen(e *env, args []string) error {
	fs := newFlags(e, "conformance gen", "[-o FILE]")
	out := fs.String("o", "", "the file to write, - for standard output (default: "+conformance.Path+" of the checkout around the working directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("no arguments expected, got %q", fs.Args())
	}
	if *out == "" {
		// Only over the corpus of a checkout: never a stray copy in
		// whatever directory the command was run from.
		p, err := conformance.CheckoutPath(".")
		if err != nil {
			return usagef("%v; give -o FILE", err)
		}
		*out = p
	}
	b, err := conformance.Generate()
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err = e.stdout.Write(b)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

func runConformanceVerify(e *env, args []string) error {
	fs := newFlags(e, "conformance verify", "[FILE]")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var path string
	switch fs.NArg() {
	case 0:
		p, err := conformance.CheckoutPath(".")
		if err != nil {
			return usagef("%v; give FILE", err)
		}
		path = p
	case 1:
		path = fs.Arg(0)
	default:
		return usagef("at most one FILE, got %d", fs.NArg())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := conformance.Parse(b)
	if err != nil {
		var fe *conformance.FormatError
		if errors.As(err, &fe) {
			return fmt.Errorf("%s: %w", path, err)
		}
		return err
	}
	res := conformance.Check(f)
	if err := res.Write(e.stdout); err != nil {
		return err
	}
	if res.Failed > 0 {
		return exitCode(1)
	}
	return nil
}
