package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
)

// TestMain runs the command line itself when the test binary is started as
// `waisteer` (testscript puts it on the scripts' PATH under that name) or as
// a child of `waisteer bench` (benchChildEnv); otherwise the tests.
func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) == "1" {
		os.Exit(run(&env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
	}
	testscript.Main(m, map[string]func(){
		"waisteer": func() { os.Exit(run(&env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])) },
	})
}

// TestScripts runs the command line's scripts in testdata/script, each a
// txtar of commands and the files they read (rogpeppe/go-internal's
// testscript; FiloSottile/age's cmd/age/testdata are the model). Each
// script's directory holds the documented examples at the paths the README
// names them by, from the clone's root, and PORT is a free port on the
// loopback.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "script"),
		Setup: func(env *testscript.Env) error {
			for _, ex := range examples {
				b, err := os.ReadFile(filepath.Join("testdata", ex))
				if err != nil {
					return err
				}
				dst := filepath.Join(env.WorkDir, "cmd", "waisteer", "testdata", ex)
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(dst, b, 0o644); err != nil {
					return err
				}
			}
			port, err := freePort()
			if err != nil {
				return err
			}
			env.Setenv("PORT", port)
			return nil
		},
	})
}

// examples are the documented example files, under testdata.
var examples = []string{"policy/example.toml", "serve/example.toml", "record/example.toml", "serve/pool.toml", "serve/qoe.toml"}

// freePort is a port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

var updateWalkthrough = flag.Bool("update-walkthrough", false, "write the README's walkthroughs into testdata/script/NAME.txtar")

// A README walkthrough is the sh blocks between a start marker and the end
// marker after it. The start marker may name it ("<!-- walkthrough pool:
// ... -->"); unnamed, it is "walkthrough". Each is run by
// testdata/script/NAME.txtar, whose NAME.sh is the walkthrough.
var (
	walkthroughStart = regexp.MustCompile(`(?m)^<!-- walkthrough( [a-z0-9-]+)?: .*-->$`)
	walkthroughEnd   = "<!-- end of walkthrough -->"
	shBlock          = regexp.MustCompile("(?ms)^```sh\n(.*?)^```$")
)

// readmeWalkthroughs are the README's walkthroughs by name: each one's sh
// blocks, in order, joined with a blank line.
func readmeWalkthroughs(readme []byte) (map[string]string, error) {
	out := map[string]string{}
	locs := walkthroughStart.FindAllSubmatchIndex(readme, -1)
	if locs == nil {
		return nil, fmt.Errorf("the README has no line matching %s", walkthroughStart)
	}
	for _, loc := range locs {
		name := "walkthrough"
		if loc[2] >= 0 {
			name = string(readme[loc[2]+1 : loc[3]])
		}
		rest := readme[loc[1]:]
		end := bytes.Index(rest, []byte(walkthroughEnd))
		if end < 0 {
			return nil, fmt.Errorf("the README's walkthrough %s has no %s", name, walkthroughEnd)
		}
		var blocks []string
		for _, m := range shBlock.FindAllSubmatch(rest[:end], -1) {
			blocks = append(blocks, string(m[1]))
		}
		if len(blocks) == 0 {
			return nil, fmt.Errorf("the README's walkthrough %s has no sh block", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("the README has two walkthroughs named %s", name)
		}
		out[name] = strings.Join(blocks, "\n")
	}
	return out, nil
}

// TestWalkthroughIsTheREADMEs: each script testdata/script/NAME.txtar runs
// the README's walkthrough NAME, line for line, so that the README's steps
// are the ones the test runs (issue 11). With -update-walkthrough the
// scripts' copies are written from the README.
func TestWalkthroughIsTheREADMEs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	walks, err := readmeWalkthroughs(readme)
	if err != nil {
		t.Fatal(err)
	}
	for walk, want := range walks {
		name := filepath.Join("testdata", "script", walk+".txtar")
		a, err := txtar.ParseFile(name)
		if err != nil {
			t.Fatal(err)
		}
		i := -1
		for k, f := range a.Files {
			if f.Name == walk+".sh" {
				i = k
			}
		}
		if i < 0 {
			t.Fatalf("%s holds no %s.sh", name, walk)
		}
		got := string(a.Files[i].Data)
		if got == want {
			continue
		}
		if *updateWalkthrough {
			a.Files[i].Data = []byte(want)
			if err := os.WriteFile(name, txtar.Format(a), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for n := 0; n < max(len(gl), len(wl)); n++ {
			g, w := "(none)", "(none)"
			if n < len(gl) {
				g = gl[n]
			}
			if n < len(wl) {
				w = wl[n]
			}
			if g != w {
				t.Fatalf("%s's %s.sh is not the README's walkthrough %s: at its line %d it has\n\t%q\nand the README has\n\t%q\n(go test ./cmd/waisteer -run TestWalkthroughIsTheREADMEs -update-walkthrough writes the README's in)", name, walk, walk, n+1, g, w)
			}
		}
	}
}

// TestREADMEInstallsFirst: the walkthrough's section installs the binary
// before the walkthrough calls it (issue 11: a newcomer following it
// literally had no waisteer).
func TestREADMEInstallsFirst(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	section := strings.Index(s, "## Steering a room of your own")
	install := strings.Index(s, "go install ./cmd/waisteer")
	walk := walkthroughStart.FindStringIndex(s)
	if section < 0 || install < section || walk == nil || install > walk[0] {
		t.Errorf("the README does not install waisteer (go install ./cmd/waisteer) in its walkthrough's section, before the walkthrough")
	}
}
