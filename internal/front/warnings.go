package front

// Warnings (issue 28, "Pathways the content lacks"): the front writes a
// PATHWAY-ID (a pool's clone_from, a room's first pathway) into the
// steering tag of an HLS playlist and a defaultServiceLocation into the
// ContentSteering element of an MPD, and a player starts on that pathway
// (rfc8216bis-22 §4.4.6.6; DASH-IF Content Steering). When the content
// declares no such pathway, the player has nothing to start on by that
// name: with clone_from = "." and every variant declaring another
// PATHWAY-ID, hls.js finds no level of pathway "."; dash.js finds no
// BaseURL of serviceLocation ".". The front serves the playlist anyway
// (the operator's content is the operator's), and says so: a warning
// logged once per playlist path and name, listed in the front's status
// (Opens.Warnings) until a later check finds the pathway, and counted in
// the metrics.
//
// A playlist is checked when the front first serves it with its line,
// then at most every warnCheckEvery; Check checks the configured exact
// paths at start, before any viewer comes.
//
// The pathways an HLS playlist declares are its variants' PATHWAY-IDs, "."
// for a variant with none (§4.4.6.2: the default); an MPD's are its
// BaseURLs' serviceLocations (dash.ServiceLocations). A tag that writes no
// PATHWAY-ID, or an element with no defaultServiceLocation, names none and
// is not checked.

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waisteer/waisteer/internal/front/dash"
	"github.com/waisteer/waisteer/internal/front/hls"
	"github.com/waisteer/waisteer/internal/front/origin"
)

// warnCheckEvery is how often one playlist is checked again.
const warnCheckEvery = 10 * time.Second

// Warning is a playlist served naming a pathway it does not declare.
type Warning struct {
	Path     string    `json:"path"`
	Format   string    `json:"format"`  // "hls" or "dash"
	Pathway  string    `json:"pathway"` // the PATHWAY-ID or defaultServiceLocation written
	Declared []string  `json:"declared"`
	Steering string    `json:"steering"`
	Since    time.Time `json:"since"`
}

// warnings are the front's warnings and when each playlist was checked.
type warnings struct {
	mu      sync.Mutex
	checked map[string]time.Time // key → last check
	current map[string]Warning   // key → the warning standing
	logged  map[string]bool      // key → logged once already
}

func warnKey(path, format, pathway string) string { return path + "\x00" + format + "\x00" + pathway }

// named is the value of attr="…" in s, and whether s has one.
func named(s, attr string) (string, bool) {
	_, v, ok := strings.Cut(s, attr+`="`)
	if !ok {
		return "", false
	}
	v, _, ok = strings.Cut(v, `"`)
	return v, ok
}

// checkPathways checks the steered playlist b at path against the tag or
// element the front writes into it, at most every warnCheckEvery (always
// when force).
func (f *Front) checkPathways(path string, st Steering, b []byte, hlsTag, dashEl string, force bool) {
	var format, pathway string
	isMPD := dash.IsMPD(b)
	var ok bool
	if isMPD {
		format = "dash"
		pathway, ok = named(dashEl, "defaultServiceLocation")
	} else {
		format = "hls"
		pathway, ok = named(hlsTag, "PATHWAY-ID")
	}
	if !ok {
		return
	}
	key := warnKey(path, format, pathway)
	now := time.Now()
	w := &f.warn
	w.mu.Lock()
	if last, seen := w.checked[key]; seen && !force && now.Sub(last) < warnCheckEvery {
		w.mu.Unlock()
		return
	}
	if w.checked == nil {
		w.checked, w.current, w.logged = map[string]time.Time{}, map[string]Warning{}, map[string]bool{}
	}
	w.checked[key] = now
	w.mu.Unlock()

	var declared []string
	if isMPD {
		locs, err := dash.ServiceLocations(b)
		if err != nil {
			return // SetSteering read it; not reached
		}
		declared = locs
	} else {
		vs, err := hls.Variants(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, v := range vs {
			id := v.PathwayID
			if id == "" {
				id = "."
			}
			if !seen[id] {
				seen[id] = true
				declared = append(declared, id)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Contains(declared, pathway) {
		delete(w.current, key)
		return
	}
	if _, standing := w.current[key]; !standing {
		w.current[key] = Warning{Path: path, Format: format, Pathway: pathway, Declared: declared, Steering: st.Name(), Since: now.UTC()}
	}
	if !w.logged[key] {
		w.logged[key] = true
		what := "PATHWAY-ID"
		if isMPD {
			what = "defaultServiceLocation"
		}
		f.log.Warn("the playlist declares no pathway the front names in its steering line: players find nothing to start on by that name",
			slog.String("path", path), slog.String("steering", st.Name()), slog.String(what, pathway),
			slog.Any("declared", declared))
	}
}

// Warnings are the warnings standing, by path, format and pathway.
func (f *Front) Warnings() []Warning {
	w := &f.warn
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Warning, 0, len(w.current))
	for _, k := range slices.Sorted(maps.Keys(w.current)) {
		out = append(out, w.current[k])
	}
	return out
}

// Check fetches each configured exact path whose steering is on from the
// origin and checks it (the doc above): at start, so that a playlist
// that lacks the pathway is reported before a viewer opens it. A path the
// origin does not answer with a playlist is left to the first viewer.
func (f *Front) Check(ctx context.Context) {
	for _, p := range slices.Sorted(maps.Keys(f.exact)) {
		st := f.exact[p]
		hlsTag, dashEl := st.Tags()
		if hlsTag == "" && dashEl == "" {
			continue
		}
		res, err := f.origin.Fetch(ctx, &origin.Request{Path: p})
		if err != nil || res.Status != http.StatusOK {
			continue
		}
		if k, err := hls.Classify(res.Body); (err != nil || k != hls.Multivariant) && !dash.IsMPD(res.Body) {
			continue
		}
		f.checkPathways(p, st, res.Body, hlsTag, dashEl, true)
	}
}
