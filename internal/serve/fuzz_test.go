package serve_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/waisteer/waisteer/internal/demo"
	"github.com/waisteer/waisteer/internal/limit"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/internal/testca"
)

// FuzzServeConfig: no configuration makes the reader panic, and one it
// accepts has at least one room, each with its descriptor and steering key
// (the operator's file is outside bytes too), its budgets and trusted
// proxies are ones the limits read, and TLS comes with a checked pair.
// Seeds: the documented example and the mistakes above.
func FuzzServeConfig(f *testing.F) {
	dir := f.TempDir()
	ca, err := testca.New()
	if err != nil {
		f.Fatal(err)
	}
	r, err := demo.NewRoom("fuzz", "http://127.0.0.1")
	if err != nil {
		f.Fatal(err)
	}
	if _, err := r.WriteFiles(dir, "127.0.0.1:0", "data"); err != nil {
		f.Fatal(err)
	}
	if _, err := ca.WriteFiles(dir, "127.0.0.1"); err != nil {
		f.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "cmd", "waisteer", "testdata", "serve", "example.toml"))
	if err != nil {
		f.Fatal(err)
	}
	const front = "[steering]\n[[steering.edges]]\npathway = \"a\"\n[front]\n"
	const frontPlaylist = "[[front.playlists]]\npath = \"/hls/\"\n"
	const room = "[[room]]\ndescriptor = \"room.cbor\"\nkeylog = \"keylog.cbor\"\npolicy = \"policy.wsp1\"\nsteering_key = \"steer.key\"\n"
	for _, s := range []string{string(example), room, room + room, "retention = \"71s\"\n" + room,
		room + "[room.qoe]\nfraction = 0.5\nmin_sessions = 3\n", room + "[room.qoe]\nlowest_bps = 1\n",
		"[http]\nread_timeout = \"0s\"\n" + room, "listen = \"8080\"\n" + room, "colour = 1\n", "listen = \n",
		"[steering]\nttl_s = 0\n[[steering.edges]]\npathway = \"a\"\nhost = \"a:80\"\n",
		"[[pool]]\nname = \"p\"\npath = \"/p\"\n[[pool.edges]]\npathway = \"a\"\n" + room,
		"[store]\nengine = \"postgres\"\ndsn_env = \"D\"\n" + room, "[store]\nengine = \"postgres\"\ndsn_file = \"room.cbor\"\n" + room,
		"data_dir = \"d\"\n[store]\nengine = \"bbolt\"\n" + room,
		"[limits]\naddress_sessions_per_s = 0.5\naddress_sessions_burst = 2\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n" + room,
		"[limits]\nnetwork_decisions_per_s = -3\ntrusted_proxies = [\"10.1.0.0/8\"]\n" + room,
		// Issue 28: a front over a directory relative to the file, one
		// that is a file, one missing, and the player classes' lists.
		front + "origin = \".\"\nsteer_agents = [\"Tizen 8\"]\nbackup_agents = [\"SMART-TV\"]\n" + frontPlaylist,
		front + "origin = \"room.cbor\"\n" + frontPlaylist, front + "origin = \"nope\"\n" + frontPlaylist,
		front + "origin = \"file:room.cbor\"\nsteer_agents = [\"\"]\n" + frontPlaylist,
		// Issue 28, HTTPS: the pair under [http], by its old names, both,
		// half of it, and files that are not a pair.
		"[http]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n" + room, "tls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n" + room,
		"tls_cert = \"cert.pem\"\n[http]\nkey = \"key.pem\"\n" + room, "[http]\nengine = \"fasthttp\"\ncert = \"cert.pem\"\n" + room,
		"[http]\ncert = \"key.pem\"\nkey = \"cert.pem\"\n" + room, "[http]\ncert = \"ca.pem\"\nkey = \"steer.key\"\n" + room} {
		f.Add([]byte(s))
	}
	name := filepath.Join(dir, "serve.toml")
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, err := serve.Parse(name, doc, func(string) string { return "" })
		if err != nil {
			return
		}
		if len(cfg.Server.Rooms) == 0 && len(cfg.Server.Pools) == 0 {
			t.Error("accepted with nothing to steer")
		}
		switch cfg.Store.Engine {
		case serve.StorePostgres:
			if cfg.Store.DSN == "" || cfg.DataDir != "" {
				t.Errorf("PostgreSQL accepted with DSN %q and data_dir %q", cfg.Store.DSN, cfg.DataDir)
			}
		case serve.StoreBolt:
			if cfg.Store.DSN != "" {
				t.Errorf("bbolt accepted with a DSN")
			}
		default:
			t.Errorf("store engine %q accepted", cfg.Store.Engine)
		}
		if (cfg.TLS == nil) != (cfg.Cert == nil) || cfg.TLS != nil && (cfg.TLS.MinVersion != tls.VersionTLS12 || cfg.Cert.Pair().Certificate.Leaf == nil) {
			t.Errorf("TLS %+v accepted with the pair %+v", cfg.TLS, cfg.Cert)
		}
		for i, rc := range cfg.Server.Rooms {
			if rc.Descriptor == nil || rc.SteeringKey.IsZero() {
				t.Errorf("room %d accepted without its descriptor or steering key", i)
			}
		}
		l := cfg.Server.Limits
		for _, r := range []limit.Rate{l.AddressDecisions, l.AddressSessions, l.NetworkDecisions, l.NetworkSessions} {
			if r.PerSecond < 0 || !r.Off() && !(r.Burst >= 1) {
				t.Errorf("budget %+v accepted", r)
			}
		}
		for _, p := range l.TrustedProxies {
			if !p.IsValid() || p != p.Masked() {
				t.Errorf("trusted proxy %v accepted", p)
			}
		}
	})
}
