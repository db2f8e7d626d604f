package main

// Issue 29, the CLI: commands printed as they were invoked, -for that says
// when it stops, usage errors printed once with exit status 2, and
// configuration errors in the configuration's words.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/waisteer/waisteer/internal/serve"
)

// Issue 29 (CLI): the commands a command prints for the operator to run
// next name the program as it was invoked. Each expectation is the name an
// operator typed, by hand.
func TestInvokedName(t *testing.T) {
	for _, c := range []struct {
		arg0    string
		inClone bool
		want    string
	}{
		// `go run ./cmd/waisteer` builds into a go-build directory it removes.
		{"/tmp/go-build1234567/b001/exe/waisteer", true, "go run ./cmd/waisteer"},
		{"/tmp/go-build1234567/b001/exe/waisteer", false, "go run github.com/waisteer/waisteer/cmd/waisteer"},
		// Installed: found on $PATH by its bare name.
		{"waisteer", false, "waisteer"},
		{"waisteer", true, "waisteer"},
		// A path as typed.
		{"./waisteer", true, "./waisteer"},
		{"/opt/waisteer/bin/waisteer", false, "/opt/waisteer/bin/waisteer"},
		// A path the shell would split is quoted.
		{"/home/a b/waisteer", false, "'/home/a b/waisteer'"},
		{"/tmp/it's/waisteer", false, `'/tmp/it'\''s/waisteer'`},
		// A directory named exe elsewhere is not go run's.
		{"/usr/exe/waisteer", false, "/usr/exe/waisteer"},
	} {
		if got := invokedName(c.arg0, c.inClone); got != c.want {
			t.Errorf("invokedName(%q, %v) = %q, want %q", c.arg0, c.inClone, got, c.want)
		}
	}
}

// Issue 29 (CLI): the demo run as the installed binary prints `waisteer
// verify …`, run as ./waisteer prints `./waisteer verify …`, and the command
// it prints runs, from where the operator is, outside the clone: the
// verifier accepts the decision.
func TestDemoPrintsCommandAsInvoked(t *testing.T) {
	bindir := t.TempDir()
	bin := buildWaisteer(t, bindir)
	verifyLine := regexp.MustCompile(`(?m)^  (.*) verify -room (.*)$`)
	for _, c := range []struct {
		name, arg0, dir, want string
	}{
		{"installed", "waisteer", t.TempDir(), "waisteer"},
		{"as typed", "./waisteer", bindir, "./waisteer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append(os.Environ(), "PATH="+bindir+string(os.PathListSeparator)+os.Getenv("PATH"))
			cmd := &exec.Cmd{Path: bin, Args: []string{c.arg0, "demo", "-offline", "-dir", filepath.Join(t.TempDir(), "off")}, Dir: c.dir, Env: env}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("demo -offline: %v\n%s", err, out)
			}
			m := verifyLine.FindStringSubmatch(string(out))
			if m == nil || m[1] != c.want {
				t.Fatalf("the verify command is not run as %q:\n%s", c.want, out)
			}
			if strings.Contains(string(out), "go run") {
				t.Errorf("the output names go run:\n%s", out)
			}
			// The usage of a mistaken call, and help's hints, name it so too.
			cmd = &exec.Cmd{Path: bin, Args: []string{c.arg0, "serve", "-config", "x"}, Dir: c.dir, Env: env}
			if uout, _ := cmd.CombinedOutput(); !strings.Contains(string(uout), "\nusage: "+c.want+" serve -c FILE") {
				t.Errorf("the usage does not name %q:\n%s", c.want, uout)
			}
			cmd = &exec.Cmd{Path: bin, Args: []string{c.arg0, "frobnicate"}, Dir: c.dir, Env: env}
			if uout, _ := cmd.CombinedOutput(); !strings.Contains(string(uout), "`"+c.want+" help` lists them") {
				t.Errorf("the unknown command's hint does not name %q:\n%s", c.want, uout)
			}
			sh := exec.Command("sh", "-c", m[1]+" verify -room "+m[2])
			sh.Dir, sh.Env = c.dir, env
			vout, err := sh.CombinedOutput()
			if err != nil || !strings.HasPrefix(string(vout), `{"outcome":"accept"`) {
				t.Errorf("the printed command: %v\n%s", err, vout)
			}
		})
	}
}

// Issue 29 (CLI): `demo -for` says when it stops instead of "until Ctrl-C",
// and prints a line when it does.
func TestDemoForSaysWhenItStops(t *testing.T) {
	start := time.Now()
	out, errs, code := waisteer(t, "", "demo", "-listen", "127.0.0.1:0", "-for", "3s")
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, errs)
	}
	if strings.Contains(out, "until Ctrl-C") {
		t.Errorf("a demo with -for says it serves until Ctrl-C:\n%s", out)
	}
	m := regexp.MustCompile(`Serving for 3s, until (\d\d:\d\d:\d\d) \(-for; Ctrl-C stops it sooner\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no line of when the demo stops:\n%s", out)
	}
	// The time it names is 3 s after it started, to the second.
	at, _ := time.ParseInLocation(time.TimeOnly, m[1], time.Local)
	want := start.Add(3 * time.Second)
	at = time.Date(want.Year(), want.Month(), want.Day(), at.Hour(), at.Minute(), at.Second(), 0, time.Local)
	if d := at.Sub(want); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("it says it stops at %s, 3 s after %s is %s", m[1], start.Format(time.TimeOnly), want.Format(time.TimeOnly))
	}
	// The pool's edge would stop after -for (1m by default): said so.
	if !strings.Contains(out, "The demo would stop edge-2 in 1m0s, after -for ends it: give -edge-stop under -for to see which sessions move.") {
		t.Errorf("the demo promises an edge stop it will not reach:\n%s", out)
	}
	last := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d  stopped: -for 3s has passed; `).MatchString(last) {
		t.Errorf("the last line is %q, not that -for has passed", last)
	}
}

// Issue 29 (CLI): a usage error is printed once and exits 2; before, `serve
// -config x` printed its error twice and exited 1.
func TestUsageErrorOnce(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-config", "x"},
		{"demo", "-bogus"},
		{"verify", "-nope"},
		{"policy", "sign", "-frobnicate"},
		{"demo", "-for", "soon"},
	} {
		_, errs, code := waisteer(t, "", args...)
		// The flag package's error, then the usage and its flags (indented).
		var said []string
		for _, l := range strings.Split(strings.TrimSpace(errs), "\n") {
			if !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "usage:") {
				said = append(said, l)
			}
		}
		if code != 2 || len(said) != 1 || strings.Count(errs, "usage:") != 1 {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant exit 2, the error and the usage once each", args, code, errs)
		}
	}
	// A usage error of the command's own (not the flag package's) is
	// printed once too, with exit 2.
	_, errs, code := waisteer(t, "", "serve")
	if code != 2 || errs != "waisteer serve: -c FILE is required\n" {
		t.Errorf("serve with no -c: exit %d, stderr %q", code, errs)
	}
}

// Issue 29 (CLI): `waisteer serve` says a configuration's mistakes in its
// own words: the file, the line, the key, the type the key takes and the
// type written, and the nearest key its table allows for an unknown one:
// every table of the configuration, pools, the front and the limits
// included. The messages are written out by hand.
func TestServeConfigWords(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, doc, want string
	}{
		// The issue's example, as it was: "cannot decode TOML integer into
		// struct field serve.serveFile.SessionGrace of type string".
		{"session_grace", "session_grace = 20\n", `serve.toml:1: session_grace: expected a duration string such as "20s", got an integer`},
		{"a table's duration", "[http]\nidle_timeout = 30\n", `serve.toml:2: http.idle_timeout: expected a duration string such as "20s", got an integer`},
		{"a boolean", "[store]\nkeep_foreign_rooms = \"yes\"\n", `serve.toml:2: store.keep_foreign_rooms: expected true or false, got a string`},
		{"a room's integer", "[[room]]\ncheck_every_s = \"5s\"\n", `serve.toml:2: room[0].check_every_s: expected an integer, got a string`},
		{"a pool's edge", "[[pool]]\nname = \"p\"\n[[pool.edges]]\nweight = 1.5\n", `serve.toml:4: pool[0].edges[0].weight: expected an integer, got a float`},
		{"a pool's rule", "[[pool]]\nname = \"p\"\n[[pool.rules]]\npriority = \"a\"\n", `serve.toml:4: pool[0].rules[0].priority: expected an array of strings, got a string`},
		{"the front", "[front]\ntimeout = 5\n", `serve.toml:2: front.timeout: expected a duration string such as "20s", got an integer`},
		{"the limits", "[limits]\ntrusted_proxies = \"10.0.0.0/8\"\n", `serve.toml:2: limits.trusted_proxies: expected an array of strings, got a string`},
		{"a qoe number", "[steering]\n[steering.qoe]\nfraction = \"half\"\n", `serve.toml:3: steering.qoe.fraction: expected a number, got a string`},
		// Did you mean, at each table.
		{"top", "sesion_grace = \"20s\"\n", `serve.toml:1: sesion_grace: unknown key; did you mean "session_grace"?`},
		{"room", "[[room]]\nsteer_key = \"x\"\n", `serve.toml:2: room[0].steer_key: unknown key; did you mean "steering_key"?`},
		{"http", "[http]\nread_timout = \"1s\"\n", `serve.toml:2: http.read_timout: unknown key; did you mean "read_timeout"?`},
		{"store", "[store]\ndsnenv = \"D\"\n", `serve.toml:2: store.dsnenv: unknown key; did you mean "dsn_env"?`},
		{"front", "[front]\norign = \"x\"\n", `serve.toml:2: front.orign: unknown key; did you mean "origin"?`},
		{"steering", "[steering]\nttl = 10\n", `serve.toml:2: steering.ttl: unknown key; did you mean "ttl_s"?`},
		{"limits", "[limits]\naddress_decision_per_s = 5.0\n", `serve.toml:2: limits.address_decision_per_s: unknown key; did you mean "address_decisions_per_s"?`},
		{"no near key", "colour = 1\n", `serve.toml:1: colour: unknown key`},
		// Every mistake at once, in the order of the lines.
		{"all", "retention = 7\n[http]\nengine = 1\nmax_header_bytes = \"1k\"\n",
			"serve.toml:1: retention: expected a duration string such as \"20s\", got an integer\n" +
				"serve.toml:3: http.engine: expected a string, got an integer\n" +
				"serve.toml:4: http.max_header_bytes: expected an integer, got a string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(dir, "serve.toml")
			if err := os.WriteFile(name, []byte(c.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, errs, code := waisteer(t, "", "serve", "-c", name)
			want := "waisteer serve: " + strings.ReplaceAll(dir+"/"+c.want, "\nserve.toml", "\n"+dir+"/serve.toml") + "\n"
			if code != 1 || errs != want {
				t.Errorf("exit %d, stderr\n%s\nwant exit 1 and\n%s", code, errs, want)
			}
		})
	}
}

// Issue 29 (CLI): a policy source's mistakes in the same words.
func TestPolicySignWords(t *testing.T) {
	dir, key := policyDir(t)
	src := edit(t, dir, "p.toml", `lag = "500ms"`, "lag = 500\nlagg = \"1s\"", `latency = "1.2s"`, "latency = \"1.2s\"\ncapcity = 5")
	_, errs, code := waisteer(t, "", "policy", "sign", "-key", key, src)
	lag := lineOf(t, src, "lag = 500")
	want := "waisteer policy sign: " +
		src + ":" + itoa(lag) + `: lag: expected a duration string such as "20s", got an integer` + "\n" +
		src + ":" + itoa(lag+1) + `: lagg: unknown key; did you mean "lag"?` + "\n" +
		src + ":" + itoa(lineOf(t, src, "capcity")) + `: pathway[1].capcity: unknown key; did you mean "capacity"?` + "\n"
	if code != 1 || errs != want {
		t.Errorf("exit %d, stderr\n%s\nwant\n%s", code, errs, want)
	}
}

// Issue 29 (rooms by name or digest): a front playlist's room is found by
// its name or its id, exactly, as every route finds it; one the
// configuration does not steer is room_not_found at its line, before the
// server starts.
func TestServeFrontRoomByName(t *testing.T) {
	dir := t.TempDir()
	r, _ := testRoomFiles(t, dir) // the room "demo"
	room := "[[room]]\ndescriptor = \"room.cbor\"\nkeylog = \"keylog.cbor\"\npolicy = \"policy.wsp1\"\nsteering_key = \"steer.key\"\n"
	front := func(name string) string {
		return room + "[front]\norigin = \"" + dir + "\"\n[[front.playlists]]\npath = \"/hls/\"\nroom = \"" + name + "\"\n"
	}
	for _, ok := range []string{"demo", r.ID.String()} {
		if _, err := serve.Parse(filepath.Join(dir, "serve.toml"), []byte(front(ok)), func(string) string { return "" }); err != nil {
			t.Errorf("room = %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"demo1", "Demo", strings.Repeat("ab", 32)} {
		_, err := serve.Parse(filepath.Join(dir, "serve.toml"), []byte(front(bad)), func(string) string { return "" })
		want := filepath.Join(dir, "serve.toml") + `:10: front.playlists[0].room: no room is named "` + bad + `" or has it as its id (room_not_found); the rooms configured are "demo"`
		if err == nil || err.Error() != want {
			t.Errorf("room = %q: %v\nwant %s", bad, err, want)
		}
	}
}
