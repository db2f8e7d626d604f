package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// githubAnchor is the fragment GitHub gives a heading: lower case, spaces
// to hyphens, and every character but letters, digits, hyphens and
// underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestREADMEShape (issue 29, "README"): the first screen is one sentence of
// what waisteer is, then the two commands' explanation, a table of contents
// whose every link is a heading of the README, the words it uses defined
// before the quick start, and the pool's quick start before energy rooms;
// every § names its document (WAI, COMPANION or an RFC).
func TestREADMEShape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllStringSubmatch(s, -1) {
		anchors[githubAnchor(m[1])] = true
	}
	toc := s[strings.Index(s, "**Contents:**"):]
	toc = toc[:strings.Index(toc, "\n\n")]
	links := regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(toc, -1)
	if len(links) < 10 {
		t.Errorf("the table of contents has %d links", len(links))
	}
	for _, l := range links {
		if !anchors[l[1]] {
			t.Errorf("the table of contents links #%s, which is no heading of the README", l[1])
		}
	}
	order := []string{"**Contents:**", "## Words used here", "## Quick start: a pool in five minutes", "## Energy rooms", "## The tests"}
	for k := 1; k < len(order); k++ {
		if i, j := strings.Index(s, order[k-1]), strings.Index(s, order[k]); i < 0 || j < i {
			t.Errorf("%q is not after %q", order[k], order[k-1])
		}
	}
	for _, term := range []string{"**Pathway**", "**Steering manifest**", "**Session**", "**Pool**", "**Energy room**", "`WSP1`", "`WMH1`", "`WSD1`", "**WAI §N**", "**COMPANION §N**"} {
		if i := strings.Index(s, term); i < 0 || i > strings.Index(s, "## Quick start") {
			t.Errorf("%q is not defined before the quick start", term)
		}
	}
	named := regexp.MustCompile(`(WAI|COMPANION|RFC [0-9]+[a-z]*|extension's|extension)\s$`)
	for i := strings.Index(s, "§"); i >= 0; {
		if !named.MatchString(s[max(0, i-24):i]) {
			line := strings.Count(s[:i], "\n") + 1
			t.Errorf("README.md:%d: a § that names no document: %q", line, s[max(0, i-30):min(len(s), i+8)])
		}
		next := strings.Index(s[i+len("§"):], "§")
		if next < 0 {
			break
		}
		i += len("§") + next
	}
}
