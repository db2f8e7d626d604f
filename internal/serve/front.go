package serve

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/waisteer/waisteer/internal/front/origin"
	"github.com/waisteer/waisteer/internal/server"
)

// frontFile is the [front] table (issue 13).
type frontFile struct {
	Origin         *string             `toml:"origin"`
	Timeout        *string             `toml:"timeout" want:"duration"`
	MaxBytes       *int64              `toml:"max_bytes"`
	CacheMS        *int64              `toml:"cache_ms"`
	MaxStreams     *int64              `toml:"max_streams"`
	Bases          map[string]string   `toml:"bases"`
	RedirectAgents []string            `toml:"redirect_agents"`
	BackupAgents   []string            `toml:"backup_agents"`
	SteerAgents    []string            `toml:"steer_agents"`
	Playlists      []frontPlaylistFile `toml:"playlists"`
}

type frontPlaylistFile struct {
	Path *string `toml:"path"`
	Pool *string `toml:"pool"`
	Room *string `toml:"room"`
}

// DefaultFrontCache is the longest the front keeps an origin's answer
// when cache_ms is not given (issue 28, "An origin cache"): a second. A
// live playlist's target duration is seconds (2 to 10), and a player
// reloads it every target duration (RFC 8216 §6.3.4, half of it when
// unchanged); kept a second, a new segment reaches a viewer at most a
// second late, within every player's reload interval, while a thousand
// viewers reloading within that second are one origin fetch. The origin's
// own max-age, when shorter, wins.
const DefaultFrontCache = time.Second

// originBase is the origin as origin.New takes it: a URL as written, or
// a directory, which a relative path names relative to the file's
// directory (as every other path of the file does), made absolute since
// origin.New takes no relative directory (issue 28). A directory that is
// missing or is no directory is refused here, naming the path it was
// resolved to.
func (r *serveReader) originBase(s string) (string, bool) {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" {
		return s, true // http, https or file: origin.New judges it
	}
	dir, err := filepath.Abs(r.path(s))
	if err != nil {
		r.Errorf("front.origin", "%q: %v", s, err)
		return "", false
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Errorf("front.origin", "%q is neither an http:// or https:// URL nor a directory: %s does not exist", s, dir)
		return "", false
	case err != nil:
		r.Errorf("front.origin", "the directory %s: %v", dir, errors.Unwrap(err))
		return "", false
	case !st.IsDir():
		r.Errorf("front.origin", "%q is neither an http:// or https:// URL nor a directory: %s is not a directory", s, dir)
		return "", false
	}
	return dir, true
}

// front reads the [front] table: its origin (an HTTP base URL, or a
// directory relative to the file) and each playlist path with the pool or
// room that steers it.
func (r *serveReader) front(f *frontFile, cfg *Config) {
	if f == nil {
		return
	}
	fc := &server.FrontConfig{Bases: map[string]string{}, RedirectAgents: f.RedirectAgents, BackupAgents: f.BackupAgents, SteerAgents: f.SteerAgents}
	for _, l := range []struct {
		key  string
		list []string
	}{{"redirect_agents", f.RedirectAgents}, {"backup_agents", f.BackupAgents}, {"steer_agents", f.SteerAgents}} {
		for i, p := range l.list {
			if strings.TrimSpace(p) == "" {
				r.Errorf("front."+l.key+"["+strconv.Itoa(i)+"]", "an empty pattern would name every player")
			}
		}
	}
	o := origin.Options{Timeout: r.duration("front.timeout", f.Timeout, 0)}
	if f.MaxBytes != nil {
		if *f.MaxBytes < 1024 || *f.MaxBytes > 64<<20 {
			r.Errorf("front.max_bytes", "%d is not 1024 to 67108864", *f.MaxBytes)
		}
		o.MaxBytes = *f.MaxBytes
	}
	fc.CacheTTL = DefaultFrontCache
	if f.CacheMS != nil {
		if *f.CacheMS < 0 || *f.CacheMS > 60000 {
			r.Errorf("front.cache_ms", "%d is not 0 (no cache) to 60000", *f.CacheMS)
		}
		fc.CacheTTL = time.Duration(*f.CacheMS) * time.Millisecond
	}
	if f.MaxStreams != nil {
		if *f.MaxStreams < 1 || *f.MaxStreams > 1<<20 {
			r.Errorf("front.max_streams", "%d is not 1 to 1048576 (the segments passed through at once)", *f.MaxStreams)
		} else {
			fc.MaxStreams = int(*f.MaxStreams)
		}
	}
	switch {
	case f.Origin == nil || *f.Origin == "":
		r.Errorf("front.origin", "is needed: the HTTP base URL or the directory the playlists come from")
	default:
		base, ok := r.originBase(*f.Origin)
		if !ok {
			break
		}
		og, err := origin.New(base, o)
		if err != nil {
			r.Errorf("front.origin", "%v", err)
		}
		fc.Origin = og
	}
	for id, b := range f.Bases {
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			r.Errorf("front.bases."+id, "%q is not an http or https base URL (scheme://host[:port][/path], no query)", b)
			continue
		}
		fc.Bases[id] = b
	}
	if len(f.Playlists) == 0 {
		r.Errorf("front.playlists", "at least one [[front.playlists]] is needed")
	}
	seen := map[string]int{}
	for i, p := range f.Playlists {
		k := "front.playlists[" + strconv.Itoa(i) + "]"
		pl := server.FrontPlaylist{}
		switch {
		case p.Path == nil:
			r.Errorf(k+".path", "is needed")
			continue
		case !strings.HasPrefix(*p.Path, "/") || strings.ContainsAny(*p.Path, "?#") || strings.Contains(*p.Path, "//") || strings.Contains(*p.Path, "/../") || strings.Contains(*p.Path, "/./"):
			r.Errorf(k+".path", "%q is not an absolute path without a query, dot or empty segments", *p.Path)
			continue
		}
		pl.Path = *p.Path
		if j, dup := seen[pl.Path]; dup {
			r.Errorf(k+".path", "%q is playlists[%d]'s too", pl.Path, j)
		}
		seen[pl.Path] = i
		switch {
		case p.Pool != nil && p.Room != nil:
			r.Errorf(k+".room", "give pool or room, not both")
		case p.Room != nil:
			pl.Room = *p.Room
		case p.Pool != nil:
			pl.Pool = *p.Pool
		}
		if p.Room == nil {
			found := false
			for _, c := range cfg.Server.Pools {
				found = found || c.Name == pl.Pool
			}
			if !found {
				r.Errorf(k+".pool", "no pool named %q (the [steering] table is \"\")", pl.Pool)
			}
		}
		fc.Playlists = append(fc.Playlists, pl)
	}
	cfg.Server.Front = fc
}
