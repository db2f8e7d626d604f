package roomsteer

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/guard"
	"github.com/waisteer/waisteer/internal/health"
	"github.com/waisteer/waisteer/internal/overlay"
	"github.com/waisteer/waisteer/policy"
)

// Checks are the health checks of an energy room's pathways (issue 12
// item 8): while a pathway's checks fail, the room steers by a policy its
// steering key signs, the operator's but for that pathway's latency_ms,
// above the ceiling (overlay.Policy), so that §6.1 keeps the pathway outside
// the limits for every client, one that reports it as its current pathway
// included (issue 26 item 4), and every decision still verifies (§9); once
// it passes again, by the operator's own policy.
type Checks struct {
	Settings health.Settings
	URLs     map[string]string // pathway id → its check URL
}

// roomHealth is what a Room keeps of its pathways' health.
type roomHealth struct {
	checker *health.Checker
	mu      sync.Mutex // guards down
	down    map[string]bool
}

// openChecks makes the room's checker, not yet started: the steering key
// must be allowed to sign the room's policies (COMPANION §4.2), since it
// signs the one a pathway's health calls for.
func (h *Room) openChecks(c Checks) error {
	if len(c.URLs) == 0 {
		return nil
	}
	st := h.state.Load()
	if err := st.room.MaySignPolicy(h.signer); err != nil {
		return api.Errorf(api.SteeringKey, "the room's pathways have check URLs, and the steering key %s, which signs the policy a pathway's health calls for, may not sign the room's policies: %v", h.signer, err)
	}
	var ts []health.Target
	for _, id := range slices.Sorted(maps.Keys(c.URLs)) {
		ts = append(ts, health.Target{Name: id, URL: c.URLs[id]})
	}
	hh := &roomHealth{down: map[string]bool{}}
	wake := h.overlayWake()
	ch, err := health.New(c.Settings, ts, health.Options{
		OnChange: func(c health.Change) {
			hh.mu.Lock()
			if c.Up {
				delete(hh.down, c.Name)
			} else {
				hh.down[c.Name] = true
			}
			hh.mu.Unlock()
			wake()
		},
		Logger: h.d.Log.With("room", h.id.String()),
	})
	if err != nil {
		return err
	}
	hh.checker = ch
	h.health = hh
	return nil
}

// overlayWake makes the room's channel of changes to its overlay policy
// (health, QoE) and returns what signals one.
func (h *Room) overlayWake() func() {
	if h.wake == nil {
		h.wake = make(chan struct{}, 1)
	}
	return func() {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// downNow is the set of the room's pathways kept out of the limits under
// base: those whose checks fail, and those the QoE moved off (qoeDown).
func (h *Room) downNow(base *policy.Policy) map[string]bool {
	var down map[string]bool
	if h.health != nil {
		h.health.mu.Lock()
		down = maps.Clone(h.health.down)
		h.health.mu.Unlock()
	}
	return h.qoeDown(base, down)
}

// runOverlay checks the room's pathways until ctx ends, and steers by the
// policy their health and QoE call for after each change.
func (h *Room) runOverlay(ctx context.Context) {
	if h.health != nil {
		h.health.checker.Start(ctx)
		defer h.health.checker.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		guard.Do(h.d.Log, "overlay", func() {
			h.opMu.Lock()
			defer h.opMu.Unlock()
			_, _, aerr := h.install(ctx, h.base, false) // the operator's policy is stored active already
			if aerr != nil {
				h.d.Log.Error("steering by the policy the pathways' health calls for", "room", h.id.String(), "err", aerr.Detail)
			}
		})
	}
}

// healthPolicy is the policy the room steers by under base while the
// pathways down are down: overlay.Policy, signed by the room's steering key.
func (h *Room) healthPolicy(base *policy.Policy, down map[string]bool) (*policy.Policy, error) {
	return overlay.Policy(base, down, h.key)
}

// install makes base the room's operator policy and steers by the policy
// its pathways' health calls for (healthPolicy): the state checked
// (newState), the routes rebuilt, both policies stored (the operator's as
// the room's active one, which a restart steers by, and the health
// policy by digest, for auditors), the evidence rebuilt, then the state
// published. It returns the states before and after. h.opMu is held.
func (h *Room) install(ctx context.Context, base *policy.Policy, persist bool) (cur, st *State, aerr *api.Error) {
	cur = h.state.Load()
	down := h.downNow(base)
	eff, err := h.healthPolicy(base, down)
	if err != nil {
		return cur, nil, api.Errorf(api.Internal, "signing the policy for the pathways down: %v", err)
	}
	if eff.Digest() == cur.digest && base == h.base {
		return cur, cur, nil
	}
	st, err = newState(cur.room, cur.descriptor, cur.head, eff, h.signer)
	if err != nil {
		return cur, nil, api.From(err)
	}
	h.d.Routes.Lock()
	defer h.d.Routes.Unlock()
	retired := h.retired
	for _, r := range cur.steer {
		if !slices.ContainsFunc(st.steer, r.Equal) && !slices.ContainsFunc(retired, r.Equal) {
			retired = append(retired[:len(retired):len(retired)], r)
		}
	}
	prev := h.retired
	h.retired = retired
	publish, err := h.d.Routes.Build(h, st)
	if err != nil {
		h.retired = prev
		return cur, nil, api.From(err)
	}
	put := func() error {
		if persist {
			if err := h.d.Store.PutPolicy(ctx, h.id, base.Digest(), base.Bytes(), true); err != nil {
				return err
			}
		}
		if eff != base {
			return h.d.Store.PutPolicy(ctx, h.id, eff.Digest(), eff.Bytes(), false)
		}
		return nil
	}
	if err := h.replace(ctx, st, put); err != nil {
		h.retired = prev
		return cur, nil, h.d.Fails.Failed("installing the policy", err)
	}
	h.base = base
	h.d.KnowPolicy(base)
	h.d.KnowPolicy(eff)
	publish()
	if !slices.Equal(cur.ids, st.ids) {
		// A session's first pathway is an index into the policy it was
		// decided under; a policy of the same ids in the same order keeps them.
		if err := h.d.Loads.Reset(ctx, h.id); err != nil {
			h.d.Log.Error("resetting the loads after a new policy", "room", h.id.String(), "err", err)
		}
	}
	if eff != base {
		h.d.Log.Warn("steering by the health policy: pathways down are past the latency ceiling", "room", h.id.String(),
			"policy", st.digest.String(), "operator_policy", base.Digest().String(), "down", overlay.List(base, down))
	} else if cur.digest != st.digest {
		h.d.Log.Info("steering by the operator's policy", "room", h.id.String(), "policy", st.digest.String(), "previous", cur.digest.String())
	}
	return cur, st, nil
}

// pathwayHealth is a pathway's health, and false for a pathway with no
// check URL.
func (h *Room) pathwayHealth(id string) (health.Status, bool) {
	if h.health == nil {
		return health.Status{}, false
	}
	return h.health.checker.Status(id)
}

// OperatorPolicy is the operator's policy of the room.
func (h *Room) OperatorPolicy() *policy.Policy {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	return h.base
}

// BasePolicy is the operator's policy of the room, read while Hold is
// held (OperatorPolicy takes the hold itself).
func (h *Room) BasePolicy() *policy.Policy { return h.base }
