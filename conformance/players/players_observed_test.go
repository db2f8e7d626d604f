package players

// What the servers logged and the driver reported, and the reads of it.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// observed is what the servers logged and the driver reported, at one
// instant.
type observed struct {
	hits  []hit
	lines []line
}

// steerReq is one steering request and the manifest it was answered with.
type steerReq struct {
	hit
	manifest steeringManifest
	err      error // the answer did not read as a manifest
}

// steeringManifest is §8.1's JSON text, as a player reads it.
type steeringManifest struct {
	Version  int      `json:"VERSION"`
	TTL      int      `json:"TTL"`
	Reload   string   `json:"RELOAD-URI"`
	Priority []string `json:"PATHWAY-PRIORITY"`
	Clones   []struct {
		BaseID      string `json:"BASE-ID"`
		ID          string `json:"ID"`
		Replacement struct {
			Host       string            `json:"HOST"`
			Params     map[string]string `json:"PARAMS"`
			PerVariant map[string]string `json:"PER-VARIANT-URIS"`
		} `json:"URI-REPLACEMENT"`
	} `json:"PATHWAY-CLONES"`
	Decision string `json:"science.transaction.wai-decision"`
}

// steering returns the page's steering requests, in the order they began.
func (o *observed) steering(page string) []steerReq {
	var rs []steerReq
	for _, h := range o.hits {
		// The energy rooms' route is /steer/<page>, the pools' /pool/<page>.
		if h.Server != "steer" || h.Path != "/steer/"+page && h.Path != "/pool/"+page {
			continue
		}
		r := steerReq{hit: h}
		r.err = json.Unmarshal(h.Body, &r.manifest)
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b steerReq) int { return a.Start.Compare(b.Start) })
	return rs
}

// mediaHit is a request to a pathway: its kind ("playlist", "init",
// "segment") and, for a segment, its number.
type mediaHit struct {
	hit
	kind string
	seg  int
}

// media returns the page's requests to the pathways that began in
// [from, to) (to zero: no end), in the order they began.
func (o *observed) media(page string, from, to time.Time) []mediaHit {
	var ms []mediaHit
	for _, h := range o.hits {
		if h.Server == "steer" || h.Server == "origin" || h.Start.Before(from) || !to.IsZero() && !h.Start.Before(to) {
			continue
		}
		parts := strings.Split(h.Path, "/") // "", page, hls|dash, [pathway,] file
		if len(parts) < 4 || parts[1] != page {
			continue
		}
		mh := mediaHit{hit: h}
		file := parts[len(parts)-1]
		switch {
		case file == "media.m3u8":
			mh.kind = "playlist"
		case file == "init.mp4":
			mh.kind = "init"
		case strings.HasPrefix(file, "seg_"):
			mh.kind = "segment"
			mh.seg, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(file, "seg_"), ".m4s"))
		default:
			mh.kind = "other"
		}
		ms = append(ms, mh)
	}
	slices.SortFunc(ms, func(a, b mediaHit) int { return a.Start.Compare(b.Start) })
	return ms
}

// segments returns the page's segments served whole (200) by the pathway
// (any pathway for "") that began in [from, to).
func (o *observed) segments(page, pathway string, from, to time.Time) []mediaHit {
	var ss []mediaHit
	for _, m := range o.media(page, from, to) {
		if m.kind == "segment" && m.Status == http.StatusOK && (pathway == "" || m.Server == pathway) {
			ss = append(ss, m)
		}
	}
	return ss
}

// samples returns the page's samples of its video element.
func (o *observed) samples(page string) []line {
	var ss []line
	for _, l := range o.lines {
		if l.Kind == "sample" && l.Page == page {
			ss = append(ss, l)
		}
	}
	return ss
}

// currentTime is the page's video currentTime at the last sample read at
// or before at (0 before any).
func (o *observed) currentTime(page string, at time.Time) float64 {
	ct := 0.0
	for _, s := range o.samples(page) {
		if s.at.After(at) {
			break
		}
		ct = s.CurrentTime
	}
	return ct
}

// played is how many seconds of media the page played between from and to.
func (o *observed) played(page string, from, to time.Time) float64 {
	return o.currentTime(page, to) - o.currentTime(page, from)
}

// stall is the longest stretch of [from, to) in which the page's video
// did not advance.
func (o *observed) stall(page string, from, to time.Time) time.Duration {
	var longest time.Duration
	var since time.Time
	last := -1.0
	for _, s := range o.samples(page) {
		if s.at.Before(from) {
			last = s.CurrentTime
			continue
		}
		if s.at.After(to) {
			break
		}
		if since.IsZero() {
			since = s.at
		}
		if s.CurrentTime > last {
			since, last = s.at, s.CurrentTime
		}
		longest = max(longest, s.at.Sub(since))
	}
	return longest
}

// diagnose describes what each page did, for a failure's message.
func (o *observed) diagnose() string { return o.diagnosePages(pages) }

// diagnosePages is diagnose for the pages pgs.
func (o *observed) diagnosePages(pgs []pageSpec) string {
	var b strings.Builder
	for _, pg := range pgs {
		fmt.Fprintf(&b, "  %s: %d steering requests; media requests by pathway:", pg.name, len(o.steering(pg.name)))
		count := map[string]int{}
		for _, m := range o.media(pg.name, time.Time{}, time.Time{}) {
			count[m.Server+" "+m.kind+" "+strconv.Itoa(m.Status)]++
		}
		keys := make([]string, 0, len(count))
		for k := range count {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " [%s]×%d", k, count[k])
		}
		ss := o.samples(pg.name)
		if len(ss) > 0 {
			s := ss[len(ss)-1]
			fmt.Fprintf(&b, "; currentTime %.1f readyState %d paused %v %s, %d frames dropped", s.CurrentTime, s.ReadyState, s.Paused, s.Visibility, s.Dropped)
		}
		b.WriteString("\n")
		var trace []string // the page's own trace, when it keeps one (hlsjs.html)
		for _, l := range o.lines {
			for _, e := range l.Events {
				if l.Page == pg.name && e.Kind == "trace" {
					trace = append(trace, time.UnixMilli(e.T).Format("15:04:05.000")+" "+strings.Trim(string(e.Detail), `"`))
				}
			}
		}
		if len(trace) > 0 && (len(ss) == 0 || ss[len(ss)-1].ReadyState < 2) {
			// It never played: how it started is what tells why.
			fmt.Fprintf(&b, "    its first events: %s\n", strings.Join(trace[:min(len(trace), 40)], "; "))
		}
		n := 0
		for _, l := range o.lines {
			if l.Page != pg.name {
				continue
			}
			for _, e := range l.Errors {
				if n < 8 {
					fmt.Fprintf(&b, "    error: %s\n", e.Text)
				}
				n++
			}
			if l.Kind == "console" && n < 8 {
				fmt.Fprintf(&b, "    console %s: %s\n", l.Type, l.Text)
				n++
			}
		}
	}
	return b.String()
}

// query reads a raw query as §4.1 cuts it: each part at its first `=`,
// percent-decoded, `+` not a space; the first part with a name wins.
func query(raw string) map[string]string {
	q := map[string]string{}
	for part := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(part, "=")
		n, err1 := url.PathUnescape(name)
		v, err2 := url.PathUnescape(value)
		if err1 != nil || err2 != nil {
			continue
		}
		if _, ok := q[n]; !ok {
			q[n] = v
		}
	}
	return q
}
