// Package shared finds the project's shared/ directory (beside the
// repository's root) for tests that read its public suites.
package shared

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns the path of elem under shared/, failing the test when the
// directory cannot be found: a suite that is missing is a failure, never a
// skip.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	p := filepath.Join(append([]string{filepath.Dir(dir), "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared suite missing: %v", err)
	}
	return p
}
