package conformance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/shared"
)

// section returns the text of a markdown file from the heading that starts
// with head to the next heading of that level or above.
func section(t *testing.T, file, head string) string {
	t.Helper()
	b, err := os.ReadFile(shared.Path(t, "wai", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+head)
	if i < 0 {
		t.Fatalf("%s: no heading %q", file, head)
	}
	s = s[i+1:]
	level := strings.Index(head, " ") // the count of #
	for j := 1; j < len(s); j++ {
		if s[j-1] == '\n' && s[j] == '#' {
			k := strings.IndexByte(s[j:], ' ')
			if k > 0 && k <= level {
				return s[:j]
			}
		}
	}
	return s
}

var backquoted = regexp.MustCompile("`([a-z_]+)`")

// places are COMPANION §7's places, which the texts also write in back quotes.
var places = map[string]bool{"room": true, "policy": true, "decision": true, "output": true, "manifest": true}

// codesIn lists the codes written in back quotes in s, in order, once each.
func codesIn(s string) []reason.Code {
	var cs []reason.Code
	for _, m := range backquoted.FindAllStringSubmatch(s, -1) {
		if c := reason.Code(m[1]); !places[m[1]] && !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	return cs
}

// textCodes returns §10's own codes (its table, in order) and the codes it
// reuses: its paragraph's, and "live-rooms §9.1's codes for the room", which
// COMPANION §4.1 lists.
func textCodes(t *testing.T) (own, reused []reason.Code) {
	var prose strings.Builder
	for _, line := range strings.Split(section(t, "energy-aware-steering.md", "## 10."), "\n") {
		if strings.HasPrefix(line, "| `") {
			own = append(own, codesIn(line)[0])
		} else {
			prose.WriteString(line + "\n")
		}
	}
	for _, c := range append(codesIn(prose.String()), codesIn(section(t, "COMPANION.md", "### 4.1"))...) {
		if !slices.Contains(own, c) && !slices.Contains(reused, c) {
			reused = append(reused, c)
		}
	}
	t.Logf("§10: %v; reused: %v", own, reused)
	return own, reused
}

// constCodes lists every constant of type Code declared in internal/reason:
// every code the verifier can return.
func constCodes(t *testing.T) []reason.Code {
	f, err := parser.ParseFile(token.NewFileSet(), "../internal/reason/reason.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cs []reason.Code
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, val := range v.Values {
				s, err := strconv.Unquote(val.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, reason.Code(s))
			}
		}
	}
	return cs
}

func sorted(cs []reason.Code) []reason.Code {
	cs = slices.Clone(cs)
	slices.Sort(cs)
	return cs
}

// TestCodesAreTheTexts: the codes in the code are exactly §10's table (in
// its order) and the codes §10 says a verifier also raises, COMPANION §4.1's
// included; and every Code constant the verifier can return is one of them.
func TestCodesAreTheTexts(t *testing.T) {
	own, reused := textCodes(t)
	if len(own) != 10 {
		t.Fatalf("read %d codes from §10's table: %v", len(own), own)
	}
	if !slices.Equal(reason.Extension, own) {
		t.Errorf("reason.Extension %v, §10's table %v", reason.Extension, own)
	}
	if got, want := sorted(reason.Reused), sorted(reused); !slices.Equal(got, want) {
		t.Errorf("reason.Reused %v, §10 and COMPANION §4.1 %v", got, want)
	}
	all := sorted(append(slices.Clone(own), reused...))
	if got := sorted(constCodes(t)); !slices.Equal(got, all) {
		t.Errorf("the Code constants %v, the texts' codes %v", got, all)
	}
}

// TestEveryCodeRefuses: every code the verifier can return refuses at least
// one vector of the committed corpus (§11: "Refused: each reason of §10,
// and the codes it reuses ..., at least once").
func TestEveryCodeRefuses(t *testing.T) {
	f := committed(t)
	seen := map[string]bool{}
	for _, v := range f.Vectors {
		if v.Outcome == Refuse {
			seen[v.Reason] = true
		}
	}
	for _, c := range constCodes(t) {
		if !seen[string(c)] {
			t.Errorf("no vector is refused %s", c)
		}
	}
}

// placeOf is the kind of a place of COMPANION §7: evidence/<p>/<i> is
// "evidence" and pathway/<p> "pathway".
func placeOf(where string) string {
	kind, _, _ := strings.Cut(where, "/")
	return kind
}

// TestEveryCodeAtEveryPlace: each code §9.1 names in a step is raised at
// that step's place by some vector of the corpus: the step's codes are read
// from §9.1's text, step 1's from COMPANION §4.1.
func TestEveryCodeAtEveryPlace(t *testing.T) {
	s91 := section(t, "energy-aware-steering.md", "### 9.1")
	steps := []struct{ title, place string }{
		{"**The room**", "room"}, {"**The policy**", "policy"}, {"**The decision**", "decision"},
		{"**Each record it names**", "evidence"}, {"**The evidence**", "pathway"},
		{"**The output**", "output"}, {"**The manifest**", "manifest"},
	}
	own, reused := textCodes(t)
	isCode := func(c reason.Code) bool { return slices.Contains(own, c) || slices.Contains(reused, c) }
	var want [][2]string
	for k, st := range steps {
		i := strings.Index(s91, st.title)
		if i < 0 {
			t.Fatalf("§9.1 has no step %s", st.title)
		}
		text := s91[i:]
		if k+1 < len(steps) {
			text = text[:strings.Index(text, steps[k+1].title)]
		}
		if st.place == "room" {
			text += section(t, "COMPANION.md", "### 4.1")
		}
		for _, c := range codesIn(text) {
			if isCode(c) {
				want = append(want, [2]string{string(c), st.place})
			}
		}
	}
	if len(want) < 40 {
		t.Fatalf("read only %d (code, place) pairs from §9.1: %v", len(want), want)
	}
	seen := map[[2]string]bool{}
	for _, v := range committed(t).Vectors {
		if v.Outcome == Refuse {
			seen[[2]string{v.Reason, placeOf(v.Where)}] = true
		}
	}
	for _, p := range want {
		if !seen[p] {
			t.Errorf("no vector is refused %s at %s", p[0], p[1])
		}
	}
	t.Logf("%d (code, place) pairs of §9.1, each refused by a vector", len(want))
}

// TestRefusedWhereIsAPlace: every refusal's where is a place of COMPANION §7,
// written as it writes it.
func TestRefusedWhereIsAPlace(t *testing.T) {
	re := regexp.MustCompile(`^(room|policy|decision|output|manifest|evidence/(0|[1-9][0-9]*)/(0|[1-9][0-9]*)|pathway/(0|[1-9][0-9]*))$`)
	for _, v := range committed(t).Vectors {
		if v.Outcome == Refuse && !re.MatchString(v.Where) {
			t.Errorf("%q: where %q is not a place of COMPANION §7", v.Name, v.Where)
		}
	}
}
