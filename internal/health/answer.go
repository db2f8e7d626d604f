package health

// The checker's reader of an HTTP/1.1 answer (RFC 9112): bytes from an
// edge, so every length is bounded and anything that is not a well-formed
// answer is refused rather than repaired.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

const (
	// lineLimit is the reader's buffer: the longest status line, chunk line
	// or header line the checker reads (a longer header it does not read is
	// skipped).
	lineLimit = 4 << 10
	// headLimit bounds one answer's header section, and headLines its lines.
	headLimit = 64 << 10
	headLines = 100
	// bodyLimit bounds the body read (chunk lines included); the rest is
	// left unread and the connection dropped.
	bodyLimit = 64 << 10
	// interimLimit bounds the 1xx answers skipped before the final one.
	interimLimit = 8
)

// answer is what a check keeps of an edge's final answer.
type answer struct {
	status int
	// reuse says the connection may carry the next check: the answer was
	// framed, read to its end, and neither side asked to close.
	reuse bool
}

// notHTTP is an answer that does not read as HTTP/1.x.
type notHTTP struct{ what string }

func (e *notHTTP) Error() string { return "not an HTTP answer: " + e.what }

// cutShort is an answer that ended before its framing said it would.
var cutShort = errors.New("answer cut short")

// readAnswer reads the answer to one GET from br: 1xx answers but 101 are
// skipped (RFC 9110 §15.2), and the final one's body is read, at most
// bodyLimit of it, and discarded. Network errors come back as they are
// (io.EOF only when nothing was read), so that the caller can tell a
// timeout or a reset from garbage.
func readAnswer(br *bufio.Reader) (answer, error) {
	for i := range interimLimit + 1 {
		h, err := readHead(br)
		if err != nil {
			if i > 0 || err == io.ErrUnexpectedEOF {
				err = unexpected(err)
			}
			return answer{}, err
		}
		if h.status >= 200 || h.status == 101 {
			return readBody(br, h)
		}
		// An interim answer has no body; the final one follows.
	}
	return answer{}, &notHTTP{"too many 1xx answers"}
}

// head is an answer's status line and the header fields that frame it.
type head struct {
	status  int
	minor   int // HTTP/1.minor
	length  int64
	hasLen  bool
	te      bool // Transfer-Encoding present
	chunked bool // and its final coding is chunked
	close   bool // Connection: close
	keep    bool // Connection: keep-alive (HTTP/1.0)
}

func readHead(br *bufio.Reader) (head, error) {
	var h head
	line, err := readLine(br)
	if err != nil {
		if err == errLong {
			return h, &notHTTP{"a status line longer than 4096 bytes"}
		}
		return h, err
	}
	if h.minor, h.status, err = parseStatusLine(line); err != nil {
		return h, err
	}
	size := len(line)
	for n := 0; ; n++ {
		if n == headLines {
			return h, &notHTTP{"more than 100 header lines"}
		}
		line, err := readLine(br)
		if err == errLong {
			// A long line is skipped when it is a field the check does not
			// read; its first buffer must still hold a valid name.
			name, ok := fieldName(line)
			if !ok {
				return h, &notHTTP{"a bad header line " + quote(line)}
			}
			if framing(name) {
				return h, &notHTTP{"a framing header longer than 4096 bytes"}
			}
			size += len(line)
			skipped, err := skipLine(br, headLimit-size)
			if err != nil {
				return h, unexpected(err)
			}
			size += skipped
			continue
		}
		if err != nil {
			return h, unexpected(err)
		}
		if size += len(line); size > headLimit {
			return h, &notHTTP{"a header section over 64 KiB"}
		}
		if len(line) == 0 {
			break
		}
		if err := h.field(line); err != nil {
			return h, err
		}
	}
	if h.te && h.minor == 0 {
		// RFC 9112 §6.1: framing by Transfer-Encoding in HTTP/1.0 is
		// suspect; read it, then drop the connection.
		h.close = true
	}
	return h, nil
}

// parseStatusLine reads "HTTP/1.d SP 3DIGIT [SP reason]" (RFC 9112 §4). The
// reason may be left out, as some servers do and net/http accepts.
func parseStatusLine(line []byte) (minor, status int, err error) {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || !digit(line[7]) || line[8] != ' ' {
		return 0, 0, &notHTTP{"a status line " + quote(line)}
	}
	c := line[9:12]
	if c[0] < '1' || c[0] > '5' || !digit(c[1]) || !digit(c[2]) {
		return 0, 0, &notHTTP{"a status line " + quote(line)}
	}
	if len(line) > 12 && line[12] != ' ' {
		return 0, 0, &notHTTP{"a status line " + quote(line)}
	}
	for _, b := range line[12:] {
		// The reason is ignored but must still be text (RFC 9112 §4).
		if b < 0x20 && b != '\t' || b == 0x7f {
			return 0, 0, &notHTTP{"a status line " + quote(line)}
		}
	}
	status = int(c[0]-'0')*100 + int(c[1]-'0')*10 + int(c[2]-'0')
	return int(line[7] - '0'), status, nil
}

// field reads one header line into h.
func (h *head) field(line []byte) error {
	name, ok := fieldName(line)
	if !ok {
		return &notHTTP{"a bad header line " + quote(line)}
	}
	value := trimOWS(line[len(name)+1:])
	switch {
	case equalFold(name, "content-length"):
		n, ok := parseLength(value)
		if !ok || (h.hasLen && n != h.length) {
			return &notHTTP{"a bad Content-Length " + quote(value)}
		}
		h.length, h.hasLen = n, true
	case equalFold(name, "transfer-encoding"):
		// The field is a list, maybe over several lines: what counts is
		// the last coding of all (RFC 9112 §6.3, item 4).
		h.te = true
		for tok := range bytes.SplitSeq(value, []byte(",")) {
			if tok = trimOWS(tok); len(tok) > 0 {
				if i := bytes.IndexByte(tok, ';'); i >= 0 {
					tok = trimOWS(tok[:i])
				}
				h.chunked = equalFold(tok, "chunked")
			}
		}
	case equalFold(name, "connection"):
		for tok := range bytes.SplitSeq(value, []byte(",")) {
			tok = trimOWS(tok)
			h.close = h.close || equalFold(tok, "close")
			h.keep = h.keep || equalFold(tok, "keep-alive")
		}
	}
	return nil
}

// readBody reads and discards the body of the final answer h heads (RFC
// 9112 §6.3) and says whether the connection may be used again.
func readBody(br *bufio.Reader, h head) (answer, error) {
	a := answer{status: h.status}
	reuse := !h.close && (h.minor >= 1 || h.keep)
	switch {
	case h.status == 101:
		// The server switched protocols: nothing more here is HTTP.
		return a, nil
	case h.status == 204 || h.status == 304:
		a.reuse = reuse
		return a, nil
	case h.te && h.chunked:
		whole, err := readChunked(br)
		if err != nil {
			return a, err
		}
		// With both framings a server's intent is unclear (RFC 9112
		// §6.3, item 3): the connection is not used again.
		a.reuse = reuse && whole && !h.hasLen
		return a, nil
	case h.te:
		// Not chunked last: the body runs to the close.
		return a, discardToClose(br)
	case h.hasLen:
		n := min(h.length, bodyLimit)
		if _, err := br.Discard(int(n)); err != nil {
			return a, unexpected(err)
		}
		a.reuse = reuse && n == h.length
		return a, nil
	default:
		return a, discardToClose(br)
	}
}

// readChunked reads a chunked body and its trailers; whole is false when
// it stopped at bodyLimit.
func readChunked(br *bufio.Reader) (whole bool, err error) {
	read := 0
	for {
		line, err := readChunkLine(br)
		if err != nil {
			if err == errLong {
				return false, &notHTTP{"a chunk line longer than 4096 bytes"}
			}
			return false, unexpected(err)
		}
		size, ok := parseChunkSize(line)
		if !ok {
			return false, &notHTTP{"a chunk size " + quote(line)}
		}
		if size == 0 {
			break
		}
		if read += len(line); int64(read)+size > bodyLimit {
			return false, nil
		}
		if _, err := br.Discard(int(size)); err != nil {
			return false, unexpected(err)
		}
		read += int(size)
		if end, err := readChunkLine(br); err != nil || len(end) != 0 {
			if err == nil || err == errLong {
				return false, &notHTTP{"a chunk without its line end"}
			}
			return false, unexpected(err)
		}
	}
	// The trailer section: header lines, read and ignored, to an empty one.
	for n := 0; ; n++ {
		line, err := readChunkLine(br)
		if err != nil {
			if err == errLong {
				return false, &notHTTP{"a trailer line longer than 4096 bytes"}
			}
			return false, unexpected(err)
		}
		if len(line) == 0 {
			return true, nil
		}
		if _, ok := fieldName(line); !ok || n == headLines {
			return false, &notHTTP{"a bad trailer line " + quote(line)}
		}
	}
}

// parseChunkSize reads "1*HEXDIG [BWS ; ext]" (RFC 9112 §7.1); extensions
// are ignored. At most 15 digits, so that the size fits an int64.
func parseChunkSize(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line) && i < 16; i++ {
		d := unhex(line[i])
		if d < 0 {
			break
		}
		n = n<<4 | int64(d)
	}
	if i == 0 || i == 16 {
		return 0, false
	}
	rest := line[i:]
	if len(rest) == 0 {
		return n, true
	}
	rest = bytes.TrimLeft(rest, " \t")
	return n, len(rest) > 0 && rest[0] == ';'
}

// discardToClose reads a body that ends with the connection, up to
// bodyLimit; the connection is never used again.
func discardToClose(br *bufio.Reader) error {
	_, err := br.Discard(bodyLimit)
	if err == io.EOF {
		return nil
	}
	return err
}

// errLong is a line longer than the reader's buffer.
var errLong = errors.New("line too long")

// readLine returns the next line of the head without its LF or CRLF (RFC
// 9112 §2.2 lets a recipient take a bare LF as the end of the status line
// and of fields). A bare CR inside a line is refused. On errLong the line
// returned is the buffer's first part, valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) { return readLineEnd(br, false) }

// readChunkLine returns a line of a chunked body, trailers included, which
// must end in CRLF (RFC 9112 §7.1's grammar; §2.2's bare LF is for the
// head).
func readChunkLine(br *bufio.Reader) ([]byte, error) { return readLineEnd(br, true) }

func readLineEnd(br *bufio.Reader, crlf bool) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return line, errLong
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	} else if crlf {
		return nil, &notHTTP{"a chunk line ending in a bare LF"}
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, &notHTTP{"a bare CR"}
	}
	return line, nil
}

// skipLine discards the rest of a long line, at most limit bytes of it.
func skipLine(br *bufio.Reader, limit int) (int, error) {
	n := 0
	for {
		part, err := br.ReadSlice('\n')
		if n += len(part); n > limit {
			return n, &notHTTP{"a header section over 64 KiB"}
		}
		if err != bufio.ErrBufferFull {
			return n, err
		}
	}
}

// unexpected turns an end of input in the middle of an answer into
// cutShort.
func unexpected(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return cutShort
	}
	return err
}

// fieldName returns the name of a header line "name:..." (RFC 9110 §5.1:
// a token, with no white space before the colon; a folded line starts with
// white space and so is refused too).
func fieldName(line []byte) ([]byte, bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return nil, false
	}
	for _, b := range line[:i] {
		if !tchar(b) {
			return nil, false
		}
	}
	return line[:i], true
}

func framing(name []byte) bool {
	return equalFold(name, "content-length") || equalFold(name, "transfer-encoding") || equalFold(name, "connection")
}

// parseLength reads a Content-Length: 1 to 18 digits, no sign, no list.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, b := range v {
		if !digit(b) {
			return 0, false
		}
		n = n*10 + int64(b-'0')
	}
	return n, true
}

func trimOWS(b []byte) []byte { return bytes.Trim(b, " \t") }

// equalFold compares an ASCII name with a lowercase one, ignoring case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func digit(b byte) bool { return '0' <= b && b <= '9' }

func unhex(b byte) int {
	switch {
	case '0' <= b && b <= '9':
		return int(b - '0')
	case 'a' <= b && b <= 'f':
		return int(b-'a') + 10
	case 'A' <= b && b <= 'F':
		return int(b-'A') + 10
	}
	return -1
}

// tchar is RFC 9110 §5.6.2's token character.
func tchar(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', digit(b):
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

// quote shows at most 40 bytes of what an edge sent, for LastError.
func quote(b []byte) string {
	const most = 40
	s := b
	if len(s) > most {
		s = s[:most]
	}
	q := make([]byte, 0, len(s)+8)
	q = append(q, '"')
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			const hex = "0123456789abcdef"
			q = append(q, '\\', 'x', hex[c>>4], hex[c&15])
			continue
		}
		q = append(q, c)
	}
	q = append(q, '"')
	if len(b) > most {
		q = append(q, "..."...)
	}
	return string(q)
}
