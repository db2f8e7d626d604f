package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
// names them by, from the clone's root; PORT, PORT2 and PGPORT are free ports
// on the loopback, and PGTMP the test's own temporary directory (testscript's
// TMPDIR is inside its work directory, which PostgreSQL's user cannot enter).
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
			ports, err := freePorts(3)
			if err != nil {
				return err
			}
			for i, name := range []string{"PORT", "PORT2", "PGPORT"} {
				env.Setenv(name, ports[i])
			}
			env.Setenv("PGTMP", os.TempDir())
			return nil
		},
	})
}

// examples are the documented example files, under testdata.
var examples = []string{"policy/example.toml", "serve/example.toml", "record/example.toml", "serve/pool.toml", "serve/qoe.toml"}

// freePorts are n distinct ports nothing listens on now: each is held until
// all are chosen, so that none is chosen twice.
func freePorts(n int) ([]string, error) {
	var ports []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		_, port, err := net.SplitHostPort(ln.Addr().String())
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
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
// are the ones the test runs (issue 11), and chain.txtar runs them all, one
// after the other, in one directory (issue 29: a walkthrough that ended
// inside its own directory broke the next one). Every copy, NAME.sh in any
// script, is held to the README. With -update-walkthrough the copies are
// written from the README.
func TestWalkthroughIsTheREADMEs(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	walks, err := readmeWalkthroughs(readme)
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := filepath.Glob(filepath.Join("testdata", "script", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	held := map[string][]string{} // a walkthrough → the scripts holding a copy
	for _, name := range scripts {
		a, err := txtar.ParseFile(name)
		if err != nil {
			t.Fatal(err)
		}
		changed := false
		for i, f := range a.Files {
			walk, ok := strings.CutSuffix(f.Name, ".sh")
			want, known := walks[walk]
			if !ok || !known {
				continue
			}
			held[walk] = append(held[walk], filepath.Base(name))
			got := string(f.Data)
			if got == want {
				continue
			}
			if *updateWalkthrough {
				a.Files[i].Data = []byte(want)
				changed = true
				continue
			}
			t.Errorf("%s's %s.sh is not the README's walkthrough %s: %s\n(go test ./cmd/waisteer -run TestWalkthroughIsTheREADMEs -update-walkthrough writes the README's in)", name, walk, walk, firstDifference(got, want))
		}
		if changed {
			if err := os.WriteFile(name, txtar.Format(a), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for walk := range walks {
		if !slices.Contains(held[walk], walk+".txtar") {
			t.Errorf("the README's walkthrough %s has no script testdata/script/%s.txtar holding it as %s.sh", walk, walk, walk)
		}
		if !slices.Contains(held[walk], "chain.txtar") {
			t.Errorf("testdata/script/chain.txtar does not run the README's walkthrough %s (it holds no %s.sh)", walk, walk)
		}
	}
}

// firstDifference says where two texts first differ, by line.
func firstDifference(got, want string) string {
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
			return fmt.Sprintf("at its line %d it has\n\t%q\nand the README has\n\t%q", n+1, g, w)
		}
	}
	return "they differ"
}

// walkthroughOpening is a walkthrough's first line: a directory of its own,
// made (mkdir -p, which a second run does not trip on; or afresh, rm -rf
// then mkdir) and entered. walkthroughClosing is its last: back to the root.
var (
	walkthroughOpening = regexp.MustCompile(`^(?:mkdir -p ([a-z0-9]+)(?:/[a-z0-9/]*)?|rm -rf ([a-z0-9]+) && mkdir ([a-z0-9]+)) && cd ([a-z0-9]+)(?:\s+#.*)?$`)
	walkthroughClosing = regexp.MustCompile(`^cd \.\.(?:\s+#.*)?$`)
	cdCommand          = regexp.MustCompile(`(?m)(?:^|[;&|(]\s*)cd\s`)
)

// TestWalkthroughsStartAndEndInTheRoot: issue 29's five walkthroughs are in
// the README, and each starts in the clone's root, works in a directory of
// its own that .gitignore lists (its private keys and tokens are then no
// `git add .` from a commit), and ends back in the root, so that the next
// one can follow in the same shell. The scripts (NAME.txtar, chain.txtar)
// show that they do so when run, twice in a row; this reads the README.
func TestWalkthroughsStartAndEndInTheRoot(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := strings.Split(string(ignore), "\n")
	walks, err := readmeWalkthroughs(readme)
	if err != nil {
		t.Fatal(err)
	}
	// Issue 29, "Build": the room, the pool, QoE, the front on a directory
	// origin, two servers on one PostgreSQL.
	for _, want := range []string{"walkthrough", "pool", "qoe", "front", "postgres"} {
		if _, ok := walks[want]; !ok {
			t.Errorf("the README has no walkthrough %s", want)
		}
	}
	for walk, text := range walks {
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		m := walkthroughOpening.FindStringSubmatch(lines[0])
		if m == nil {
			t.Errorf("walkthrough %s begins %q, not by making a directory of its own that a second run does not trip on (mkdir -p DIR && cd DIR, or rm -rf DIR && mkdir DIR && cd DIR)", walk, lines[0])
			continue
		}
		dir := m[1] + m[2]
		if m[3] != "" && m[3] != m[2] || m[4] != dir {
			t.Errorf("walkthrough %s begins %q: it does not enter the directory it makes", walk, lines[0])
		}
		if !walkthroughClosing.MatchString(lines[len(lines)-1]) {
			t.Errorf("walkthrough %s ends %q, not back in the clone's root (cd ..)", walk, lines[len(lines)-1])
		}
		if n := len(cdCommand.FindAllStringIndex(text, -1)); n != 2 {
			t.Errorf("walkthrough %s changes directory %d times; only its first and last lines may, so that cd .. is the root", walk, n)
		}
		if !slices.Contains(ignored, "/"+dir+"/") {
			t.Errorf("walkthrough %s works in %s/, which .gitignore does not list as /%s/", walk, dir, dir)
		}
	}
}

// TestREADMEInstallsFirst: the quick start, the README's first section a
// newcomer follows (issue 29: a pool first), installs the binary before the
// first walkthrough calls it (issue 11: a newcomer following it literally
// had no waisteer).
func TestREADMEInstallsFirst(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	section := strings.Index(s, "## Quick start: a pool in five minutes")
	install := strings.Index(s, "go install ./cmd/waisteer")
	walk := walkthroughStart.FindStringIndex(s)
	if section < 0 || install < section || walk == nil || install > walk[0] {
		t.Errorf("the README does not install waisteer (go install ./cmd/waisteer) in its quick start, before the first walkthrough")
	}
}
