package serve_test

import (
	"strings"
	"testing"
)

// TestHTTPPublicURL (issue 28, "Trusted proxies"): [http] public_url is
// the server's base for the URLs it writes when a pool gives none:
// scheme://host[:port], http or https, nothing after; each mistake placed
// at its line and key.
func TestHTTPPublicURL(t *testing.T) {
	cfg, err := withLimits(t, "[http]\npublic_url = \"https://viewers.example:8443\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.PublicURL != "https://viewers.example:8443" {
		t.Errorf("public_url read as %q", cfg.Server.PublicURL)
	}
	if cfg, err := withLimits(t, ""); err != nil || cfg.Server.PublicURL != "" {
		t.Errorf("no public_url: %q %v", cfg.Server.PublicURL, err)
	}
	for _, c := range []struct{ url, want string }{
		{"https://viewers.example/", "serve.toml:7: http.public_url: \"https://viewers.example/\" has more than scheme://host[:port]"},
		{"ftp://viewers.example", "serve.toml:7: http.public_url: \"ftp://viewers.example\" is not an http:// or https:// URL"},
		{"https://u:p@viewers.example", "carries userinfo"},
		{"https://viewers example", "is not host[:port]"},
		{"https://viewers.example:65536", "is not host[:port]"},
		{"", "serve.toml:7: http.public_url: is empty"},
	} {
		_, err := withLimits(t, "[http]\npublic_url = \""+c.url+"\"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.url, err, c.want)
		}
	}
}
