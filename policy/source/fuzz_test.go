package source

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// FuzzCompile: no operator's file makes Compile panic (the file is outside
// bytes), and a policy it accepts is one §3.3 accepts: it signs, and reads
// back (policy.Parse) to the same bytes. Seeds: the documented example, with
// its room and its hop key files, and mistakes of each kind.
func FuzzCompile(f *testing.F) {
	dir := f.TempDir()
	for i, hop := range []string{"hop-a1", "hop-b1", "hop-eu1"} {
		k := sig.NewPrivateKey([32]byte{byte(11 + i)})
		if err := os.WriteFile(filepath.Join(dir, hop+".key"), sig.MarshalPrivateKey(k), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "cmd", "waisteer", "testdata", "policy", "example.toml"))
	if err != nil {
		f.Fatal(err)
	}
	// Without its comments: the fuzzer minimises every input it finds
	// interesting, and a seed of kilobytes of comments makes that take the
	// run.
	var lines []string
	for l := range strings.SplitSeq(strings.Replace(string(example), "# room = ", "room = ", 1), "\n") {
		if l, _, _ = strings.Cut(l, "#"); strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, " "))
		}
	}
	withRoom := strings.Join(lines, "\n") + "\n"
	for _, s := range []string{withRoom, strings.Replace(withRoom, "room = ", "", 1),
		strings.Replace(withRoom, `window = "60s"`, `window = "61s"`, 1),
		strings.Replace(withRoom, `ttl = "30s"`, `ttl = "30.5s"`, 1),
		strings.Replace(withRoom, `id = "cdn-b"`, "id = \"cdn-b\"\nclone_of = \"cdn-a.eu\"", 1),
		strings.Replace(withRoom, `top_tier = 1`, "top_tier = 1\nparams = { token = \"a%2Fb\" }", 1),
		"room = 1\n", "[[pathway]]\nhops = [{}]\n", "period = \"1h\"\nwindow = \"1h\"\n"} {
		f.Add([]byte(s))
	}
	name := filepath.Join(dir, "policy.toml")
	key := sig.NewPrivateKey([32]byte{7})
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, _, err := Compile(name, doc, Options{})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error that says nothing")
			}
			return
		}
		b, err := policy.Sign(p, key)
		if err != nil {
			t.Fatalf("Compile accepted a policy Sign refuses: %v", err)
		}
		q, err := policy.Parse(b)
		if err != nil {
			t.Fatalf("Compile accepted a policy that does not read back: %v", err)
		}
		if again, err := policy.Sign(q, key); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("the policy read back signs to other bytes: %v", err)
		}
	})
}
