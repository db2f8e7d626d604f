package hls

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A multivariant playlist as an origin that steers writes it, by hand from
// rfc8216bis-22: a variable (§4.4.2.3, EXT-X-DEFINE) used in the URI lines
// (§4.3, variable substitution: "{$rend}" is replaced by the player), a
// steering tag (§4.4.6.6), and each variant on two pathways (§4.4.6.2,
// PATHWAY-ID), the I-frame variant too (§4.4.6.3: it takes every attribute
// of EXT-X-STREAM-INF but FRAME-RATE, AUDIO, SUBTITLES and CLOSED-CAPTIONS).
const steeredOrigin = "#EXTM3U\n" +
	"#EXT-X-VERSION:11\n" +
	"#EXT-X-DEFINE:NAME=\"rend\",VALUE=\"720p\"\n" +
	"#EXT-X-CONTENT-STEERING:SERVER-URI=\"https://steer.origin.example/s\",PATHWAY-ID=\"cdn-a\"\n" +
	"#EXT-X-STREAM-INF:BANDWIDTH=1000000,PATHWAY-ID=\"cdn-a\"\n" +
	"https://cdn-a.example/live/{$rend}.m3u8\n" +
	"#EXT-X-STREAM-INF:BANDWIDTH=1000000,PATHWAY-ID=\"cdn-b\"\n" +
	"https://cdn-b.example/live/{$rend}.m3u8\n" +
	"#EXT-X-I-FRAME-STREAM-INF:PATHWAY-ID=\"cdn-a\",BANDWIDTH=100000,URI=\"iframe.m3u8\"\n" +
	"#EXT-X-I-FRAME-STREAM-INF:PATHWAY-ID=\"cdn-b\",BANDWIDTH=100000,URI=\"iframe.m3u8\"\n"

// onEdge puts a URI of the playlist above on edge n, as the front puts it
// on a pathway's host.
func onEdge(n string) func(string) string {
	return func(uri string) string {
		uri = strings.Replace(uri, "cdn-a.example", "edge-"+n+".example", 1)
		return strings.Replace(uri, "cdn-b.example", "edge-"+n+".example", 1)
	}
}

// TestBackupDropsSteering (issue 28, "Backups"): the playlist of backup
// variants is for a player that does not steer (the OTT seed: "the player
// moves to a backup node from the master playlist", by the variants
// listed), so it keeps none of the origin's steering: no steering tag, no
// PATHWAY-ID on a variant put on another pathway, and the variant that
// was the same on the origin's other pathway written once. "{$rend}" is
// written as the origin wrote it. Expected output written by hand.
func TestBackupDropsSteering(t *testing.T) {
	want := "#EXTM3U\n" +
		"#EXT-X-VERSION:11\n" +
		"#EXT-X-DEFINE:NAME=\"rend\",VALUE=\"720p\"\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
		"https://edge-1.example/live/{$rend}.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
		"https://edge-2.example/live/{$rend}.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000\n" +
		"https://edge-3.example/live/{$rend}.m3u8\n" +
		"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI=\"iframe.m3u8\"\n"
	got, err := Backup(nil, []byte(steeredOrigin), onEdge("1"), func(uri string) []string {
		return []string{onEdge("2")(uri), onEdge("3")(uri)}
	})
	if err != nil || string(got) != want {
		t.Fatalf("%v\n%s\nwant\n%s", err, got, want)
	}
	// hls.js then reads the three as its redundant pathways, primary first.
	if p := hlsjsPathways(t, got); !slices.Equal(p, []string{".", "..", "..."}) {
		t.Errorf("hls.js pathways %q", p)
	}
}

// TestBackupKeepsUnsteered: a playlist with no steering, no PATHWAY-ID and
// no repeated variant comes out as WithBackups writes it, CR LF kept.
func TestBackupKeepsUnsteered(t *testing.T) {
	in := "#EXTM3U\r\n#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1.4d401f\"\r\n# a comment\r\nlow.m3u8\r\n#EXT-X-STREAM-INF:BANDWIDTH=2\r\nhigh.m3u8\r\n"
	want := "#EXTM3U\r\n#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1.4d401f\"\r\n# a comment\r\nhttp://e1/low.m3u8\r\n#EXT-X-STREAM-INF:BANDWIDTH=2\r\nhttp://e1/high.m3u8\r\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1.4d401f\"\r\nhttp://e2/low.m3u8\r\n#EXT-X-STREAM-INF:BANDWIDTH=2\r\nhttp://e2/high.m3u8\r\n"
	got, err := Backup(nil, []byte(in), func(u string) string { return "http://e1/" + u }, func(u string) []string { return []string{"http://e2/" + u} })
	if err != nil || string(got) != want {
		t.Fatalf("%v\n%q\nwant\n%q", err, got, want)
	}
}

// TestBackupRefused: an I-frame variant whose attribute list does not read
// (rfc8216bis-22 §4.2: a quoted string is closed) is refused with its
// line, as a bad EXT-X-STREAM-INF is: its PATHWAY-ID could not be found.
func TestBackupRefused(t *testing.T) {
	in := "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"i.m3u8\n"
	_, err := Backup(nil, []byte(in), func(string) string { return "" }, func(string) []string { return nil })
	if !errors.Is(err, ErrVariant) || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("%v", err)
	}
}
