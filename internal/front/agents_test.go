package front

import "testing"

// TestClassify: the OTT seed's players that get neither steering nor
// backups (VLC, ffmpeg, mpv, Kodi, no User-Agent) and the issue's
// GStreamer are redirected; old smart-TV firmware (the multi-CDN seed's
// pitfall 5) gets backups; browsers, AVPlayer and Media3 steer; the
// operator's patterns win over the defaults.
func TestClassify(t *testing.T) {
	a := newAgents([]string{"MyBox/"}, []string{"hls.js-nosteer", "vlc/4"})
	for _, c := range []struct {
		ua     string
		class  Class
		family string
	}{
		{"VLC/3.0.20 LibVLC/3.0.20", RedirectOnly, "vlc"},
		{"Lavf/60.16.100", RedirectOnly, "ffmpeg"},
		{"mpv 0.37.0", RedirectOnly, "mpv"},
		{"Kodi/21.0 (X11; Linux x86_64)", RedirectOnly, "kodi"},
		{"GStreamer souphttpsrc 1.22", RedirectOnly, "gstreamer"},
		{"", RedirectOnly, "none"},
		{"  ", RedirectOnly, "none"},
		{"MyBox/1.0", RedirectOnly, "other"},
		{"VLC/4.0", BackupOnly, "vlc"}, // the operator's backup pattern wins over the default redirect
		{"Mozilla/5.0 (SMART-TV; Linux; Tizen 2.4.0) AppleWebKit/538.1", BackupOnly, "tizen"},
		{"Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36", BackupOnly, "webos"},
		{"Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0 Safari/537.36 hls.js-nosteer", BackupOnly, "chrome"},
		{"AppleCoreMedia/1.0.0.21A5248v (iPhone; U; CPU OS 17_0 like Mac OS X)", Steers, "avplayer"},
		{"ExoPlayerLib/2.19.1", Steers, "media3"},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0", Steers, "firefox"},
		{"Mozilla/5.0 (Linux; Tizen 7.0) AppleWebKit/537.36 Chrome/94.0", Steers, "tizen"},
	} {
		class, fam := a.classify(c.ua)
		if class != c.class || fam != c.family {
			t.Errorf("%q: %s %s, want %s %s", c.ua, class, fam, c.class, c.family)
		}
	}
}
