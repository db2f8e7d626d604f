package players

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tools are the programs and npm packages the test runs. CI installs them
// (README.md): Chromium and ffmpeg from Debian's packages, the players and
// playwright-core with `npm ci --prefix conformance/players`.
type tools struct {
	ffmpeg, node, chromium string
	// versions holds each npm package's version, pinned exactly in
	// package.json and installed in node_modules.
	versions map[string]string
}

// exactVersion is a pin: a version and nothing that lets npm choose another.
var exactVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// requireTools finds every tool, or fails the test naming each missing one
// and how to install it. It never skips: a CI without the players has not
// shown that they work.
func requireTools(t *testing.T) tools {
	t.Helper()
	var missing []string
	look := func(name, install string) string {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s is not on PATH (%s)", name, install))
		}
		return p
	}
	tl := tools{
		ffmpeg:   look("ffmpeg", "apt-get install -y ffmpeg"),
		node:     look("node", "Node.js 20 or later: the machine's nodejs"),
		chromium: look("chromium", "apt-get install -y chromium"),
		versions: map[string]string{},
	}

	// playwright-core and dash.js need Node.js 20 or later (their
	// package.json engines), more than Debian 12's own nodejs (18).
	if tl.node != "" {
		out, err := exec.Command(tl.node, "--version").Output()
		major := 0
		if err == nil {
			fmt.Sscanf(string(out), "v%d.", &major)
		}
		if major < 20 {
			missing = append(missing, fmt.Sprintf("node %s is not Node.js 20 or later, which playwright-core and dash.js need", strings.TrimSpace(string(out))))
		}
	}

	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile("package.json")
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil {
		t.Fatalf("reading conformance/players/package.json: %v", err)
	}
	for _, name := range []string{"hls.js", "dashjs", "shaka-player", "playwright-core", "video.js", "@videojs/http-streaming"} {
		want, ok := pkg.Dependencies[name]
		if !ok || !exactVersion.MatchString(want) {
			t.Fatalf("package.json must pin %s to one exact version, not %q", name, want)
		}
		var installed struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join("node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &installed)
		}
		switch {
		case err != nil:
			missing = append(missing, fmt.Sprintf("npm package %s %s is not installed (npm ci --prefix conformance/players)", name, want))
		case installed.Version != want:
			missing = append(missing, fmt.Sprintf("npm package %s is %s, not the pinned %s (npm ci --prefix conformance/players)", name, installed.Version, want))
		}
		tl.versions[name] = want
	}
	// video.js pins its VHS by a range: the page reports both, as the
	// pinned pair.
	tl.versions["video.js"] += " (VHS " + tl.versions["@videojs/http-streaming"] + ")"
	if len(missing) > 0 {
		t.Fatalf("the players' test cannot run without:\n  %s", strings.Join(missing, "\n  "))
	}
	return tl
}
