// Package dashboard is the operator's page (issue 18): HTML, CSS and
// JavaScript embedded in the binary and served at /dashboard, with no
// build step and no request to any other host. The page signs in with the
// operator's token, kept for the tab only (sessionStorage), and polls the
// server's operator routes (internal/server's /v1/dashboard and
// /v1/dashboard/inspect).
package dashboard

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// files is the assets, by name.
var files, _ = fs.Sub(assets, "assets")

// Serve answers GET /dashboard (the page) and /dashboard/{file} (its
// assets). Every answer forbids framing and any origin but the server's
// own (the page asks nothing of another host), and is not cached, so that
// a new binary's page is the one served.
func Serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/dashboard")
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(files, name)
	if err != nil || strings.Contains(name, "/") {
		http.Error(w, "no such file of the dashboard", http.StatusNotFound)
		return
	}
	h := w.Header()
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(b)
}
