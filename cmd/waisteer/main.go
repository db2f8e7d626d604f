// Command waisteer is the energy-aware content-steering server and its tools:
// one binary with a subcommand for each of its users (operators, hops,
// players' steering requests and auditors).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/term"
)

// A command is one subcommand. Each file of this package registers its own
// in an init function, so that the list in `waisteer help` is the list of
// files.
type command struct {
	name    string // as typed, possibly two words: "policy sign"
	summary string // one line for `waisteer help`
	run     func(env *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("waisteer: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// env is what a command may touch: its standard streams and its name for
// messages. Tests build one around buffers.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// usageShown is set when a flag set has printed its usage: after a
	// flag it could not parse, the flag package has said what was wrong,
	// and main says it no more (issue 29: usage errors printed once).
	usageShown bool
	// prog is the program's name as invoked, for the commands a command
	// prints for the operator to run next (invokedName).
	prog string
}

// name is how the operator runs this program (invokedName), for the
// usage lines and the commands printed to run next; "waisteer" when not
// known (tests).
func (e *env) name() string {
	if e.prog == "" {
		return "waisteer"
	}
	return e.prog
}

// usageError is a mistake in how a command was called; main prints the
// command's usage with it and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// newFlags returns a flag set for a command that reports errors rather than
// exiting.
func newFlags(e *env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("waisteer "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		e.usageShown = true
		fmt.Fprintf(e.stderr, "usage: %s %s %s\n", e.name(), name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// lookup finds the command named by the first one or two arguments.
func lookup(args []string) (*command, []string) {
	if len(args) >= 2 {
		if c, ok := commands[args[0]+" "+args[1]]; ok {
			return c, args[2:]
		}
	}
	if len(args) >= 1 {
		if c, ok := commands[args[0]]; ok {
			return c, args[1:]
		}
	}
	return nil, args
}

func help(e *env) {
	fmt.Fprintln(e.stdout, "waisteer: energy-aware content steering for HLS and DASH")
	fmt.Fprintln(e.stdout)
	fmt.Fprintf(e.stdout, "usage: %s <command> [flags] [args]\n", e.name())
	fmt.Fprintln(e.stdout)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	w := nameWidth(names)
	for _, n := range names {
		fmt.Fprintf(e.stdout, "  %-*s  %s\n", w, n, commands[n].summary)
	}
	fmt.Fprintln(e.stdout)
	fmt.Fprintf(e.stdout, "`%s <command> -h` prints a command's flags.\n", e.name())
}

// nameWidth is the width of the longest of names, for a column of them.
func nameWidth(names []string) int {
	w := 0
	for _, n := range names {
		w = max(w, len(n))
	}
	return w
}

// group prints the usage of a group of commands ("policy" for "policy
// sign" and "policy show") when args name one without a command of it, and
// reports whether they did.
func group(e *env, args []string) bool {
	var names []string
	for n := range commands {
		if strings.HasPrefix(n, args[0]+" ") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return false
	}
	sort.Strings(names)
	if len(args) > 1 && args[1] != "-h" && args[1] != "--help" {
		fmt.Fprintf(e.stderr, "waisteer %s: unknown command %q\n", args[0], args[1])
	}
	fmt.Fprintf(e.stderr, "usage: %s %s <command> [flags] [args]\n\n", e.name(), args[0])
	w := nameWidth(names)
	for _, n := range names {
		fmt.Fprintf(e.stderr, "  %-*s  %s\n", w, n, commands[n].summary)
	}
	fmt.Fprintf(e.stderr, "\n`%s %s <command> -h` prints a command's flags.\n", e.name(), args[0])
	return true
}

// run is main without the exit: it returns the process's exit code.
func run(e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, _ := lookup(args[1:]); c != nil {
				_ = c.run(e, []string{"-h"})
				return 0
			}
		}
		help(e)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, rest := lookup(args)
	if c == nil && group(e, args) {
		return 2
	}
	if c == nil {
		fmt.Fprintf(e.stderr, "waisteer: unknown command %q; `%s help` lists them\n", strings.Join(args[:min(2, len(args))], " "), e.name())
		return 2
	}
	err := c.run(e, rest)
	var ue usageError
	var ex exitCode
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ex):
		return int(ex)
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "waisteer %s: %v\n", c.name, err)
		return 2
	case e.usageShown:
		// The flag package has printed the error and the usage.
		return 2
	default:
		fmt.Fprintf(e.stderr, "waisteer %s: %v\n", c.name, err)
		return 1
	}
}

// exitCode ends a command with that code and no further message: the
// command has said what it had to (`verify` exits 1 on a refusal it printed).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit %d", int(c)) }

// isTerminal reports whether w is a terminal, where binary output is
// refused.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// invokedName is how the operator ran this program, for the commands it
// prints to run next (issue 29: the demo printed `go run ./cmd/waisteer`
// to an installed binary's user, which fails outside the clone). A program
// that `go run` built (into a go-build directory it removes on exit) is "go
// run ./cmd/waisteer" in the clone's root, or by its module path elsewhere;
// any other is its name as typed: "waisteer" when found on $PATH,
// "./waisteer" or "/opt/waisteer/bin/waisteer" when typed so. inClone
// reports whether the working directory is the clone's root.
func invokedName(arg0 string, inClone bool) string {
	dir := filepath.Dir(arg0)
	if filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		if inClone {
			return "go run ./cmd/waisteer"
		}
		return "go run github.com/waisteer/waisteer/cmd/waisteer"
	}
	if arg0 == "" {
		return "waisteer"
	}
	return shellQuote(arg0)
}

// shellQuote writes s for a POSIX shell: as it is when it holds nothing the
// shell would read otherwise, else in single quotes.
func shellQuote(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+:@,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func main() {
	_, err := os.Stat(filepath.Join("cmd", "waisteer", "main.go"))
	prog := invokedName(os.Args[0], err == nil)
	os.Exit(run(&env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, prog: prog}, os.Args[1:]))
}
