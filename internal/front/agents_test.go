package front

import "testing"

// User-Agents as their makers publish them (issue 28, Player classes).
//
// Samsung Developers, "Retrieving Platform Information", the table of user
// agent strings by Tizen version and year model
// (developer.samsung.com/smarttv/develop/guides/fundamentals/retrieving-platform-information.html).
const (
	tizen2024 = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 8.0) AppleWebKit/537.36 (KHTML, like Gecko) 108.0.5359.1/8.0 TV Safari/537.36"
	tizen2023 = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 7.0) AppleWebKit/537.36 (KHTML, like Gecko) 94.0.4606.31/7.0 TV Safari/537.36"
	tizen2022 = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.5) AppleWebKit/537.36 (KHTML, like Gecko) 85.0.4183.93/6.5 TV Safari/537.36"
	tizen2021 = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) 76.0.3809.146/6.0 TV Safari/537.36"
	tizen2020 = "Mozilla/5.0 (SMART-TV; LINUX; Tizen 5.5) AppleWebKit/537.36 (KHTML, like Gecko) 69.0.3497.106.1/5.5 TV Safari/537.36"
	tizen2016 = "Mozilla/5.0 (SMART-TV; Linux; Tizen 2.4.0) AppleWebKit/538.1 (KHTML, like Gecko) Version/2.4.0 TV Safari/538.1"
)

// LG webOS TV Developer, "Web API and Web Engine"
// (webostv.developer.lge.com/develop/specifications/web-api-and-web-engine):
// webOS TV 22 runs Chromium 87, 23 Chromium 94, 24 Chromium 108, 6.x
// Chromium 79; its userAgent examples have the form of webOS4 below. The
// full strings of 22 to 24 are those @enact/webos (LG's Enact) tests its
// webOS detection with (platform/tests/platform-specs.js).
const (
	webOS24 = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/108.0.5359.211 Safari/537.36 WebAppManager"
	webOS23 = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/94.0.4606.128 Safari/537.36 WebAppManager"
	webOS22 = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/87.0.4280.88 Safari/537.36 WebAppManager"
	webOS6  = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.79 Safari/537.36 WebAppManager"
	webOS4  = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/53.0.2785.34 Safari/537.36 WebAppManager"
	webOS1  = "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.41 (KHTML, like Gecko) Large Screen WebAppManager Safari/537.41"
)

type classCase struct {
	ua     string
	class  Class
	family string
	rule   Rule
}

func checkClasses(t *testing.T, a agents, cases []classCase) {
	t.Helper()
	for _, c := range cases {
		class, fam, rule := a.classify(c.ua)
		if class != c.class || fam != c.family || rule != c.rule {
			t.Errorf("%q: %s %s by %s, want %s %s by %s", c.ua, class, fam, rule, c.class, c.family, c.rule)
		}
	}
}

// TestClassify: the OTT seed's players that get neither steering nor
// backups (VLC, ffmpeg, mpv, Kodi, no User-Agent) and the issue's
// GStreamer are redirected; browsers, AVPlayer and Media3 steer; each by
// its built-in rule.
func TestClassify(t *testing.T) {
	checkClasses(t, newAgents(nil, nil, nil), []classCase{
		{"VLC/3.0.20 LibVLC/3.0.20", RedirectOnly, "vlc", RulePlayer},
		{"Lavf/60.16.100", RedirectOnly, "ffmpeg", RulePlayer},
		{"mpv 0.37.0", RedirectOnly, "mpv", RulePlayer},
		{"Kodi/21.0 (X11; Linux x86_64)", RedirectOnly, "kodi", RulePlayer},
		{"GStreamer souphttpsrc 1.22", RedirectOnly, "gstreamer", RulePlayer},
		{"", RedirectOnly, "none", RuleNoUserAgent},
		{"  ", RedirectOnly, "none", RuleNoUserAgent},
		{"AppleCoreMedia/1.0.0.21A5248v (iPhone; U; CPU OS 17_0 like Mac OS X)", Steers, "avplayer", RuleDefault},
		{"ExoPlayerLib/2.19.1", Steers, "media3", RuleDefault},
		{"Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0", Steers, "firefox", RuleDefault},
	})
}

// TestClassifyTVs (issue 28, Player classes): current smart-TV firmware
// steers (the multi-CDN seed's pitfall 5: recent Tizen and webOS players
// steer): Tizen 6.5 (2022) and later, whose User-Agent carries SMART-TV as
// the old ones do, and webOS TV 22 (Chromium 87) and later; older firmware
// keeps its backups. On bd4ceba the Tizen 2022 to 2024 and every webOS
// User-Agent got backups.
func TestClassifyTVs(t *testing.T) {
	checkClasses(t, newAgents(nil, nil, nil), []classCase{
		{tizen2024, Steers, "tizen", RuleCurrentTV},
		{tizen2023, Steers, "tizen", RuleCurrentTV},
		{tizen2022, Steers, "tizen", RuleCurrentTV},
		{tizen2021, BackupOnly, "tizen", RuleOldTV},
		{tizen2020, BackupOnly, "tizen", RuleOldTV},
		{tizen2016, BackupOnly, "tizen", RuleOldTV},
		{webOS24, Steers, "webos", RuleCurrentTV},
		{webOS23, Steers, "webos", RuleCurrentTV},
		{webOS22, Steers, "webos", RuleCurrentTV},
		{webOS6, BackupOnly, "webos", RuleOldTV},
		{webOS4, BackupOnly, "webos", RuleOldTV},
		{webOS1, BackupOnly, "webos", RuleOldTV},
		// A later Tizen than any listed (two digits) is current too; one
		// whose version cannot be read is not.
		{"Mozilla/5.0 (SMART-TV; LINUX; Tizen 10.0) AppleWebKit/537.36", Steers, "tizen", RuleCurrentTV},
		{"Mozilla/5.0 (SMART-TV; LINUX; Tizen) AppleWebKit/537.36", BackupOnly, "tizen", RuleOldTV},
		{"Mozilla/5.0 (Web0S; Linux/SmartTV) Chrome/", BackupOnly, "webos", RuleOldTV},
	})
}

// TestClassifyOperator (issue 28): the operator's lists win over the
// built-in classes, and among themselves redirect_agents, then
// backup_agents, then steer_agents decide (a player two lists name gets
// the class that asks less of it).
func TestClassifyOperator(t *testing.T) {
	a := newAgents([]string{"MyBox/"}, []string{"hls.js-nosteer", "vlc/4", "Chrome/79."}, []string{"Tizen 6.0", "MyBox/2", "Lavf/61", "Web0S"})
	checkClasses(t, a, []classCase{
		{"MyBox/1.0", RedirectOnly, "other", RuleRedirectAgents},
		{"MyBox/2.0", RedirectOnly, "other", RuleRedirectAgents}, // redirect_agents before steer_agents
		{"VLC/4.0", BackupOnly, "vlc", RuleBackupAgents},         // over the built-in redirect
		{webOS6, BackupOnly, "webos", RuleBackupAgents},          // backup_agents before steer_agents
		{webOS4, Steers, "webos", RuleSteerAgents},               // steer_agents over the built-in old TV
		{tizen2021, Steers, "tizen", RuleSteerAgents},            // likewise
		{"Lavf/61.1.100", Steers, "ffmpeg", RuleSteerAgents},     // over the built-in redirect
		{"Lavf/60.16.100", RedirectOnly, "ffmpeg", RulePlayer},   // not named: built in
		{tizen2024, Steers, "tizen", RuleCurrentTV},              // not named: built in
		{"Mozilla/5.0 (X11) Chrome/156.0 hls.js-nosteer", BackupOnly, "chrome", RuleBackupAgents},
	})
	// An empty pattern names no one (the configuration refuses it).
	checkClasses(t, newAgents([]string{""}, []string{""}, []string{""}), []classCase{{tizen2016, BackupOnly, "tizen", RuleOldTV}})
}
