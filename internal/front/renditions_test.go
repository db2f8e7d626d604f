package front

import (
	"net/http"
	"testing"
)

// TestBackupRenditions (issue 28, "Backups ... Renditions and I-frame
// playlists stay relative, so a backup viewer loads them from the
// front"): in a backup viewer's playlist every EXT-X-MEDIA URI and every
// EXT-X-I-FRAME-STREAM-INF URI is on the viewer's pathways as its
// variants are (fixed's order a, b, c: the clones "<p>.example" of the
// playlist's own pathway, so on the scheme the viewer reached); each rendition
// group is written once per backup pathway, its GROUP-ID suffixed, and
// each backup variant names its own pathway's groups, so that failing over
// moves the renditions too; CLOSED-CAPTIONS, with no URI, is named as it
// was; "{$lang}" is kept verbatim (rfc8216bis-22 §4.3). Expected bytes
// written by hand from hls.PlaceRenditions' doc. The old front left
// "audio/{$lang}.m3u8", "subs/en.m3u8" and "iframes/720p.m3u8" relative.
func TestBackupRenditions(t *testing.T) {
	const in = "#EXTM3U\n" +
		"#EXT-X-VERSION:7\n" +
		"#EXT-X-DEFINE:NAME=\"lang\",VALUE=\"en\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",NAME=\"English\",DEFAULT=YES,URI=\"audio/{$lang}.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",NAME=\"Main\",AUTOSELECT=YES\n" +
		"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"English\",URI=\"subs/en.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID=\"cc\",NAME=\"CC1\",INSTREAM-ID=\"CC1\"\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO=\"aud\",SUBTITLES=\"subs\",CLOSED-CAPTIONS=\"cc\"\n" +
		"720p.m3u8\n" +
		"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI=\"iframes/720p.m3u8\"\n"
	const want = "#EXTM3U\n" +
		"#EXT-X-VERSION:7\n" +
		"#EXT-X-DEFINE:NAME=\"lang\",VALUE=\"en\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",NAME=\"English\",DEFAULT=YES,URI=\"http://a.example/live/audio/{$lang}.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud\",NAME=\"Main\",AUTOSELECT=YES\n" +
		"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"English\",URI=\"http://a.example/live/subs/en.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID=\"cc\",NAME=\"CC1\",INSTREAM-ID=\"CC1\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud-backup1\",NAME=\"English\",DEFAULT=YES,URI=\"http://b.example/live/audio/{$lang}.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud-backup1\",NAME=\"Main\",AUTOSELECT=YES\n" +
		"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs-backup1\",NAME=\"English\",URI=\"http://b.example/live/subs/en.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud-backup2\",NAME=\"English\",DEFAULT=YES,URI=\"http://c.example/live/audio/{$lang}.m3u8\"\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"aud-backup2\",NAME=\"Main\",AUTOSELECT=YES\n" +
		"#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs-backup2\",NAME=\"English\",URI=\"http://c.example/live/subs/en.m3u8\"\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO=\"aud\",SUBTITLES=\"subs\",CLOSED-CAPTIONS=\"cc\"\n" +
		"http://a.example/live/720p.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO=\"aud-backup1\",SUBTITLES=\"subs-backup1\",CLOSED-CAPTIONS=\"cc\"\n" +
		"http://b.example/live/720p.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO=\"aud-backup2\",SUBTITLES=\"subs-backup2\",CLOSED-CAPTIONS=\"cc\"\n" +
		"http://c.example/live/720p.m3u8\n" +
		"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI=\"http://a.example/live/iframes/720p.m3u8\"\n" +
		"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI=\"http://b.example/live/iframes/720p.m3u8\"\n" +
		"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI=\"http://c.example/live/iframes/720p.m3u8\"\n"
	fr := dirFront(t, map[string][]byte{"live/main.m3u8": []byte(in)}, 0)
	rec := serve(fr, "GET", "/live/main.m3u8?"+ModeParam+"=backup", nil)
	if rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Errorf("%d\n%s\nwant\n%s", rec.Code, rec.Body, want)
	}
}
