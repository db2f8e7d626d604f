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

// Rule is what decided a viewer's class, as the front's status counts it:
// one of the operator's lists by its key, or a built-in rule.
type Rule uint8

const (
	RuleRedirectAgents Rule = iota // the operator's redirect_agents
	RuleBackupAgents               // the operator's backup_agents
	RuleSteerAgents                // the operator's steer_agents
	RuleNoUserAgent                // built in: no User-Agent, a set-top box the OTT seed redirects
	RulePlayer                     // built in: a player the OTT seed redirects (VLC, ffmpeg, ...)
	RuleCurrentTV                  // built in: Tizen 6.5 (2022) or later, webOS TV 22 or later
	RuleOldTV                      // built in: smart-TV firmware older than these
	RuleDefault                    // built in: any other player steers
	RuleMode                       // forced by ModeParam
	ruleCount
)

var ruleNames = [ruleCount]string{"redirect_agents", "backup_agents", "steer_agents",
	"builtin_no_user_agent", "builtin_player", "builtin_current_tv", "builtin_old_tv", "builtin_default", ModeParam}

func (r Rule) String() string { return ruleNames[r] }

// defaultRedirect are the players the OTT seed names as getting neither
// steering nor backup variants ("VLC, ffmpeg-based players, mpv, Kodi and
// set-top boxes without a User-Agent"), and GStreamer, the issue's.
// libavformat says "Lavf/" in its User-Agent.
var defaultRedirect = []string{"vlc", "libvlc", "lavf", "libavformat", "ffmpeg", "mpv", "kodi", "xbmc", "gstreamer"}

// defaultBackup are players that fail over between redundant variants
// but do not steer: smart-TV firmware older than content steering (the
// multi-CDN seed's pitfall 5: recent Tizen, webOS and Vidaa players steer,
// older ones do not). Current Tizen and webOS, which say the same tokens,
// are told apart before (currentTV).
var defaultBackup = []string{"netcast", "smart-tv", "smarttv", "tizen", "web0s", "webos", "hbbtv"}

// Current smart-TV firmware, whose players steer (issue 28, after the
// multi-CDN seed's pitfall 5): Samsung's Tizen 6.5, its 2022 models, and
// later, read from the "Tizen M.N" token Samsung's User-Agents carry; LG's
// webOS TV 22 and later, whose User-Agent names no webOS version but its
// engine's, Chromium 87 for webOS TV 22 (LG's web engine table).
const (
	tizenMajor, tizenMinor = 6, 5
	webOSChrome            = 87
)

// families are the player families the metrics count by, the first whose
// pattern the User-Agent holds (lowercased).
var families = []struct{ name, pattern string }{
	{"vlc", "vlc"}, {"ffmpeg", "lavf"}, {"ffmpeg", "ffmpeg"}, {"mpv", "mpv"}, {"kodi", "kodi"}, {"kodi", "xbmc"},
	{"gstreamer", "gstreamer"}, {"avplayer", "applecoremedia"}, {"media3", "exoplayer"}, {"media3", "media3"},
	{"android", "stagefright"}, {"tizen", "tizen"}, {"webos", "web0s"}, {"webos", "webos"}, {"roku", "roku"},
	{"smarttv", "smart-tv"}, {"smarttv", "smarttv"}, {"smarttv", "hbbtv"}, {"edge", "edg/"}, {"chrome", "chrome"},
	{"firefox", "firefox"}, {"safari", "safari"}, {"curl", "curl/"},
}

// agents classifies User-Agents: the operator's patterns (case-insensitive
// substrings) first, then the built-in rules.
type agents struct {
	redirect, backup, steer []string
}

func newAgents(redirect, backup, steer []string) agents {
	lower := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			if p != "" { // "" would hold every player
				out = append(out, strings.ToLower(p))
			}
		}
		return out
	}
	return agents{redirect: lower(redirect), backup: lower(backup), steer: lower(steer)}
}

// classify reads a User-Agent's class, its family and the rule that
// decided. The order of precedence: no User-Agent at all (a set-top box
// the OTT seed redirects); the operator's redirect_agents, backup_agents,
// then steer_agents (a player two lists name gets the class that asks less
// of it); then the built-in rules: the players the OTT seed redirects,
// current smart-TV firmware (steers), older smart-TV firmware (backups),
// and every other player steers.
func (a agents) classify(ua string) (Class, string, Rule) {
	if strings.TrimSpace(ua) == "" {
		return RedirectOnly, "none", RuleNoUserAgent
	}
	l := strings.ToLower(ua)
	family := "other"
	for _, f := range families {
		if strings.Contains(l, f.pattern) {
			family = f.name
			break
		}
	}
	switch {
	case containsAny(l, a.redirect):
		return RedirectOnly, family, RuleRedirectAgents
	case containsAny(l, a.backup):
		return BackupOnly, family, RuleBackupAgents
	case containsAny(l, a.steer):
		return Steers, family, RuleSteerAgents
	case containsAny(l, defaultRedirect):
		return RedirectOnly, family, RulePlayer
	case currentTV(l):
		return Steers, family, RuleCurrentTV
	case containsAny(l, defaultBackup):
		return BackupOnly, family, RuleOldTV
	}
	return Steers, family, RuleDefault
}

func containsAny(l string, patterns []string) bool {
	for _, p := range patterns {
		if strings.Contains(l, p) {
			return true
		}
	}
	return false
}

// currentTV reports whether a lowercased User-Agent is current Tizen or
// webOS TV firmware: "tizen 6.5" or later (Samsung: "Mozilla/5.0
// (SMART-TV; LINUX; Tizen 8.0) ..."), or "web0s" with "chrome/87" or later
// (LG: "Mozilla/5.0 (Web0S; Linux/SmartTV) ... Chrome/108.0.5359.211 ...").
// A version it cannot read is not current.
func currentTV(l string) bool {
	if major, minor, ok := versionAfter(l, "tizen "); ok {
		return major > tizenMajor || major == tizenMajor && minor >= tizenMinor
	}
	if strings.Contains(l, "web0s") {
		major, _, ok := versionAfter(l, "chrome/")
		return ok && major >= webOSChrome
	}
	return false
}

// versionAfter reads "M" or "M.N" (each of 1 to 4 digits) right after the
// first token in l that is followed by a digit.
func versionAfter(l, token string) (major, minor int, ok bool) {
	for rest := l; ; {
		i := strings.Index(rest, token)
		if i < 0 {
			return 0, 0, false
		}
		rest = rest[i+len(token):]
		major, n := digits(rest)
		if n == 0 {
			continue
		}
		if len(rest) > n && rest[n] == '.' {
			minor, _ = digits(rest[n+1:])
		}
		return major, minor, true
	}
}

// digits reads up to 4 decimal digits at the start of s: their value and
// how many.
func digits(s string) (v, n int) {
	for n < len(s) && n < 4 && s[n] >= '0' && s[n] <= '9' {
		v = v*10 + int(s[n]-'0')
		n++
	}
	return v, n
}
