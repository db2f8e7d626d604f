package health

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// readAll runs readAnswer over raw and returns what is left unread.
func readAll(raw string) (answer, string, error) {
	br := bufio.NewReaderSize(strings.NewReader(raw), lineLimit)
	a, err := readAnswer(br)
	rest, _ := io.ReadAll(br)
	return a, string(rest), err
}

// The expected framing of each answer is RFC 9112's, worked out by hand:
// §4 the status line, §5 the fields, §6.3 the body's length, §7.1 chunks,
// §9.3 persistence; RFC 9110 §15.2 the interim answers. After a reusable
// answer the reader must stand exactly at the next byte, "NEXT".
func TestReadAnswer(t *testing.T) {
	big := strings.Repeat("a", 100_000)
	long := strings.Repeat("v", 5000)
	many := strings.Repeat("X-A: b\r\n", 101)
	interim := strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 9)
	cases := []struct {
		name   string
		raw    string
		status int
		reuse  bool
		rest   string // unread after the answer ("" unless reuse)
		fail   string // "notHTTP", "cut", "eof", or "" for an answer
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT", 200, true, "NEXT", ""},
		{"no reason", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\nNEXT", 200, true, "NEXT", ""},
		{"empty reason", "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\nNEXT", 200, true, "NEXT", ""},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 1\n\nxNEXT", 200, true, "NEXT", ""},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\nxNEXT", 200, true, "NEXT", ""},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\nNEXT", 204, true, "NEXT", ""},
		{"not modified has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\nNEXT", 304, true, "NEXT", ""},
		{"status 500", "HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\noopsNEXT", 500, true, "NEXT", ""},
		{"redirect", "HTTP/1.1 302 Found\r\nLocation: /login\r\nContent-Length: 0\r\n\r\nNEXT", 302, true, "NEXT", ""},
		{"1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT", 200, false, "NEXT", ""},
		{"1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nokNEXT", 200, true, "NEXT", ""},
		{"close", "HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 2\r\n\r\nokNEXT", 200, false, "NEXT", ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3 ;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: v\r\n\r\nNEXT", 200, true, "NEXT", ""},
		{"chunked last of a list", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\nNEXT", 200, true, "NEXT", ""},
		{"chunked and length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\nNEXT", 200, false, "NEXT", ""},
		{"chunked in 1.0", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nNEXT", 200, false, "NEXT", ""},
		{"to the close", "HTTP/1.1 200 OK\r\n\r\nall of it", 200, false, "", ""},
		{"not chunked last", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nall of it", 200, false, "", ""},
		{"interim", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nNEXT", 200, true, "NEXT", ""},
		{"switching", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nNEXT", 101, false, "NEXT", ""},
		{"long ignored header", "HTTP/1.1 200 OK\r\nX-Long: " + long + "\r\nContent-Length: 0\r\n\r\nNEXT", 200, true, "NEXT", ""},
		{"long body stops at the limit", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, 200, false, big[bodyLimit:], ""},
		{"long chunk stops", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n186a0\r\n" + big + "\r\n0\r\n\r\n", 200, false, big + "\r\n0\r\n\r\n", ""},

		{"empty", "", 0, false, "", "eof"},
		{"garbage", "hello, world\r\n", 0, false, "", "notHTTP"},
		{"binary", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n", 0, false, "", "notHTTP"},
		{"HTTP/2", "HTTP/2.0 200 OK\r\n\r\n", 0, false, "", "notHTTP"},
		{"two digits", "HTTP/1.1 20 OK\r\n\r\n", 0, false, "", "notHTTP"},
		{"status 600", "HTTP/1.1 600 No\r\n\r\n", 0, false, "", "notHTTP"},
		{"status 099", "HTTP/1.1 099 No\r\n\r\n", 0, false, "", "notHTTP"},
		{"no space after the code", "HTTP/1.1 200OK\r\n\r\n", 0, false, "", "notHTTP"},
		{"control in the reason", "HTTP/1.1 200 O\x00K\r\n\r\n", 0, false, "", "notHTTP"},
		{"bare CR", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", 0, false, "", "notHTTP"},
		{"space in a name", "HTTP/1.1 200 OK\r\nX A: b\r\n\r\n", 0, false, "", "notHTTP"},
		{"space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", 0, false, "", "notHTTP"},
		{"folded", "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n", 0, false, "", "notHTTP"},
		{"no colon", "HTTP/1.1 200 OK\r\nhello\r\n\r\n", 0, false, "", "notHTTP"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0, false, "", "notHTTP"},
		{"length list", "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx", 0, false, "", "notHTTP"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 0, false, "", "notHTTP"},
		{"length of 19 digits", "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000000\r\n\r\n", 0, false, "", "notHTTP"},
		{"long framing header", "HTTP/1.1 200 OK\r\nContent-Length: " + strings.Repeat("0", 5000) + "\r\n\r\n", 0, false, "", "notHTTP"},
		{"101 header lines", "HTTP/1.1 200 OK\r\n" + many + "\r\n", 0, false, "", "notHTTP"},
		{"nine interim answers", interim + "HTTP/1.1 200 OK\r\n\r\n", 0, false, "", "notHTTP"},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, false, "", "notHTTP"},
		{"16 hex digits", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000001\r\nx\r\n0\r\n\r\n", 0, false, "", "notHTTP"},
		{"chunk without its end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokx\r\n0\r\n\r\n", 0, false, "", "notHTTP"},
		{"chunk line with a bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n", 0, false, "", "notHTTP"},
		{"chunk data with a bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\n0\r\n\r\n", 0, false, "", "notHTTP"},
		{"trailers end with a bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\n", 0, false, "", "notHTTP"},
		{"bad trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n", 0, false, "", "notHTTP"},
		{"cut in the status line", "HTTP/1.1 200", 0, false, "", "cut"},
		{"cut in the head", "HTTP/1.1 200 OK\r\nContent-Le", 0, false, "", "cut"},
		{"cut after interim", "HTTP/1.1 100 Continue\r\n\r\n", 0, false, "", "cut"},
		{"cut in the body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, false, "", "cut"},
		{"cut in a chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 0, false, "", "cut"},
		{"cut before the trailers end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", 0, false, "", "cut"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, rest, err := readAll(tc.raw)
			var bad *notHTTP
			switch tc.fail {
			case "":
				if err != nil {
					t.Fatalf("err %v, want an answer", err)
				}
				if a.status != tc.status || a.reuse != tc.reuse {
					t.Fatalf("got status %d reuse %v, want %d %v", a.status, a.reuse, tc.status, tc.reuse)
				}
				if rest != tc.rest {
					t.Fatalf("left %d bytes %.20q, want %d %.20q", len(rest), rest, len(tc.rest), tc.rest)
				}
			case "notHTTP":
				if !errors.As(err, &bad) {
					t.Fatalf("err %v, want not HTTP", err)
				}
			case "cut":
				if err != cutShort {
					t.Fatalf("err %v, want cut short", err)
				}
			case "eof":
				if err != io.EOF {
					t.Fatalf("err %v, want EOF", err)
				}
			}
		})
	}
}

// What LastError shows of bytes from an edge is bounded and printable.
func TestQuote(t *testing.T) {
	if got, want := quote([]byte("a\"\x00\xff")), `"a\x22\x00\xff"`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if got, want := quote([]byte(strings.Repeat("x", 50))), `"`+strings.Repeat("x", 40)+`"...`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
