package qoewatch

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/internal/web"
	"github.com/waisteer/waisteer/report"
	"github.com/waisteer/waisteer/report/qoe"
)

// CMCD v2 event reports (issue 17 item 3): a POST of `application/cmcd`
// to a steering route whose steerer steers by QoE, one RFC 9651
// Dictionary a line (report.ReadCMCDEvents). Each line with a pathway
// (`cdn`) and a throughput or buffer feeds the steerer's aggregator as its
// steering requests' reports do. Limits: the body's size; per client
// address (an IPv4 address, an IPv6 /64: qoe.Client) a rate of requests, of
// lines and of sids it has not sent before (issue 26 item 2); and per
// player session (`sid`) a rate of lines. What is over them is refused or
// ignored, and counted by reason in the aggregator.

// MaxReportBody is the largest event report read: a thousand lines of
// about a kilobyte.
const MaxReportBody = 1 << 20

// The rates. An address may post reportRate reports a second (burst
// ReportBurst), holding lineRate lines a second (burst lineBurst, one full
// body), under newSIDRate sids a second it did not send in the last
// sidMemory (burst NewSIDBurst); a player session may send sessionRate
// lines a second (burst SessionBurst). Several players may share an
// address (a home, a carrier's NAT), hence the address's larger rates; the
// aggregator counts at most qoe.PerClient sessions of an address in a cell
// anyway, so that sids past those budgets could only take the place of the
// address's own.
const (
	reportRate   = 50
	ReportBurst  = 200
	lineRate     = 50
	lineBurst    = report.MaxCMCDLines
	newSIDRate   = 0.1
	NewSIDBurst  = 16
	sessionRate  = 2
	SessionBurst = 20
	// maxLimited bounds each table of rates; a key past it is refused as
	// a flood until the table's idle keys are swept.
	maxLimited = 1 << 18
)

// sidMemory is how long an address's sid is known after its last line:
// twice the default QoE window, so that a player reporting now and then is
// not new each time.
const sidMemory = 2 * time.Minute

// reportLimits are a steerer's rates of reports.
type reportLimits struct {
	mu        sync.Mutex
	addresses map[qoe.Client]*addressRates
	sessions  map[clientSID]*bucket
}

// addressRates are one address's buckets.
type addressRates struct {
	requests, lines, newSIDs bucket
}

// clientSID is a sid as sent from one address: one player's session.
type clientSID struct {
	client qoe.Client
	sid    string
}

// bucket is a token bucket: tokens at at.
type bucket struct {
	tokens float64
	at     time.Time
}

func newReportLimits() *reportLimits {
	return &reportLimits{addresses: map[qoe.Client]*addressRates{}, sessions: map[clientSID]*bucket{}}
}

// take takes n tokens of b (rate a second, burst), and reports whether
// there were that many.
func (b *bucket) take(n, rate, burst float64, now time.Time) bool {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
		b.at = now
	}
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// full reports whether b is back to its burst at now.
func (b *bucket) full(rate, burst float64, now time.Time) bool {
	return b.tokens+now.Sub(b.at).Seconds()*rate >= burst
}

// address takes a request of client's; nil when it is over its rate (or
// the table is full), else the client's rates, for its lines.
func (l *reportLimits) address(c qoe.Client, now time.Time) *addressRates {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addresses[c]
	if a == nil {
		if len(l.addresses) >= maxLimited {
			return nil
		}
		a = &addressRates{
			requests: bucket{ReportBurst, now},
			lines:    bucket{lineBurst, now},
			newSIDs:  bucket{NewSIDBurst, now},
		}
		l.addresses[c] = a
	}
	if !a.requests.take(1, reportRate, ReportBurst, now) {
		return nil
	}
	return a
}

// line takes a line of sid from client, whose rates are a; "" when it is
// within every rate, else the reason it is not.
func (l *reportLimits) line(a *addressRates, c qoe.Client, sid string, now time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !a.lines.take(1, lineRate, lineBurst, now) {
		return "flood_address_lines"
	}
	k := clientSID{c, sid}
	b := l.sessions[k]
	if b == nil {
		if len(l.sessions) >= maxLimited || !a.newSIDs.take(1, newSIDRate, NewSIDBurst, now) {
			return "flood_address_sessions"
		}
		b = &bucket{SessionBurst, now}
		l.sessions[k] = b
	}
	if !b.take(1, sessionRate, SessionBurst, now) {
		return "flood_session"
	}
	return ""
}

// sweep forgets the addresses whose buckets are full again, and the sids
// not sent for sidMemory.
func (l *reportLimits) sweep(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, a := range l.addresses {
		if a.requests.full(reportRate, ReportBurst, now) && a.lines.full(lineRate, lineBurst, now) && a.newSIDs.full(newSIDRate, NewSIDBurst, now) {
			delete(l.addresses, k)
		}
	}
	for k, b := range l.sessions {
		if now.Sub(b.at) >= sidMemory {
			delete(l.sessions, k)
		}
	}
}

// maxLineReasons is how many lines that do not read an answer names.
const maxLineReasons = 16

// ServeReports answers a POST of a CMCD v2 event report to a steering
// route of the watch's steerer, whose pathways are ids, for cohort, from
// client (behind trusted proxies, the client they name) at now: 204 when every line was taken, 200 with the answer when some
// were not, 400 when none read, 413, 415 and 429 by their limits.
func (wt *Watch) ServeReports(w http.ResponseWriter, r *http.Request, ids []string, cohort string, client qoe.Client, now time.Time) {
	rates := wt.limit.address(client, now)
	if rates == nil {
		wt.Agg.Ignore("flood_address")
		w.Header().Set("Retry-After", "1")
		web.Refuse(w, api.Errorf(api.ReportFlood, "over the %d reports a second an address may post", reportRate))
		return
	}
	if !report.IsCMCDMediaType(r.Header.Get("Content-Type")) {
		wt.Agg.Ignore("not_cmcd")
		web.Refuse(w, api.Errorf(api.MediaType, "a report is application/cmcd (CMCD v2 event mode), not %q", r.Header.Get("Content-Type")))
		return
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		wt.Agg.Ignore("encoded")
		web.Refuse(w, api.Errorf(api.MediaType, "a report is read as sent, not in Content-Encoding %q", enc))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxReportBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		wt.Agg.Ignore("body_too_large")
		web.Refuse(w, api.Errorf(api.BodyTooLarge, "a report is at most %d bytes", MaxReportBody))
		return
	case err != nil:
		wt.Agg.Ignore("body_unreadable")
		web.Refuse(w, api.Errorf(api.BadBody, "reading the report: %v", err))
		return
	}
	evs, bad := report.ReadCMCDEvents(body)
	ans := view.ReportsAnswer{Ignored: map[string]int{}}
	ignore := func(why string) {
		ans.Ignored[why]++
		wt.Agg.Ignore(why)
	}
	for _, e := range bad {
		ignore("line_unreadable")
		if len(ans.Lines) < maxLineReasons {
			ans.Lines = append(ans.Lines, e.Error())
		}
	}
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	for _, e := range evs {
		switch _, known := index[e.CDN]; {
		case e.CDN == "":
			ignore("no_pathway")
		case !known:
			ignore("unknown_pathway")
		case !e.HasThroughput && !e.HasBuffer:
			ignore("no_figure")
		case e.HasThroughput && e.Throughput > qoe.MaxThroughput:
			ignore("throughput_absurd")
		case e.HasBuffer && e.Buffer > qoe.MaxBuffer:
			ignore("buffer_absurd")
		default:
			if why := wt.limit.line(rates, client, e.Session, now); why != "" {
				ignore(why)
				continue
			}
			wt.Agg.Add(qoe.Key{Pathway: e.CDN, Cohort: cohort}, cmcdSession(e.Session), client, e.Throughput, e.HasThroughput, e.Buffer, e.HasBuffer, now)
			ans.Accepted++
		}
	}
	if ans.Accepted == 0 && len(evs) == 0 {
		if len(bad) == 0 {
			web.Refuse(w, api.Errorf(api.EmptyBody, "the report has no line"))
		} else {
			web.Refuse(w, api.Errorf(api.BadReport, "no line of the report reads: %s", bad[0].Error()))
		}
		return
	}
	if len(ans.Ignored) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	api.WriteJSON(w, http.StatusOK, ans)
}
