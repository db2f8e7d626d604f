package main

import (
	"bytes"
	"strings"
	"testing"
)

// waisteer runs the real command line in-process with the given standard
// input and returns what it printed and its exit code.
func waisteer(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(&env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb}, args)
	return out.String(), errb.String(), code
}

func TestHelpListsCommands(t *testing.T) {
	out, _, code := waisteer(t, "", "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for name := range commands {
		if !strings.Contains(out, name) {
			t.Errorf("help does not list %q", name)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	_, errs, code := waisteer(t, "", "frobnicate")
	if code != 2 || !strings.Contains(errs, "unknown command") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
