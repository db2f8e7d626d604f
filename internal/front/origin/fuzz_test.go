package origin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// codes are every code an *Error may have.
var codes = map[string]bool{
	CodeNotFound: true, CodeBadPath: true, CodeBadQuery: true, CodeStatus: true,
	CodeRedirect: true, CodeUnreachable: true, CodeTimeout: true, CodeTooLarge: true,
	CodeBadAnswer: true, CodeEmpty: true, CodeUnreadable: true, CodeCanceled: true,
}

// wellFormed fails t unless err is an *Error of a known code whose status
// is the one mapping's.
func wellFormed(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !codes[e.Code] || e.Status != statusOf(e.Code) || e.Detail == "" {
		t.Fatalf("an error of no kind: %#v", err)
	}
}

// noneMatchRef is If-None-Match read apart from noneMatchFails, straight
// from RFC 9110's grammar (§13.1.2, §5.6.1.2, §8.8.3), by splitting at the
// double quotes, which no entity tag holds inside: the pieces at odd
// places are the tags' contents, those at even places what lies between,
// which may only be white space and commas (at least one comma between two
// tags), each ending in "W/" before a weak tag.
func noneMatchRef(v, etag string) bool {
	if strings.Trim(v, " \t") == "*" {
		return true
	}
	parts := strings.Split(v, `"`)
	if len(parts)%2 == 0 {
		return false // a tag not closed
	}
	n := (len(parts) - 1) / 2
	match := false
	for k := 0; k <= n; k++ {
		between := parts[2*k]
		if k < n {
			between = strings.TrimSuffix(between, "W/")
		}
		if strings.Trim(between, " \t,") != "" || 0 < k && k < n && !strings.Contains(between, ",") {
			return false
		}
		if k == n {
			break
		}
		content := parts[2*k+1]
		for i := 0; i < len(content); i++ {
			if c := content[i]; c < 0x21 || c == 0x7f {
				return false
			}
		}
		match = match || `"`+content+`"` == etag
	}
	return match
}

// FuzzIfNoneMatch holds the directory's reader of If-None-Match to the
// grammar, read the other way by noneMatchRef.
func FuzzIfNoneMatch(f *testing.F) {
	for _, s := range [][2]string{
		{`"abc"`, "abc"}, {`W/"abc"`, "abc"}, {`"x", "abc"`, "abc"}, {`,,"abc",`, "abc"},
		{`*`, "abc"}, {`"x" "abc"`, "abc"}, {`W/ "abc"`, "abc"}, {`"a,b"`, "a,b"}, {`"ab`, "ab"},
		{"\"\x80\"", "\x80"}, {`""`, ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, v, opaque string) {
		if strings.ContainsAny(opaque, "\"\x7f") || strings.IndexFunc(opaque, func(r rune) bool { return r < 0x21 }) >= 0 {
			return // not a tag the directory could make
		}
		etag := `"` + opaque + `"`
		if got, want := noneMatchFails(v, etag), noneMatchRef(v, etag); got != want {
			t.Fatalf("If-None-Match %q against %s: %v, the grammar says %v", v, etag, got, want)
		}
	})
}

// FuzzFetchDir asks a directory origin for any path: only the three paths
// that name the one file inside (itself, and two relative links within)
// are served, and nothing outside the directory is ever read, whatever
// the links, dots or escapes.
func FuzzFetchDir(f *testing.F) {
	for _, p := range []string{
		"/hls/live.m3u8", "/in", "/hls/up", "/out", "/outdir/secret.m3u8", "/abs",
		"/../secret.m3u8", "/%2e%2e/secret.m3u8", "/hls/../../secret.m3u8", "//secret.m3u8", "/hls/", "",
	} {
		f.Add(p)
	}
	base := f.TempDir()
	const secret = "#EXTM3U\n# the secret outside\n"
	root := filepath.Join(base, "root")
	for _, err := range []error{
		writeFile(filepath.Join(base, "secret.m3u8"), secret),
		os.MkdirAll(filepath.Join(root, "hls"), 0o755),
		writeFile(filepath.Join(root, "hls", "live.m3u8"), playlist),
		os.Symlink("hls/live.m3u8", filepath.Join(root, "in")),
		os.Symlink("../hls/live.m3u8", filepath.Join(root, "hls", "up")),
		os.Symlink("../secret.m3u8", filepath.Join(root, "out")),
		os.Symlink("..", filepath.Join(root, "outdir")),
		os.Symlink(filepath.Join(root, "hls", "live.m3u8"), filepath.Join(root, "abs")),
	} {
		if err != nil {
			f.Fatal(err)
		}
	}
	o, err := New(root, Options{})
	if err != nil {
		f.Fatal(err)
	}
	served := map[string]bool{"/hls/live.m3u8": true, "/in": true, "/hls/up": true}
	f.Fuzz(func(t *testing.T, p string) {
		resp, err := o.Fetch(context.Background(), &Request{Path: p})
		if err != nil {
			wellFormed(t, err)
			if served[p] {
				t.Fatalf("%q: %v", p, err)
			}
			return
		}
		if !served[p] || resp.Status != 200 || string(resp.Body) != playlist {
			t.Fatalf("%q served %d %q", p, resp.Status, resp.Body)
		}
	})
}

// FuzzFetchAnswer has an HTTP origin answer any bytes. The fetch never
// hangs past its timeout, fails only with an *Error of a known code, and
// serves only a whole body within the limit; wherever net/http's reader
// reads the bytes as a 200 or 203 with an identity body it reads to its
// end, the fetch serves that body, byte for byte, or refuses it as empty
// or too large.
func FuzzFetchAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n#EXTM3U\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n#EXTM3U\n\r\n0\r\n\r\n",
		"HTTP/1.0 203 OK\r\n\r\n#EXTM3U\n",
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x01\x00\x00\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n#",
		"HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("#", 100),
		"garbage\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	const max = 64
	f.Fuzz(func(t *testing.T, raw []byte) {
		tr := &http.Transport{
			DialContext: func(context.Context, string, string) (net.Conn, error) {
				client, origin := net.Pipe()
				go func() {
					defer origin.Close()
					if _, err := readHead(bufio.NewReader(origin)); err == nil {
						origin.Write(raw)
					}
				}()
				return client, nil
			},
			DisableCompression: true,
		}
		defer tr.CloseIdleConnections()
		o, err := New("http://origin.example", Options{Timeout: 2 * time.Second, MaxBytes: max, Client: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := o.Fetch(context.Background(), &Request{Path: "/live.m3u8"})
		if d := time.Since(start); d > 4*time.Second {
			t.Fatalf("the fetch took %v", d)
		}
		if err != nil {
			wellFormed(t, err)
		} else if resp.Status != 200 || len(resp.Body) == 0 || len(resp.Body) > max {
			t.Fatalf("served %d with %d bytes", resp.Status, len(resp.Body))
		}

		hr, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if herr != nil || hr.StatusCode != 200 && hr.StatusCode != 203 || hr.Header.Get("Content-Encoding") != "" {
			return
		}
		body, berr := io.ReadAll(hr.Body)
		if berr != nil {
			return
		}
		var e *Error
		switch {
		case err == nil:
			if !bytes.Equal(resp.Body, body) {
				t.Fatalf("served %q, net/http read %q", resp.Body, body)
			}
		case errors.As(err, &e) && (e.Code == CodeEmpty && len(body) == 0 || e.Code == CodeTooLarge && len(body) > max):
		default:
			t.Fatalf("refused %v what net/http reads as a %d of %q", err, hr.StatusCode, body)
		}
	})
}
