package report

import (
	"net/http"
	"slices"
	"testing"
)

// TestUnread (issue 26 item 3): the values the issue found answered and
// counted nowhere are named by their reason, and the report §4 reads is
// the same as without them (an unreadable value is absent, never zero).
// Each row's reasons and report are read off the text by hand.
func TestUnread(t *testing.T) {
	for _, tc := range []struct {
		target string
		header string // a CMCD-Request line, "" for none
		r      Report
		why    []string
	}{
		{`/s?_HLS_pathway=alpha&_HLS_throughput=18446744073709551616`, "", with(Report{}, c(0)), []string{"throughput_unreadable"}},
		{`/s?_HLS_pathway=alpha&_HLS_throughput=18446744073709551615`, "", with(Report{}, c(0), T(1<<64-1)), nil},
		{`/s?_HLS_pathway=alpha&_HLS_throughput=-5`, "", with(Report{}, c(0)), []string{"throughput_unreadable"}},
		{`/s?_HLS_pathway=beta&_HLS_throughput=fast`, "", with(Report{}, c(1)), []string{"throughput_unreadable"}},
		{`/s?_HLS_pathway=omega&_HLS_throughput=5`, "", with(Report{}, T(5)), []string{"unknown_pathway"}},
		{`/s?_HLS_pathway=.&_HLS_throughput=`, "", Report{}, nil}, // hls.js before it knows; no sample
		{`/s?_DASH_pathway="x,beta"&_DASH_throughput=1,-5`, "", with(Report{}, c(1)), []string{"throughput_unreadable"}},
		{`/s?_DASH_pathway="x,beta"&_DASH_throughput=1,`, "", with(Report{}, c(1)), nil}, // dash.js: no sample
		{`/s?_DASH_pathway="x,y"&_DASH_throughput=7`, "", with(Report{}, T(7)), []string{"unknown_pathway"}},
		{`/s?_DASH_pathway="beta"&_DASH_throughput=5&_HLS_throughput=fast`, "", with(Report{}, c(1), T(5)), nil}, // DASH alone is read
		{`/s?CMCD=mtp%3D-5`, "", Report{}, []string{"throughput_unreadable"}},
		{`/s`, "mtp=-5", Report{}, []string{"throughput_unreadable"}},
		{`/s`, "bl=-1,mtp=2", with(Report{}, T(2000)), []string{"buffer_unreadable"}},
		{`/s`, `bl="x",mtp=1.5`, Report{}, []string{"throughput_unreadable", "buffer_unreadable"}},
		{`/s?CMCD=bl%3D5`, "mtp=-5", with(Report{}, B(5)), nil}, // the header is not read
		{`/s`, "bl=1;,", Report{}, []string{"cmcd_unreadable"}},
		{`/s?_HLS_pathway=omega&_HLS_throughput=x&CMCD=bl=%3A%3A`, "", Report{}, []string{"unknown_pathway", "throughput_unreadable", "buffer_unreadable"}},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("CMCD-Request", tc.header)
		}
		q := ParseQuery(tc.target)
		_, r, u := q.ReportUnread(h, testIDs)
		_, plain := q.Report(h, testIDs)
		want := slices.Clone(tc.why)
		// Reasons come from the lowest bit: sort both by the known order.
		order := func(a, b string) int { return slices.Index(UnreadReasons(), a) - slices.Index(UnreadReasons(), b) }
		slices.SortFunc(want, order)
		if r != tc.r || r != plain || !slices.Equal(u.Reasons(), want) {
			t.Errorf("%s %q: %+v %v (Report %+v); want %+v %v", tc.target, tc.header, r, u.Reasons(), plain, tc.r, want)
		}
	}
}
