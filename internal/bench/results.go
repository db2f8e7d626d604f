package bench

// -results FILE (issue 30: "regenerates cmd/waisteer/testdata/bench/
// RESULTS.md with the machine, commands and figures"): the run's report
// goes into the file's code block under "## The run" (a soak's under "##
// The soak"), in place; the prose around it, which reads the figures, is
// the author's and stays. A file without that section gets it appended.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// Sections of the results file.
const (
	ResultsRun  = "## The run"
	ResultsSoak = "## The soak"
	// ResultsServers is `bench -servers`' (issue 31).
	ResultsServers = "## Servers on PostgreSQL (issue 31)"
)

// writeResults puts report into the code block of section in the file
// name, with the command line and the run's wall time before it.
func writeResults(name, section, command string, took time.Duration, report []byte) error {
	old, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	block := fmt.Sprintf("```\n$ %s    # %s\n%s```\n", command, took.Round(time.Second), bytes.TrimLeft(report, "\n"))
	out, err := replaceResults(old, section, block)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(name, out, 0o644)
}

// replaceResults is doc with the first fenced block after the line
// section replaced by block (which brings its own fences); with section
// and block appended when doc has no such line. A section whose block
// does not close is an error: nothing is written.
func replaceResults(doc []byte, section, block string) ([]byte, error) {
	s := string(doc)
	at := -1
	for i := 0; i < len(s); {
		line, _, _ := strings.Cut(s[i:], "\n")
		if strings.TrimRight(line, " \r") == section {
			at = i + len(line)
			break
		}
		i += len(line) + 1
	}
	if at < 0 {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		if s != "" {
			s += "\n"
		}
		return []byte(s + section + "\n\n" + block), nil
	}
	open := strings.Index(s[at:], "\n```")
	next := strings.Index(s[at:], "\n## ")
	if open < 0 || (next >= 0 && next < open) {
		// The section has no block yet: it goes right under the heading.
		rest := strings.TrimPrefix(s[at:], "\n")
		return []byte(s[:at] + "\n\n" + block + rest), nil
	}
	start := at + open + 1
	closing := strings.Index(s[start+3:], "\n```")
	if closing < 0 {
		return nil, fmt.Errorf("the block under %q does not close", section)
	}
	end := start + 3 + closing + len("\n```")
	if end < len(s) && s[end] == '\n' {
		end++
	}
	return []byte(s[:start] + block + s[end:]), nil
}
