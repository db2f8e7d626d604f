package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReplaceResults: the report goes into the block under its section,
// the prose around stays; a section without a block gets one under its
// heading; a missing section is appended; an unclosed block is refused.
// The documents are written by hand.
func TestReplaceResults(t *testing.T) {
	block := "```\nnew\n```\n"
	for _, c := range []struct {
		name, doc, section, want string
	}{
		{"replaced", "# R\n\n## The run\n\nprose\n\n```\nold\nold\n```\n\n## The soak\n\n```\nsoak\n```\n", ResultsRun,
			"# R\n\n## The run\n\nprose\n\n```\nnew\n```\n\n## The soak\n\n```\nsoak\n```\n"},
		{"the soak's", "## The run\n\n```\nrun\n```\n\n## The soak\n\n```\nold\n```\n\n## What the goals say\n", ResultsSoak,
			"## The run\n\n```\nrun\n```\n\n## The soak\n\n```\nnew\n```\n\n## What the goals say\n"},
		{"no block in the section", "## The run\n\n## The soak\n\n```\nsoak\n```\n", ResultsRun,
			"## The run\n\n```\nnew\n```\n\n## The soak\n\n```\nsoak\n```\n"},
		{"no section", "# R\n", ResultsSoak, "# R\n\n## The soak\n\n```\nnew\n```\n"},
		{"no file", "", ResultsRun, "## The run\n\n```\nnew\n```\n"},
	} {
		got, err := replaceResults([]byte(c.doc), c.section, block)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %v\n%q\nwant\n%q", c.name, err, got, c.want)
		}
	}
	if _, err := replaceResults([]byte("## The run\n\n```\nold\n"), ResultsRun, block); err == nil {
		t.Errorf("an unclosed block was replaced")
	}
	name := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := writeResults(name, ResultsRun, "waisteer bench -quick", 61*time.Second, []byte("report\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); !strings.Contains(string(b), "## The run\n\n```\n$ waisteer bench -quick    # 1m1s\nreport\n```\n") {
		t.Errorf("%s", b)
	}
}
