package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/dunglas/httpsfv"
)

// CMCD v2 event reports (CTA-5004-B's event mode, issue 17): a player posts
// `application/cmcd`, one RFC 9651 Dictionary per line, each line one
// report. This reads the keys the QoE aggregator uses: `sid` (the player's
// session id, a String), `cdn` (the pathway that delivered, a String or a
// Token), `bl` and `mtp` as §4.4 reads them (the least of an Inner List),
// and `e` (the event, a Token).

// CMCDEvent is one line of an event report.
type CMCDEvent struct {
	Session string // sid
	CDN     string // cdn: the pathway
	Event   string // e
	// Buffer is bl (ms) and Throughput mtp × 1000 (bit/s), each when Has.
	Buffer, Throughput       uint64
	HasBuffer, HasThroughput bool
}

// Limits of an event report's body.
const (
	MaxCMCDLines    = 1000
	MaxCMCDLineSize = 8 << 10
	maxCMCDString   = 256 // sid and cdn
)

// CMCDLineError is a line of an event report that does not read.
type CMCDLineError struct {
	Line   int // from 1
	Reason string
}

func (e CMCDLineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// ReadCMCDEvents reads an event report's body: the events of the lines
// that read, and why each other line does not. Empty lines (a final
// newline, CRLF's CR) are skipped. A body of more than MaxCMCDLines lines
// reads only the first ones and refuses the rest as one.
func ReadCMCDEvents(body []byte) ([]CMCDEvent, []CMCDLineError) {
	var evs []CMCDEvent
	var errs []CMCDLineError
	n := 0
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		n++
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(evs)+len(errs) == MaxCMCDLines {
			errs = append(errs, CMCDLineError{n, fmt.Sprintf("more than %d reports in one body", MaxCMCDLines)})
			break
		}
		ev, why := readCMCDEvent(line)
		if why != "" {
			errs = append(errs, CMCDLineError{n, why})
			continue
		}
		evs = append(evs, ev)
	}
	return evs, errs
}

func readCMCDEvent(line []byte) (CMCDEvent, string) {
	var ev CMCDEvent
	if len(line) > MaxCMCDLineSize {
		return ev, fmt.Sprintf("a line of %d bytes, more than %d", len(line), MaxCMCDLineSize)
	}
	d, ok := parseDictionary(string(line))
	if !ok {
		return ev, "not an RFC 9651 Dictionary"
	}
	text := func(key string, token bool) (string, string) {
		m, ok := d.Get(key)
		if !ok {
			return "", ""
		}
		it, ok := m.(httpsfv.Item)
		if !ok {
			return "", key + " is not a String"
		}
		var s string
		switch v := it.Value.(type) {
		case string:
			s = v
		case httpsfv.Token:
			if !token {
				return "", key + " is a Token, not a String"
			}
			s = string(v)
		default:
			return "", key + " is not a String"
		}
		if s == "" || len(s) > maxCMCDString {
			return "", fmt.Sprintf("%s of %d bytes, not 1 to %d", key, len(s), maxCMCDString)
		}
		return s, ""
	}
	var why string
	if ev.Session, why = text("sid", false); why != "" {
		return ev, why
	}
	if ev.Session == "" {
		return ev, "no sid: a report names its session"
	}
	if ev.CDN, why = text("cdn", true); why != "" {
		return ev, why
	}
	if m, ok := d.Get("e"); ok {
		it, ok := m.(httpsfv.Item)
		tok, isTok := it.Value.(httpsfv.Token)
		if !ok || !isTok {
			return ev, "e is not a Token"
		}
		ev.Event = string(tok)
	}
	for i, k := range cmcdKeys {
		m, ok := d.Get(k)
		if !ok {
			continue
		}
		v, ok := keyValue(m)
		if !ok {
			return ev, k + " is not an Integer of 0 or above, nor a list of them"
		}
		if i == 0 {
			ev.Buffer, ev.HasBuffer = v, true
		} else {
			if v > (1<<64-1)/1000 {
				return ev, "mtp past what bits per second count"
			}
			ev.Throughput, ev.HasThroughput = v*1000, true
		}
	}
	return ev, ""
}

// IsCMCDMediaType reports whether a Content-Type is application/cmcd,
// with any parameters.
func IsCMCDMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/cmcd")
}
