package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Issue 29 (CLI): "a test that every command and flag `help` lists is in
// the README and each one the README lists exists". The README's
// `### Commands` table is read against `waisteer help` and each command's
// `-h`; and every command line the README writes in code (`waisteer …`,
// `go run ./cmd/waisteer …`) names a command that exists, with flags it
// has.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := readmeCommands(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range compareCommands(helpCommands(t), table) {
		t.Error(d)
	}
	for _, d := range readmeCommandLines(string(readme), helpCommands(t)) {
		t.Error(d)
	}
}

// The comparison fails when a flag or a command is added to one side and
// not the other, or taken from one.
func TestCompareCommands(t *testing.T) {
	help := map[string][]string{"help": nil, "serve": {"c", "log"}, "room init": {"key"}}
	same := map[string][]string{"help": nil, "serve": {"c", "log"}, "room init": {"key"}}
	if d := compareCommands(help, same); len(d) != 0 {
		t.Errorf("the same commands differ: %q", d)
	}
	for name, c := range map[string]struct {
		help, readme map[string][]string
		want         string
	}{
		"a flag added to help":     {map[string][]string{"serve": {"c", "log", "pprof"}}, map[string][]string{"serve": {"c", "log"}}, "waisteer serve -pprof is in help and not in the README"},
		"a flag only in README":    {map[string][]string{"serve": {"c"}}, map[string][]string{"serve": {"c", "log"}}, "waisteer serve -log is in the README and is no flag of the command"},
		"a command added":          {map[string][]string{"serve": nil, "room init": nil}, map[string][]string{"serve": nil}, "waisteer room init is in help and not in the README"},
		"a command only in README": {map[string][]string{"serve": nil}, map[string][]string{"serve": nil, "room drop": nil}, "waisteer room drop is in the README and is no command"},
	} {
		if d := compareCommands(c.help, c.readme); !slices.Contains(d, c.want) {
			t.Errorf("%s: %q, want %q", name, d, c.want)
		}
	}
	// A command line in the README's code with a flag the command has not.
	cmds := map[string][]string{"serve": {"c", "log"}, "verify": {"url"}}
	if d := readmeCommandLines("```sh\nwaisteer serve -config x.toml\n```\nand `go run ./cmd/waisteer verify -url U`\n", cmds); len(d) != 1 || !strings.Contains(d[0], "-config") {
		t.Errorf("a wrong flag in a code line: %q", d)
	}
	if d := readmeCommandLines("`waisteer frobnicate -x`\n", cmds); len(d) != 1 || !strings.Contains(d[0], "frobnicate") {
		t.Errorf("an unknown command in a code line: %q", d)
	}
}

// helpCommands is what the CLI lists: `waisteer help`'s commands, each
// with the flags its -h prints ("  -name ...").
func helpCommands(t *testing.T) map[string][]string {
	t.Helper()
	out, _, code := waisteer(t, "", "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	cmds := map[string][]string{"help": nil}
	line := regexp.MustCompile(`^  ([a-z]+)(?: ([a-z]+))?\s`)
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	for l := range strings.SplitSeq(out, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		// A command of two words ("room init") prints its usage under
		// both; of one, the second word is its summary's.
		name := m[1]
		if m[2] != "" {
			if _, errs, _ := waisteer(t, "", m[1], m[2], "-h"); strings.HasPrefix(errs, "usage: waisteer "+m[1]+" "+m[2]) {
				name += " " + m[2]
			}
		}
		_, errs, code := waisteer(t, "", append(strings.Fields(name), "-h")...)
		if code != 0 {
			t.Fatalf("%s -h exited %d: %s", name, code, errs)
		}
		var flags []string
		for _, f := range flagLine.FindAllStringSubmatch(errs, -1) {
			flags = append(flags, f[1])
		}
		cmds[name] = flags
	}
	if len(cmds) < 10 {
		t.Fatalf("help lists %d commands:\n%s", len(cmds), out)
	}
	return cmds
}

// readmeCommands reads the README's `### Commands` table: each row's
// command (the words after `waisteer` up to its arguments) and the flags
// its second cell names, each at the start of a code span.
func readmeCommands(readme string) (map[string][]string, error) {
	_, section, ok := strings.Cut(readme, "\n### Commands\n")
	if !ok {
		return nil, errNoSection
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	cmds := map[string][]string{}
	flag := regexp.MustCompile("`-([a-z][a-z0-9-]*)")
	for l := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(l, "| `waisteer ") {
			continue
		}
		cells := splitRow(l)
		if len(cells) < 2 {
			continue
		}
		name := commandWords(strings.TrimPrefix(strings.Trim(cells[0], " `"), "waisteer "))
		var flags []string
		for _, m := range flag.FindAllStringSubmatch(cells[1], -1) {
			if !slices.Contains(flags, m[1]) {
				flags = append(flags, m[1])
			}
		}
		cmds[name] = flags
	}
	return cmds, nil
}

type readmeError string

func (e readmeError) Error() string { return string(e) }

const errNoSection = readmeError("the README has no ### Commands section")

// splitRow cuts a Markdown table row at its unescaped pipes.
func splitRow(l string) []string {
	var cells []string
	var cur strings.Builder
	for i := 1; i < len(l); i++ {
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			cur.WriteByte('|')
			i++
		case l[i] == '|':
			cells = append(cells, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(l[i])
		}
	}
	return cells
}

// commandWords is the command's name at the start of s: its lowercase
// words, up to its first flag or argument.
func commandWords(s string) string {
	var words []string
	for _, w := range strings.Fields(s) {
		if w == "" || strings.ToLower(w) != w || strings.ContainsAny(w, "-[.<>/") || len(words) == 2 {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// compareCommands says each command and flag on one side and not the
// other.
func compareCommands(help, readme map[string][]string) []string {
	var d []string
	for _, name := range sortedKeys(help) {
		rf, ok := readme[name]
		if !ok {
			d = append(d, "waisteer "+name+" is in help and not in the README")
			continue
		}
		for _, f := range help[name] {
			if !slices.Contains(rf, f) {
				d = append(d, "waisteer "+name+" -"+f+" is in help and not in the README")
			}
		}
		for _, f := range rf {
			if !slices.Contains(help[name], f) {
				d = append(d, "waisteer "+name+" -"+f+" is in the README and is no flag of the command")
			}
		}
	}
	for _, name := range sortedKeys(readme) {
		if _, ok := help[name]; !ok {
			d = append(d, "waisteer "+name+" is in the README and is no command")
		}
	}
	return d
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// readmeCommandLines checks each command line the README writes in code (a
// code block's line or a code span) that runs waisteer: its command exists
// and each flag it gives is one of the command's.
func readmeCommandLines(readme string, cmds map[string][]string) []string {
	var code []string
	inBlock := false
	for l := range strings.SplitSeq(readme, "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			code = append(code, l)
			continue
		}
		parts := strings.Split(l, "`")
		for i := 1; i < len(parts); i += 2 {
			code = append(code, parts[i])
		}
	}
	run := regexp.MustCompile(`(?:^|[\s(;&|])(?:go run \./cmd/waisteer|waisteer) ([a-z][a-z ]*[a-z]|[a-z])((?:\s+\S+)*)`)
	flag := regexp.MustCompile(`^-([a-z][a-z0-9-]*)`)
	var d []string
	for _, l := range code {
		l, _, _ = strings.Cut(l, " #") // a shell comment
		for _, m := range run.FindAllStringSubmatch(l, -1) {
			words := strings.Fields(m[1])
			name := ""
			if len(words) >= 2 && cmds[words[0]+" "+words[1]] != nil || len(words) >= 2 && hasKey(cmds, words[0]+" "+words[1]) {
				name = words[0] + " " + words[1]
			} else if hasKey(cmds, words[0]) {
				name = words[0]
			} else if isGroup(cmds, words[0]) && len(words) == 1 {
				continue // `waisteer policy` lists the group's commands
			} else {
				if words[0] == "is" || words[0] == "a" || words[0] == "and" {
					continue // prose in a code span
				}
				d = append(d, "the README runs `waisteer "+words[0]+"`, which is no command: "+strings.TrimSpace(l))
				continue
			}
			rest := strings.Fields(strings.TrimPrefix(m[1]+m[2], name))
			for _, w := range rest {
				if w == "&&" || w == "|" || w == ";" || w == ">" || w == "2>&1" {
					break
				}
				f := flag.FindStringSubmatch(strings.SplitN(w, "=", 2)[0])
				if f != nil && !slices.Contains(cmds[name], f[1]) {
					d = append(d, "the README gives waisteer "+name+" -"+f[1]+", which is no flag of it: "+strings.TrimSpace(l))
				}
			}
		}
	}
	return d
}

// isGroup reports whether g is the first word of commands of two.
func isGroup(m map[string][]string, g string) bool {
	for k := range m {
		if strings.HasPrefix(k, g+" ") {
			return true
		}
	}
	return false
}

func hasKey(m map[string][]string, k string) bool {
	_, ok := m[k]
	return ok
}
