package hls

import (
	"fmt"
	"strings"
	"testing"
)

// benchPlaylist is a multivariant playlist of some 4 KB: a header, audio
// and subtitle renditions, 10 variants and their I-frame variants.
func benchPlaylist(steering bool) []byte {
	var s strings.Builder
	s.WriteString("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n")
	if steering {
		s.WriteString(`#EXT-X-CONTENT-STEERING:SERVER-URI="https://old.example/steer",PATHWAY-ID="x"` + "\n")
	}
	for _, l := range []string{"en", "de", "fr"} {
		fmt.Fprintf(&s, "#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aac\",LANGUAGE=%q,NAME=%q,AUTOSELECT=YES,CHANNELS=\"2\",URI=\"audio/%s/index.m3u8\"\n", l, l, l)
		fmt.Fprintf(&s, "#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",LANGUAGE=%q,NAME=%q,AUTOSELECT=YES,URI=\"subs/%s/index.m3u8\"\n", l, l, l)
	}
	for i := range 10 {
		bw := 400_000 * (i + 1)
		fmt.Fprintf(&s, "#EXT-X-STREAM-INF:BANDWIDTH=%d,AVERAGE-BANDWIDTH=%d,CODECS=\"avc1.640028,mp4a.40.2\",RESOLUTION=%dx%d,FRAME-RATE=29.970,AUDIO=\"aac\",SUBTITLES=\"subs\",CLOSED-CAPTIONS=NONE,STABLE-VARIANT-ID=\"v%d\"\n", bw, bw*9/10, 320*(i+1), 180*(i+1), i)
		fmt.Fprintf(&s, "video/%d/index.m3u8?token=exp=1767225600~acl=%%2Flive%%2F*~hmac=0123456789abcdef\n", i)
	}
	for i := range 10 {
		fmt.Fprintf(&s, "#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=%d,CODECS=\"avc1.640028\",RESOLUTION=%dx%d,URI=\"video/%d/iframes.m3u8\"\n", 40_000*(i+1), 320*(i+1), 180*(i+1), i)
	}
	return []byte(s.String())
}

// BenchmarkSetSteering: the tag inserted into, and replaced in, a 4 KB
// playlist, into a reused buffer.
func BenchmarkSetSteering(b *testing.B) {
	for _, c := range []struct {
		name string
		in   []byte
	}{{"insert", benchPlaylist(false)}, {"replace", benchPlaylist(true)}} {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 8192)
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = SetSteering(dst[:0], c.in, stationTag); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWithBackups: each of the 10 variants repeated for 2 backups.
func BenchmarkWithBackups(b *testing.B) {
	in := benchPlaylist(false)
	dst := make([]byte, 0, 16384)
	var uris [2][]string // built once: the caller's cost is not measured
	vs, err := Variants(in)
	if err != nil {
		b.Fatal(err)
	}
	table := map[string][]string{}
	for _, v := range vs {
		uris[0] = append(uris[0], "https://edge-2.example/live/"+v.URI)
		uris[1] = append(uris[1], "https://edge-3.example/live/"+v.URI)
		table[v.URI] = []string{uris[0][len(uris[0])-1], uris[1][len(uris[1])-1]}
	}
	backup := func(uri string) []string { return table[uri] }
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if dst, err = WithBackups(dst[:0], in, backup); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBackup: the whole backup playlist of the 10 variants: on the
// viewer's pathway, 2 backups each, steering and PATHWAY-IDs dropped.
func BenchmarkBackup(b *testing.B) {
	in := benchPlaylist(true)
	dst := make([]byte, 0, 16384)
	own := func(uri string) string { return "https://edge-1.example/live/" + uri }
	backup := func(uri string) []string {
		return []string{"https://edge-2.example/live/" + uri, "https://edge-3.example/live/" + uri}
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = Backup(dst[:0], in, own, backup); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVariants(b *testing.B) {
	in := benchPlaylist(false)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Variants(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClassify(b *testing.B) {
	in := benchPlaylist(false)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Classify(in); err != nil {
			b.Fatal(err)
		}
	}
}
