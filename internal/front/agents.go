package front

import "strings"

// Class is what a player can do with steering, read from its User-Agent
// (the multi-CDN seed's pitfall 5: track the share of the audience that
// steers): steer (it reads the steering line), fail over between backup
// variants only (it is given a playlist of backups), or neither (it is
// redirected on opening, the OTT seed's way for VLC, ffmpeg and the like).
type Class uint8

const (
	Steers Class = iota
	BackupOnly
	RedirectOnly
	classCount
)

var classNames = [classCount]string{"steers", "backup", "redirect"}

func (c Class) String() string { return classNames[c] }

// defaultRedirect are the players the OTT seed names as getting neither
// steering nor backup variants ("VLC, ffmpeg-based players, mpv, Kodi and
// set-top boxes without a User-Agent"), and GStreamer, the issue's.
// libavformat says "Lavf/" in its User-Agent.
var defaultRedirect = []string{"vlc", "libvlc", "lavf", "libavformat", "ffmpeg", "mpv", "kodi", "xbmc", "gstreamer"}

// defaultBackup are players that fail over between redundant variants
// but do not steer: smart-TV firmware older than content steering
// (the multi-CDN seed's pitfall 5: recent Tizen, webOS and Vidaa players
// steer, older ones do not).
var defaultBackup = []string{"netcast", "smart-tv", "smarttv", "tizen 2.", "tizen 3.", "tizen 4.", "web0s; linux/smarttv", "hbbtv"}

// families are the player families the metrics count by, the first whose
// pattern the User-Agent holds (lowercased).
var families = []struct{ name, pattern string }{
	{"vlc", "vlc"}, {"ffmpeg", "lavf"}, {"ffmpeg", "ffmpeg"}, {"mpv", "mpv"}, {"kodi", "kodi"}, {"kodi", "xbmc"},
	{"gstreamer", "gstreamer"}, {"avplayer", "applecoremedia"}, {"media3", "exoplayer"}, {"media3", "media3"},
	{"android", "stagefright"}, {"tizen", "tizen"}, {"webos", "web0s"}, {"webos", "webos"}, {"roku", "roku"},
	{"smarttv", "smart-tv"}, {"smarttv", "smarttv"}, {"smarttv", "hbbtv"}, {"edge", "edg/"}, {"chrome", "chrome"},
	{"firefox", "firefox"}, {"safari", "safari"}, {"curl", "curl/"},
}

// agents classifies User-Agents: the defaults, then the operator's
// patterns (case-insensitive substrings), which win.
type agents struct {
	redirect, backup []string
}

func newAgents(redirect, backup []string) agents {
	a := agents{}
	for _, p := range redirect {
		a.redirect = append(a.redirect, strings.ToLower(p))
	}
	for _, p := range backup {
		a.backup = append(a.backup, strings.ToLower(p))
	}
	return a
}

// classify reads a User-Agent's class and family. No User-Agent at all
// is a set-top box the OTT seed redirects.
func (a agents) classify(ua string) (Class, string) {
	if strings.TrimSpace(ua) == "" {
		return RedirectOnly, "none"
	}
	l := strings.ToLower(ua)
	family := "other"
	for _, f := range families {
		if strings.Contains(l, f.pattern) {
			family = f.name
			break
		}
	}
	for _, p := range a.redirect {
		if strings.Contains(l, p) {
			return RedirectOnly, family
		}
	}
	for _, p := range a.backup {
		if strings.Contains(l, p) {
			return BackupOnly, family
		}
	}
	for _, p := range defaultRedirect {
		if strings.Contains(l, p) {
			return RedirectOnly, family
		}
	}
	for _, p := range defaultBackup {
		if strings.Contains(l, p) {
			return BackupOnly, family
		}
	}
	return Steers, family
}
