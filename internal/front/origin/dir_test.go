package origin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeFile(name, s string) error { return os.WriteFile(name, []byte(s), 0o644) }

// tree writes files (name → content) under a new directory, with every
// file's time set to mtime, and returns the directory.
func tree(t *testing.T, mtime time.Time, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, s := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(p, s); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// etagOf is the package doc's ETag, computed here from its words: the
// first 16 bytes of the SHA-256 of the file, hexadecimal, quoted.
func etagOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

const mpd = `<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011"></MPD>` + "\n"

// A file is served with its type by extension (RFC 8216 §4; ISO/IEC
// 23009-1 Annex C), its ETag, and a Last-Modified rounded up to the
// second (the package doc's rule): 03:04:05.5 is written 03:04:06, and a
// whole second as it is.
func TestDirFetch(t *testing.T) {
	half := time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)
	dir := tree(t, half, map[string]string{
		"hls/live.m3u8": playlist,
		"dash/live.mpd": mpd,
		"hls/master":    playlist,
		"whole.m3u8":    playlist,
	})
	whole := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "whole.m3u8"), whole, whole); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{dir, "file://" + dir} {
		o := newOrigin(t, base, Options{})
		for _, c := range []struct{ path, body, ctype, lm string }{
			{"/hls/live.m3u8", playlist, "application/vnd.apple.mpegurl", "Fri, 02 Jan 2026 03:04:06 GMT"},
			{"/dash/live.mpd", mpd, "application/dash+xml", "Fri, 02 Jan 2026 03:04:06 GMT"},
			{"/hls/master", playlist, "", "Fri, 02 Jan 2026 03:04:06 GMT"},
			{"/whole.m3u8", playlist, "application/vnd.apple.mpegurl", "Fri, 02 Jan 2026 03:04:05 GMT"},
		} {
			resp, err := o.Fetch(t.Context(), &Request{Path: c.path, RawQuery: "ignored=1", Header: http.Header{"Cookie": {"x"}}})
			if err != nil {
				t.Fatalf("%s: %v", c.path, err)
			}
			if resp.Status != 200 || string(resp.Body) != c.body || resp.ContentType != c.ctype {
				t.Errorf("%s: %d %q %q", c.path, resp.Status, resp.ContentType, resp.Body)
			}
			want := http.Header{"Etag": {etagOf(c.body)}, "Last-Modified": {c.lm}}
			if len(resp.Header) != 2 || resp.Header.Get("Etag") != want.Get("Etag") || resp.Header.Get("Last-Modified") != c.lm {
				t.Errorf("%s: header %v, want %v", c.path, resp.Header, want)
			}
		}
	}
}

// The directory's answers to conditional GETs, from RFC 9110 §13: If-None-
// Match by the weak comparison (§13.1.2: W/"x" matches "x"), "*" matching
// any file, a list matching when any member does, empty list elements
// allowed (§5.6.1.2); If-Modified-Since ignored whenever If-None-Match is
// present (§13.1.3), ignored when not a date, and true (a 200) when the
// file changed after the date. A field that does not read matches nothing.
func TestDirConditional(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)
	dir := tree(t, mtime, map[string]string{"live.m3u8": playlist})
	o := newOrigin(t, dir, Options{})
	tag := etagOf(playlist)
	opaque := tag[1 : len(tag)-1]
	const (
		lm     = "Fri, 02 Jan 2026 03:04:06 GMT" // ceil(mtime)
		before = "Fri, 02 Jan 2026 03:04:05 GMT" // mtime is after it: modified since
		later  = "Sat, 03 Jan 2026 00:00:00 GMT"
	)
	for _, c := range []struct {
		inm, ims string
		status   int
	}{
		{tag, "", 304},
		{"W/" + tag, "", 304},
		{`"x", ` + tag, "", 304},
		{`,, "x" ,` + tag + ` ,`, "", 304},
		{`"x",` + tag, "", 304},
		{"\t" + tag + "\t", "", 304},
		{"*", "", 304},
		{" * ", "", 304},
		{`"x"`, "", 200},
		{`W/"x"`, "", 200},
		{`"` + opaque[:31] + `"`, "", 200},
		{opaque, "", 200},                      // not quoted: does not read
		{tag + ` "x"`, "", 200},                // no comma: does not read
		{`"x", *`, "", 200},                    // "*" alone or not at all
		{"w/" + tag, "", 200},                  // W is upper case
		{tag + `, "a` + "\x01" + `"`, "", 200}, // a control byte in a tag
		{`"x`, "", 200},
		{`"x"`, lm, 200}, // If-None-Match present: If-Modified-Since ignored
		{tag, before, 304},
		{"", lm, 304},
		{"", later, 304},
		{"", "Friday, 02-Jan-26 03:04:06 GMT", 304}, // RFC 850 form (§5.6.7)
		{"", "Fri Jan  2 03:04:06 2026", 304},       // asctime form
		{"", before, 200},
		{"", "Fri, 02 Jan 2026 03:04:06", 200}, // no GMT: not a date
		{"", "yesterday", 200},
		{"", "", 200},
	} {
		resp, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8", IfNoneMatch: c.inm, IfModifiedSince: c.ims})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != c.status {
			t.Errorf("If-None-Match %q, If-Modified-Since %q: %d, want %d", c.inm, c.ims, resp.Status, c.status)
		}
		// §15.4.5: a 304 carries the ETag and Last-Modified a 200 would.
		if resp.Header.Get("Etag") != tag || resp.Header.Get("Last-Modified") != lm {
			t.Errorf("header %v", resp.Header)
		}
		if (resp.Status == 304) != (len(resp.Body) == 0) {
			t.Errorf("status %d with %d bytes", resp.Status, len(resp.Body))
		}
	}
}

// A file changed within the last second has no Last-Modified yet (a
// write in the same second would share it), and a date of now does not
// make it 304; a date later than now is ignored (no copy of ours carries
// one). Once its second is past, it has one.
func TestDirRecent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "live.m3u8")
	if err := writeFile(p, playlist); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	o := newOrigin(t, dir, Options{})
	resp, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8",
		IfModifiedSince: st.ModTime().UTC().Format(http.TimeFormat)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 {
		t.Errorf("a file written this second was %d to a date of this second", resp.Status)
	}
	if time.Since(st.ModTime()) < 900*time.Millisecond && resp.Header.Get("Last-Modified") != "" {
		t.Errorf("a file written this second has Last-Modified %q", resp.Header.Get("Last-Modified"))
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	resp, err = o.Fetch(t.Context(), &Request{Path: "/live.m3u8", IfModifiedSince: future})
	if err != nil || resp.Status != 200 {
		t.Fatalf("a date an hour ahead: %v %v", err, resp)
	}

	old := time.Now().Add(-time.Minute)
	os.Chtimes(p, old, old)
	resp, err = o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	if err != nil || resp.Header.Get("Last-Modified") == "" {
		t.Fatalf("a file a minute old has no Last-Modified: %v %v", err, resp)
	}
	resp, err = o.Fetch(t.Context(), &Request{Path: "/live.m3u8", IfModifiedSince: resp.Header.Get("Last-Modified")})
	if err != nil || resp.Status != 304 {
		t.Fatalf("its own Last-Modified: %v %v", err, resp)
	}
}

// What the directory does not have is 404; a path that could escape it
// is refused before any file is opened; nothing outside it is ever read,
// through a symbolic link either (the package doc: a link is followed
// only when relative and within the directory).
func TestDirEscapes(t *testing.T) {
	base := t.TempDir()
	const secret = "#EXTM3U\n# the secret outside\n"
	if err := writeFile(filepath.Join(base, "secret.m3u8"), secret); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "hls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(root, "hls", "live.m3u8"), playlist); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{
		"in":      "hls/live.m3u8",
		"hls/up":  "../hls/live.m3u8",
		"out":     "../secret.m3u8",
		"outdir":  "..",
		"abs":     filepath.Join(root, "hls", "live.m3u8"),
		"absout":  filepath.Join(base, "secret.m3u8"),
		"loop":    "loop",
		"hls/far": "../../root/../secret.m3u8",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	o := newOrigin(t, root, Options{})
	for _, c := range []struct {
		path, code, words string
	}{
		{"/hls/live.m3u8", "", ""},
		{"/in", "", ""},
		{"/hls/up", "", ""},
		{"/../secret.m3u8", CodeBadPath, "dot segment"},
		{"/hls/../../secret.m3u8", CodeBadPath, "dot segment"},
		{"/%2e%2e/secret.m3u8", CodeNotFound, "no such file"},
		{"/..%2fsecret.m3u8", CodeNotFound, "no such file"},
		{"/out", CodeNotFound, "leads out"},
		{"/outdir/secret.m3u8", CodeNotFound, "leads out"},
		{"/absout", CodeNotFound, "leads out"},
		{"/abs", CodeNotFound, "leads out"},
		{"/hls/far", CodeNotFound, "leads out"},
		{"/loop", CodeNotFound, "loop"},
		{"/hls", CodeNotFound, "directory"},
		{"/hls/live.m3u8/x", CodeNotFound, "no such file"},
		{"/missing.m3u8", CodeNotFound, "no such file"},
	} {
		resp, err := o.Fetch(t.Context(), &Request{Path: c.path})
		if c.code == "" {
			if err != nil || string(resp.Body) != playlist {
				t.Errorf("%s: %v", c.path, err)
			}
			continue
		}
		if resp != nil && strings.Contains(string(resp.Body), "secret") {
			t.Fatalf("%s read the file outside", c.path)
		}
		status := 404
		if c.code == CodeBadPath {
			status = 400
		}
		wantError(t, err, status, c.code, c.words)
	}
}

// A file over MaxBytes is refused, never cut to fit; one of exactly
// MaxBytes is served. An empty file is never a playlist.
func TestDirTooLargeEmpty(t *testing.T) {
	const max = 100
	exact := strings.Repeat("#", max)
	dir := tree(t, time.Now().Add(-time.Minute), map[string]string{
		"exact.m3u8": exact, "over.m3u8": exact + "#", "empty.m3u8": "",
	})
	o := newOrigin(t, dir, Options{MaxBytes: max})
	if resp, err := o.Fetch(t.Context(), &Request{Path: "/exact.m3u8"}); err != nil || string(resp.Body) != exact {
		t.Fatalf("exact: %v", err)
	}
	_, err := o.Fetch(t.Context(), &Request{Path: "/over.m3u8"})
	wantError(t, err, 502, CodeTooLarge, "101 bytes", "100")
	_, err = o.Fetch(t.Context(), &Request{Path: "/empty.m3u8"})
	wantError(t, err, 502, CodeEmpty)
}

// A FIFO in the directory is refused at once, not waited on for a writer
// that never comes.
func TestDirFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "live.m3u8"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := newOrigin(t, dir, Options{Timeout: time.Second})
	done := make(chan error, 1)
	go func() {
		_, err := o.Fetch(context.Background(), &Request{Path: "/live.m3u8"})
		done <- err
	}()
	select {
	case err := <-done:
		wantError(t, err, 502, CodeUnreadable, "not a regular file")
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO was waited on")
	}
}

// The directory is opened at each fetch: one replaced in place is read at
// once, and one removed is a 502 naming why.
func TestDirReplacedAndGone(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "hls")
	next := filepath.Join(base, "next")
	for d, s := range map[string]string{root: "#EXTM3U\n# one\n", next: "#EXTM3U\n# two\n"} {
		os.Mkdir(d, 0o755)
		if err := writeFile(filepath.Join(d, "live.m3u8"), s); err != nil {
			t.Fatal(err)
		}
	}
	o := newOrigin(t, root, Options{})
	resp, err := o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	if err != nil || string(resp.Body) != "#EXTM3U\n# one\n" {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	_, err = o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeUnreachable, "directory cannot be opened")
	if err := os.Rename(next, root); err != nil {
		t.Fatal(err)
	}
	resp, err = o.Fetch(t.Context(), &Request{Path: "/live.m3u8"})
	if err != nil || string(resp.Body) != "#EXTM3U\n# two\n" {
		t.Fatalf("the directory put back: %v", err)
	}
}

// A fetch whose context has ended reads nothing.
func TestDirContext(t *testing.T) {
	dir := tree(t, time.Now(), map[string]string{"live.m3u8": playlist})
	o := newOrigin(t, dir, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := o.Fetch(ctx, &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeCanceled)
	ctx, cancel = context.WithTimeout(t.Context(), -time.Second)
	defer cancel()
	_, err = o.Fetch(ctx, &Request{Path: "/live.m3u8"})
	wantError(t, err, 502, CodeTimeout)
}
