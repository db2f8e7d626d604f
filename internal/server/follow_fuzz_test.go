package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/roomsteer"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// FuzzApplyFeed: the follower's inputs (issue 26, "find each loop's inputs
// and fuzz them") are what another server of a shared store wrote: a
// record's bytes, a room's key log head, a room's active policy. Whatever
// they hold, applying the batch neither panics nor fails on a store that
// answers; a record joins the evidence only when the room reads it
// (ReadRecord), a head is installed only when it opens with the room's
// descriptor and is newer than the server's, and a policy only when it
// parses; otherwise the server keeps what it had.
func FuzzApplyFeed(f *testing.F) {
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		f.Fatal(err)
	}
	newer := head(f, sc, 2, nil)
	next := resign(f, sc, sc.SteerKey, func(p *policy.Policy) { p.TTLs = 120 })
	f.Add(sc.Records[0], newer, next, uint8(7))
	f.Add(sc.Records[3], sc.Room.HeadBytes, sc.PolicyBytes, uint8(7))
	f.Add([]byte("WMH1\x00"), newer[:len(newer)-1], next[:40], uint8(7))
	f.Add(append(bytes.Clone(sc.Records[1]), 0), append(bytes.Clone(newer), 0), append(bytes.Clone(next), 0), uint8(5))
	id := sc.Room.ID()
	f.Fuzz(func(t *testing.T, rec, kh, pol []byte, which uint8) {
		ctx := context.Background()
		mem := store.NewMemory()
		srv, err := New(ctx, Config{
			Rooms:  []roomsteer.Config{{Descriptor: sc.Room.DescriptorBytes, KeyLogHead: sc.Room.HeadBytes, Policy: sc.PolicyBytes, SteeringKey: sc.SteerKey}},
			Clock:  newClock(t0).Load,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}, mem, store.NewLoads())
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close(ctx)
		h := srv.hubs[id]
		before := h.State()
		var b store.FeedBatch
		if which&1 != 0 {
			b.Records = []store.Record{{Digest: evidence.NamedDigest(rec), Room: id, Raw: rec}}
		}
		if which&2 != 0 {
			if err := mem.PutRoom(ctx, store.Room{ID: id, Descriptor: sc.Room.DescriptorBytes, KeyLogHead: kh}); err != nil {
				t.Fatal(err)
			}
			b.Rooms = []sig.Hash{id}
		}
		if which&4 != 0 {
			if err := mem.PutPolicy(ctx, id, sig.Digest(pol), pol, true); err != nil {
				t.Fatal(err)
			}
			b.Policies = []sig.Hash{id}
		}
		if err := srv.applyFeed(ctx, b); err != nil {
			t.Fatalf("applying the batch: %v", err)
		}
		after := h.State()

		_, readErr := before.Room().ReadRecord(rec)
		if joined := h.FromPeers() == 1; joined != (which&1 != 0 && readErr == nil) {
			t.Fatalf("record joined %v; the room reads it: %v", joined, readErr)
		}
		if !bytes.Equal(after.Head(), before.Head()) {
			rm, err := room.Open(sc.Room.DescriptorBytes, kh)
			if which&2 == 0 || !bytes.Equal(after.Head(), kh) || err != nil || rm.Head().Seq <= sc.Room.Head().Seq {
				t.Fatalf("head %x installed from %x (%v)", after.Head(), kh, err)
			}
		}
		if h.OperatorPolicy().Digest() != before.Policy().Digest() {
			if _, err := policy.Parse(pol); which&4 == 0 || err != nil {
				t.Fatalf("policy %s installed from %x (%v)", h.OperatorPolicy().Digest(), pol, err)
			}
		}
	})
}
