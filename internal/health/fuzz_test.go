package health

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

// FuzzReadAnswer feeds the answer reader arbitrary bytes from an edge. It
// must never panic nor read past its bounds, must read the same bytes the
// same way, and must agree with net/http's reader, written apart from it,
// wherever both take the bytes as an answer: the same status (RFC 9112
// §4), and no reuse of a connection net/http would close (§9.3) or whose
// body net/http could not read to its end (§6.3).
func FuzzReadAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3;x=y\r\nabc\r\n0\r\nX-T: v\r\n\r\n",
		"HTTP/1.1 302 Found\r\nLocation: /login\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\nConnection: close\n\nbody",
		"hello, world\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := &countReader{r: bytes.NewReader(raw)}
		a, err := readAnswer(bufio.NewReaderSize(r, lineLimit))
		// Each head is bounded, each skipped long line within it, and the
		// body with its chunk lines; the reader may buffer a line ahead.
		if most := (interimLimit+1)*(headLimit+2*lineLimit) + bodyLimit + 2*lineLimit; r.n > most {
			t.Fatalf("read %d bytes, more than %d", r.n, most)
		}
		a2, err2 := readAnswer(bufio.NewReaderSize(bytes.NewReader(raw), lineLimit))
		if a != a2 || (err == nil) != (err2 == nil) {
			t.Fatalf("read twice: %+v %v, then %+v %v", a, err, a2, err2)
		}
		if err != nil {
			var bad *notHTTP
			if !errors.As(err, &bad) && err != cutShort && err != io.EOF {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		if a.status < 101 || a.status > 599 || (a.status < 200 && a.status != 101) {
			t.Fatalf("final status %d", a.status)
		}

		// net/http hands back a 1xx answer itself; compare from the
		// final one's head, which our reader has just found.
		var final []byte
		cr := &countReader{r: bytes.NewReader(raw)}
		br := bufio.NewReaderSize(cr, lineLimit)
		for {
			start := cr.n - br.Buffered()
			h, err := readHead(br)
			if err != nil {
				t.Fatalf("the heads do not read again: %v", err)
			}
			if h.status >= 200 || h.status == 101 {
				final = raw[start:]
				break
			}
		}
		resp, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(final)), nil)
		if herr != nil {
			return // net/http is stricter here (header values, say)
		}
		defer resp.Body.Close()
		if resp.StatusCode != a.status {
			t.Fatalf("status %d, net/http %d", a.status, resp.StatusCode)
		}
		if !a.reuse {
			return
		}
		if resp.Close {
			t.Fatalf("reused a connection net/http closes")
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("reused a connection whose body net/http cannot read: %v", err)
		}
	})
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
