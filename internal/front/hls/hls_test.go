package hls

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
)

// stationTag is the line the station's seed adds to its playlists
// ("Content steering", ADR-0159), with clone_from ".".
const stationTag = `#EXT-X-CONTENT-STEERING:SERVER-URI="/api/v1/steering",PATHWAY-ID="."`

func file(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSetSteering compares SetSteering's output with expected files written
// by hand (rfc8216bis-22 §4.4.6.6; the station seed's line; issue 13: a line
// already there is replaced, never doubled).
func TestSetSteering(t *testing.T) {
	for _, c := range []struct {
		name, in, tag, want string
	}{
		{"no tag: inserted after the header", "plain.m3u8", stationTag, "plain.set.m3u8"},
		{"one to replace, in place, no final line ending", "replace.m3u8", stationTag, "replace.set.m3u8"},
		{"two: the first replaced, the second removed", "two.m3u8", stationTag, "two.set.m3u8"},
		{"CRLF: the new line ends CRLF, the LF line is kept", "crlf.m3u8", stationTag, "crlf.set.m3u8"},
		{"a BOM, and the header ends at EXT-X-START", "bom.m3u8", stationTag, "bom.set.m3u8"},
		{"removed", "replace.m3u8", "", "replace.removed.m3u8"},
		{"both removed", "two.m3u8", "", "two.removed.m3u8"},
		{"nothing to remove", "plain.m3u8", "", "plain.m3u8"},
		{"set on what is set", "plain.set.m3u8", stationTag, "plain.set.m3u8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := SetSteering(nil, file(t, c.in), c.tag)
			if err != nil {
				t.Fatal(err)
			}
			if want := file(t, c.want); !bytes.Equal(got, want) {
				t.Errorf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// TestSetSteeringRoom_8_2: an energy room's tag, as decision.HLSTag writes
// it for a policy whose initial pathway is "b", set in a playlist that
// declares a variant per pathway (§8.2: SERVER-URI is server_uri, PATHWAY-ID
// the initial pathway's id). The expected file holds the bytes §8.2 gives,
// written by hand.
func TestSetSteeringRoom_8_2(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{Policy: func(p *policy.Policy) {
		p.ServerURI = "https://steer.example/v1/steer?room=r1&v=2"
		p.Initial = 1
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := SetSteering(nil, file(t, "pathways.m3u8"), decision.HLSTag(sc.Policy))
	if err != nil {
		t.Fatal(err)
	}
	if want := file(t, "pathways.room.m3u8"); !bytes.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestRefused: a media playlist, bytes that are not a playlist and a
// playlist of both kinds are refused with their reason, and so is a tag
// that is not one steering tag line.
func TestRefused(t *testing.T) {
	for _, c := range []struct {
		in  []byte
		tag string
		err error
	}{
		{file(t, "media.m3u8"), stationTag, ErrMedia},
		{file(t, "media.m3u8"), "", ErrMedia},
		{file(t, "notplaylist.html"), stationTag, ErrNotPlaylist},
		{file(t, "segment.ts"), stationTag, ErrNotPlaylist},
		{nil, stationTag, ErrNotPlaylist},
		{[]byte(bom), stationTag, ErrNotPlaylist},
		{[]byte("#EXTM3Ufoo\n#EXT-X-STREAM-INF:BANDWIDTH=1\na\n"), stationTag, ErrNotPlaylist},
		{[]byte(" #EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\na\n"), stationTag, ErrNotPlaylist},
		{file(t, "mixed.m3u8"), stationTag, ErrMixed},
		{[]byte("#EXTM3U\n#EXT-X-VERSION:3\n"), stationTag, ErrEmpty},
		{file(t, "plain.m3u8"), `#EXT-X-SESSION-DATA:DATA-ID="x"`, ErrTag},
		{file(t, "plain.m3u8"), `EXT-X-CONTENT-STEERING:SERVER-URI="/s"`, ErrTag},
		{file(t, "plain.m3u8"), "#EXT-X-CONTENT-STEERING:SERVER-URI=\"/s\"\n#EXTINF:1,", ErrTag},
		{file(t, "plain.m3u8"), "#EXT-X-CONTENT-STEERING:SERVER-URI=\"/s\"\r", ErrTag},
	} {
		got, err := SetSteering([]byte("kept"), c.in, c.tag)
		if !errors.Is(err, c.err) {
			t.Errorf("%.30q with %.30q: error %v, want %v", c.in, c.tag, err, c.err)
		}
		if string(got) != "kept" {
			t.Errorf("%.30q: dst %q on an error", c.in, got)
		}
	}
	_, err := SetSteering(nil, file(t, "mixed.m3u8"), stationTag)
	if want := "hls: line 4: both multivariant and media playlist tags: a multivariant tag at line 2 and a media tag at line 4"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestClassify reads each kind (rfc8216bis-22 §4.4: the tags each kind of
// playlist holds).
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		kind Kind
		err  error
	}{
		{file(t, "plain.m3u8"), Multivariant, nil},
		{file(t, "crlf.m3u8"), Multivariant, nil},
		{file(t, "bom.m3u8"), Multivariant, nil},
		{file(t, "media.m3u8"), Media, nil},
		{file(t, "notplaylist.html"), NotPlaylist, nil},
		{file(t, "segment.ts"), NotPlaylist, nil},
		{nil, NotPlaylist, nil},
		{file(t, "mixed.m3u8"), NotPlaylist, ErrMixed},
		{[]byte("#EXTM3U \t\r\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"a\""), Multivariant, nil},
		{[]byte("#EXTM3U\n#EXT-X-SESSION-KEY:METHOD=NONE\n"), Multivariant, nil},
		{[]byte("#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"i\"\n"), Multivariant, nil},
		{[]byte("#EXTM3U\n" + stationTag), Multivariant, nil},
		{[]byte("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-ENDLIST\n"), Media, nil},
		{[]byte("#EXTM3U\n#EXT-X-PART-INF:PART-TARGET=1\n"), Media, nil},
		// EXT-X-MEDIA-SEQUENCE is not EXT-X-MEDIA: names are whole.
		{[]byte("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:3\n"), Media, nil},
		{[]byte("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:3\n#EXT-X-MEDIA:TYPE=AUDIO\n"), NotPlaylist, ErrMixed},
		{[]byte("#EXTM3U\n"), NotPlaylist, ErrEmpty},
		{[]byte("#EXTM3U\n#EXT-X-UNKNOWN:1\nuri\n# comment\n"), NotPlaylist, ErrEmpty},
	} {
		kind, err := Classify(c.in)
		if kind != c.kind || !errors.Is(err, c.err) {
			t.Errorf("%.40q: %v, %v; want %v, %v", c.in, kind, err, c.kind, c.err)
		}
	}
}

// TestVariants lists the variants with their PATHWAY-ID and
// STABLE-VARIANT-ID (rfc8216bis-22 §4.4.6.2).
func TestVariants(t *testing.T) {
	got, err := Variants(file(t, "pathways.m3u8"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Variant{
		{"https://a.cdn.example/live/540p.m3u8", "a", "v540"},
		{"https://b.cdn.example/live/540p.m3u8", "b", "v540"},
		{"https://c.cdn.example/live/540p.m3u8", "c", "v540"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	got, err = Variants(file(t, "plain.m3u8"))
	if err != nil {
		t.Fatal(err)
	}
	want = []Variant{{URI: "low/index.m3u8"}, {URI: "mid/index.m3u8?token=a%2Cb&x=1"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	// An unquoted PATHWAY-ID reads as its bytes; comments and unknown tags
	// between the tag and its URI line are passed over.
	got, err = Variants([]byte("#EXTM3U\r\n#EXT-X-STREAM-INF:PATHWAY-ID=x,BANDWIDTH=1\r\n# c\r\n#EXT-X-FOO\r\n\r\nu\r\n"))
	if err != nil || !slices.Equal(got, []Variant{{URI: "u", PathwayID: "x"}}) {
		t.Errorf("got %q, %v", got, err)
	}
	for _, c := range []struct{ in, err string }{
		{"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n", "hls: line 2: a bad variant: the last EXT-X-STREAM-INF has no URI line"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n#EXT-X-STREAM-INF:BANDWIDTH=2\nu\n", "hls: line 3: a bad variant: EXT-X-STREAM-INF before the URI line of the one above"},
		{"#EXTM3U\n#EXT-X-STREAM-INF\nu\n", "hls: line 2: a bad variant: EXT-X-STREAM-INF without an attribute list"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:CODECS=\"avc1\nu\n", "hls: line 2: a bad variant: attribute list, byte 8: an unterminated quoted string"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:PATHWAY-ID=\"a\",PATHWAY-ID=\"b\"\nu\n", "hls: line 2: a bad variant: attribute list, byte 16: PATHWAY-ID twice"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:A=1,\nu\n", "hls: line 2: a bad variant: attribute list, byte 5: an attribute expected after ','"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:A=\"1\"x\nu\n", "hls: line 2: a bad variant: attribute list, byte 6: ',' expected"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:A=,B=1\nu\n", "hls: line 2: a bad variant: attribute list, byte 3: an empty value"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:=1\nu\n", "hls: line 2: a bad variant: attribute list, byte 1: an attribute name expected"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:A\nu\n", "hls: line 2: a bad variant: attribute list, byte 2: '=' expected"},
		{"#EXTM3U\n#EXT-X-STREAM-INF:A=\r,PATHWAY-ID=\"p\"\nu\n", "hls: line 2: a bad variant: attribute list, byte 3: control byte 0x0d"},
		{"#EXTM3U\n#EXTINF:1,\ns.ts\n", "hls: a media playlist, which is never changed"},
	} {
		if _, err := Variants([]byte(c.in)); err == nil || err.Error() != c.err {
			t.Errorf("%q: error %v\nwant %s", c.in, err, c.err)
		}
	}
}

// edges gives each URI a backup on edge-2 and one on edge-3.
func edges(uri string) []string {
	return []string{"https://edge-2.example/live/" + uri, "https://edge-3.example/live/" + uri}
}

// TestWithBackups compares WithBackups' output with expected files written
// by hand: 2 variants × 2 backups, all the first backups before the second
// (the OTT seed's "up to two backup nodes for each viewer"), renditions and
// I-frame variants left as they are; variants with PATHWAY-ID, whose copies
// drop it, with 2, 1 and 0 backups, the last line without a line ending;
// CRLF.
func TestWithBackups(t *testing.T) {
	got, err := WithBackups(nil, file(t, "backups.m3u8"), edges)
	if err != nil {
		t.Fatal(err)
	}
	if want := file(t, "backups.out.m3u8"); !bytes.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	counts := map[string]int{"lo.m3u8": 2, "hi.m3u8": 1, "top.m3u8": 0}
	got, err = WithBackups(nil, file(t, "backups-pathway.m3u8"), func(uri string) []string {
		return []string{"https://edge-2.example/" + uri, "https://edge-3.example/" + uri}[:counts[uri]]
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := file(t, "backups-pathway.out.m3u8"); !bytes.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	got, err = WithBackups(nil, file(t, "crlf.m3u8"), func(uri string) []string {
		return []string{"https://edge-2.example/" + uri}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := file(t, "crlf.backups.m3u8"); !bytes.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}

	// Three backups: the first two are used.
	three := func(uri string) []string { return append(edges(uri), "https://edge-4.example/"+uri) }
	got, err = WithBackups([]byte("dst:"), file(t, "backups.m3u8"), three)
	if err != nil {
		t.Fatal(err)
	}
	if want := "dst:" + string(file(t, "backups.out.m3u8")); string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// No backups: the playlist as it came.
	got, err = WithBackups(nil, file(t, "backups.m3u8"), func(string) []string { return nil })
	if err != nil || !bytes.Equal(got, file(t, "backups.m3u8")) {
		t.Errorf("no backups: %v\n%s", err, got)
	}
}

// TestWithBackupsRefused: a backup that is not a URI line, and playlists
// that are not multivariant, are refused.
func TestWithBackupsRefused(t *testing.T) {
	for _, c := range []struct{ uri, why string }{
		{"", "empty"},
		{"#EXTINF:1,", "begins with '#'"},
		{"a\nb", "control byte 0x0a"},
		{"a\rb", "control byte 0x0d"},
		{"a\x00", "control byte 0x00"},
		{" a", "spaces at an end"},
		{"a\t", "spaces at an end"},
	} {
		_, err := WithBackups(nil, file(t, "backups.m3u8"), func(uri string) []string {
			return []string{"ok", c.uri}
		})
		want := `hls: a backup URI that cannot be a URI line: backup 2 of variant 1 ("low/index.m3u8"): ` + c.why
		if !errors.Is(err, ErrBackup) || err.Error() != want {
			t.Errorf("%q: error %v\nwant %s", c.uri, err, want)
		}
	}
	for _, c := range []struct {
		in  string
		err error
	}{{"media.m3u8", ErrMedia}, {"notplaylist.html", ErrNotPlaylist}, {"mixed.m3u8", ErrMixed}} {
		if _, err := WithBackups(nil, file(t, c.in), edges); !errors.Is(err, c.err) {
			t.Errorf("%s: error %v, want %v", c.in, err, c.err)
		}
	}
}

// hlsjsPathways is the pathway hls.js 1.7.4 gives each variant of b, written
// from its src/controller/level-controller.ts (onManifestLoaded): variants
// are grouped by PATHWAY-ID (or "."), BANDWIDTH, RESOLUTION, FRAME-RATE,
// CODECS, VIDEO-RANGE and HDCP-LEVEL; the first of a group keeps its
// pathway, a later one without PATHWAY-ID and with another URI becomes the
// pathway of n dots (n its rank in the group), and a later one with a
// PATHWAY-ID is merged into the first (its URI lost, "").
func hlsjsPathways(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	first := map[string]string{} // a group's first URI
	count := map[string]int{}
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "#EXT-X-STREAM-INF:")
		if !ok {
			continue
		}
		a := map[string]string{}
		for _, kv := range splitAttrs(rest) {
			k, v, _ := strings.Cut(kv, "=")
			a[k] = strings.Trim(v, `"`)
		}
		uri := lines[i+1]
		pathway := a["PATHWAY-ID"]
		if pathway == "" {
			pathway = "."
		}
		key := strings.Join([]string{pathway, a["BANDWIDTH"], a["RESOLUTION"], a["FRAME-RATE"], a["CODECS"], a["VIDEO-RANGE"], a["HDCP-LEVEL"]}, "-")
		switch {
		case count[key] == 0:
			count[key], first[key] = 1, uri
			out = append(out, pathway)
		case first[key] != uri && a["PATHWAY-ID"] == "":
			count[key]++
			out = append(out, strings.Repeat(".", count[key]))
		default:
			out = append(out, "")
		}
	}
	return out
}

// splitAttrs splits an attribute list at the commas outside quotes.
func splitAttrs(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// TestBackupsAsHlsjsReadsThem: hls.js plays the primaries as its pathway "."
// and fails over to the first backups (".."), then the second ("..."); a
// copy that kept its PATHWAY-ID would be merged away, which is why copies
// drop it. With PATHWAY-IDs on the primaries, the copies are "." and "..".
func TestBackupsAsHlsjsReadsThem(t *testing.T) {
	got, err := WithBackups(nil, file(t, "backups.m3u8"), edges)
	if err != nil {
		t.Fatal(err)
	}
	if p := hlsjsPathways(t, got); !slices.Equal(p, []string{".", ".", "..", "..", "...", "..."}) {
		t.Errorf("hls.js pathways %q", p)
	}
	got, err = WithBackups(nil, file(t, "backups-pathway.m3u8"), func(uri string) []string {
		return []string{"https://edge-2.example/" + uri, "https://edge-3.example/" + uri}
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := hlsjsPathways(t, got); !slices.Equal(p, []string{"edge-1", "edge-1", "edge-1", ".", ".", ".", "..", "..", ".."}) {
		t.Errorf("hls.js pathways %q", p)
	}
	// Copies that kept PATHWAY-ID: hls.js would drop every one.
	kept := strings.ReplaceAll(string(got), `#EXT-X-STREAM-INF:BANDWIDTH=800000,STABLE`, `#EXT-X-STREAM-INF:PATHWAY-ID="edge-1",BANDWIDTH=800000,STABLE`)
	if p := hlsjsPathways(t, []byte(kept)); p[3] != "" {
		t.Errorf("a copy with PATHWAY-ID: hls.js pathway %q, want merged", p[3])
	}
}

// TestRewriteVariants: each variant's URI line is replaced, and nothing
// else (an I-frame variant's and a rendition's URIs included); a URI the
// function keeps stays as it came, CR LF and all.
func TestRewriteVariants(t *testing.T) {
	in := "#EXTM3U\r\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio.m3u8\"\r\n#EXT-X-STREAM-INF:BANDWIDTH=1000,AUDIO=\"a\"\r\nlow.m3u8\r\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100,URI=\"iframe.m3u8\"\r\n#EXT-X-STREAM-INF:BANDWIDTH=2000\r\nkeep.m3u8\r\n"
	want := "#EXTM3U\r\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",URI=\"audio.m3u8\"\r\n#EXT-X-STREAM-INF:BANDWIDTH=1000,AUDIO=\"a\"\r\nhttp://edge.example/low.m3u8\r\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100,URI=\"iframe.m3u8\"\r\n#EXT-X-STREAM-INF:BANDWIDTH=2000\r\nkeep.m3u8\r\n"
	got, err := RewriteVariants(nil, []byte(in), func(u string) string {
		if u == "keep.m3u8" {
			return ""
		}
		return "http://edge.example/" + u
	})
	if err != nil || string(got) != want {
		t.Fatalf("%v\n%q\nwant\n%q", err, got, want)
	}
	if _, err := RewriteVariants(nil, []byte(in), func(string) string { return "bad\nuri" }); err == nil {
		t.Error("a URI with a line break was written")
	}
	if _, err := RewriteVariants(nil, []byte("#EXTM3U\n#EXTINF:1,\na.ts\n"), func(string) string { return "x" }); err == nil {
		t.Error("a media playlist was rewritten")
	}
}
