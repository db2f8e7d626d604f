//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openTerminal opens a pseudo-terminal and returns its terminal end.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal here: %v", err) // every Linux CI machine has /dev/ptmx
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

// TestRecordSignRefusesATerminal: a record is binary, and record sign
// without -o refuses to write it to a terminal (issue 11), while a file or
// a pipe gets it.
func TestRecordSignRefusesATerminal(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "hop.key")
	if _, errs, code := waisteer(t, "", "keygen", "-o", key); code != 0 {
		t.Fatal(errs)
	}
	desc := filepath.Join("testdata", "record", "example.toml")
	tty := openTerminal(t)
	var errb bytes.Buffer
	code := run(&env{stdin: strings.NewReader(""), stdout: tty, stderr: &errb}, []string{"record", "sign", "-key", key, desc})
	if code != 2 || !strings.Contains(errb.String(), "the record is binary: give -o FILE") {
		t.Errorf("to a terminal: exit %d, %q", code, errb.String())
	}
	f, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	errb.Reset()
	if code := run(&env{stdin: strings.NewReader(""), stdout: f, stderr: &errb}, []string{"record", "sign", "-key", key, desc}); code != 0 {
		t.Errorf("to a file: exit %d, %q", code, errb.String())
	}
	if st, _ := f.Stat(); st.Size() == 0 {
		t.Errorf("nothing written to the file")
	}
}
