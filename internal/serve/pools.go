package serve

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"

	"github.com/waisteer/waisteer/internal/pool"
	"github.com/waisteer/waisteer/internal/server"
	"github.com/waisteer/waisteer/report/qoe"
)

// pools reads the configuration's pools: the [steering] table, and each
// [[pool]]. Every problem internal/pool finds is placed at its key's line.
func (r *serveReader) pools(f *serveFile, cfg *Config) {
	names, paths := map[string]string{}, map[string]string{}
	add := func(k string, pf *pool.File, named bool) {
		c, probs := pool.Read(pf, named)
		for _, p := range probs {
			r.Errorf(k+"."+p.Key, "%s", p.Rule)
		}
		if len(probs) > 0 {
			return
		}
		if other, dup := names[c.Name]; dup {
			r.Errorf(k+".name", "%q is %s's name too: each pool has its own", c.Name, other)
		}
		if other, dup := paths[c.Path]; dup {
			r.Errorf(k+".path", "%q is %s's path too: each pool has its own", c.Path, other)
		}
		names[c.Name], paths[c.Path] = k, k
		cfg.Server.Pools = append(cfg.Server.Pools, c)
	}
	if f.Steering != nil {
		add("steering", f.Steering, false)
	}
	for i := range f.Pool {
		add("pool["+strconv.Itoa(i)+"]", &f.Pool[i], true)
	}
}

// roomChecks reads a [[room]]'s health checks, with a pool's defaults and
// ranges: each check URL is read as an edge's check_url.
func (r *serveReader) roomChecks(k string, f *serveRoomFile) server.RoomChecks {
	if len(f.CheckURLs) == 0 {
		for key, set := range map[string]bool{"check_every_s": f.CheckEverys != nil, "check_timeout_ms": f.CheckTimeoutMs != nil, "down_after": f.DownAfter != nil} {
			if set {
				r.Errorf(k+"."+key, "is given without check_urls, which it times")
			}
		}
		return server.RoomChecks{}
	}
	// The rules are a pool's: a pool of one edge per pathway, read by
	// internal/pool, whose problems are placed at the room's keys.
	pf := &pool.File{CheckEverys: f.CheckEverys, CheckTimeoutMs: f.CheckTimeoutMs, DownAfter: f.DownAfter}
	ids := slices.Sorted(maps.Keys(f.CheckURLs))
	for _, id := range ids {
		u := f.CheckURLs[id]
		pf.Edges = append(pf.Edges, pool.EdgeFile{Pathway: &id, CheckURL: &u})
	}
	c, probs := pool.Read(pf, false)
	for _, p := range probs {
		key := p.Key
		if i, rest, ok := edgeKey(p.Key); ok {
			key = "check_urls." + ids[i]
			if rest == ".pathway" {
				p.Rule = "the pathway id " + p.Rule
			}
		}
		r.Errorf(k+"."+key, "%s", p.Rule)
	}
	if len(probs) > 0 {
		return server.RoomChecks{}
	}
	out := server.RoomChecks{URLs: map[string]string{}}
	out.Settings.Every, out.Settings.Timeout, out.Settings.DownAfter = c.CheckEvery, c.CheckTimeout, c.DownAfter
	for _, e := range c.Edges {
		out.URLs[e.Pathway] = e.CheckURL
	}
	return out
}

// roomQoE reads a [[room]]'s qoe table with a pool's rules; a room has
// no per-client rule and no TTL of its own (its policy's), so lowest_bps
// and short_ttl_s are refused.
func (r *serveReader) roomQoE(k string, f *serveRoomFile) *qoe.Config {
	if f.QoE == nil {
		return nil
	}
	bad := false
	for key, set := range map[string]bool{"lowest_bps": f.QoE.LowestBps != nil, "short_ttl_s": f.QoE.ShortTTLs != nil} {
		if set {
			r.Errorf(k+".qoe."+key, "is a pool's: a room's order is §6's, and its TTL its policy's")
			bad = true
		}
	}
	if f.QoE.FloorBps == nil && f.QoE.Fraction == nil {
		r.Errorf(k+".qoe", "neither floor_bps nor fraction is set: nothing would ever move")
		return nil
	}
	c, probs := pool.Read(&pool.File{QoE: f.QoE}, false)
	for _, p := range probs {
		r.Errorf(k+"."+p.Key, "%s", p.Rule)
	}
	if len(probs) > 0 || bad {
		return nil
	}
	return &c.QoE.Config
}

// edgeKey reads "edges[I]REST".
func edgeKey(key string) (int, string, bool) {
	const pre = "edges["
	if len(key) <= len(pre) || key[:len(pre)] != pre {
		return 0, "", false
	}
	end := len(pre)
	for end < len(key) && key[end] != ']' {
		end++
	}
	i, err := strconv.Atoi(key[len(pre):end])
	if err != nil || end == len(key) {
		return 0, "", false
	}
	return i, key[end+1:], true
}

// reload reads the configuration's file again and gives the server its
// pools and its certificate (SIGHUP). A file that does not read (a
// certificate pair that does not load included), or pools the server
// refuses, change nothing, and the log says why. Rooms are read at start
// only.
func reload(ctx context.Context, cfg *Config, srv *server.Server, logger *slog.Logger) {
	next, err := Load(cfg.source, cfg.getenv)
	if err == nil {
		err = srv.ReloadPools(ctx, next.Server.Pools)
	}
	if err != nil {
		logger.Error("the configuration was not reloaded", "file", cfg.source, "err", err)
		return
	}
	reloadCert(cfg, next, logger) // tls.go
	for _, w := range next.Warnings {
		logger.Warn(w)
	}
	if !sameRooms(cfg.Server.Rooms, next.Server.Rooms) {
		logger.Warn("the configuration's rooms changed: they are read at start only; restart the server to steer by them", "file", cfg.source)
	}
	logger.Info("configuration reloaded", "file", cfg.source, "pools", len(next.Server.Pools))
}

// sameRooms reports whether two configurations' rooms are the same.
func sameRooms(a, b []server.RoomConfig) bool {
	return slices.EqualFunc(a, b, func(x, y server.RoomConfig) bool {
		return bytes.Equal(x.Descriptor, y.Descriptor) && bytes.Equal(x.KeyLogHead, y.KeyLogHead) &&
			bytes.Equal(x.Policy, y.Policy) && x.SteeringKey.Public() == y.SteeringKey.Public() &&
			x.Checks.Settings == y.Checks.Settings && maps.Equal(x.Checks.URLs, y.Checks.URLs)
	})
}
