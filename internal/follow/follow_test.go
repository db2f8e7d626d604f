package follow

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
	"github.com/waisteer/waisteer/store"
)

// fakeRoom records what the follower asks of a room.
type fakeRoom struct {
	id     sig.Hash
	held   bool
	head   []byte
	policy sig.Hash
	peers  []evidence.Entry

	headErr, policyErr *api.Error
	heads              [][]byte
	policies           []sig.Hash
}

func (r *fakeRoom) ReadRecord(raw []byte) (*evidence.Record, error) {
	rec, err := evidence.ParseRecord(raw)
	if err != nil {
		return nil, err
	}
	return rec, rec.Check(r.id)
}

func (r *fakeRoom) AddFromPeers(es []evidence.Entry) { r.peers = append(r.peers, es...) }

func (r *fakeRoom) Hold() func() {
	r.held = true
	return func() { r.held = false }
}

func (r *fakeRoom) Head() []byte     { r.mustHold(); return r.head }
func (r *fakeRoom) Policy() sig.Hash { r.mustHold(); return r.policy }

func (r *fakeRoom) InstallHead(_ context.Context, head []byte) (uint64, *api.Error) {
	r.mustHold()
	if r.headErr != nil {
		return 0, r.headErr
	}
	r.heads = append(r.heads, head)
	r.head = head
	return 7, nil
}

func (r *fakeRoom) InstallPolicy(_ context.Context, p *policy.Policy) (sig.Hash, *api.Error) {
	r.mustHold()
	if r.policyErr != nil {
		return sig.Hash{}, r.policyErr
	}
	r.policies = append(r.policies, p.Digest())
	r.policy = p.Digest()
	return p.Digest(), nil
}

func (r *fakeRoom) mustHold() {
	if !r.held {
		panic("the room's operator lock is not held")
	}
}

type fakeRooms map[sig.Hash]*fakeRoom

func (rs fakeRooms) Room(id sig.Hash) (Room, bool) {
	r, ok := rs[id]
	return r, ok
}

// fakeStore holds one room's key log head and active policy.
type fakeStore struct {
	id     sig.Hash
	head   []byte
	policy []byte
	err    error
}

func (s *fakeStore) Rooms(context.Context) ([]store.Room, error) {
	return []store.Room{{ID: s.id, KeyLogHead: s.head}}, s.err
}

func (s *fakeStore) ActivePolicy(context.Context, sig.Hash) (sig.Hash, []byte, error) {
	d := sig.Digest(s.policy)
	if p, err := policy.Parse(s.policy); err == nil {
		d = p.Digest()
	}
	return d, s.policy, s.err
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestApply(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{Periods: 6})
	if err != nil {
		t.Fatal(err)
	}
	id := sc.Room.ID()
	other := sig.Digest([]byte("a room this server does not steer"))
	rm := &fakeRoom{id: id, head: sc.Room.HeadBytes, policy: sc.Policy.Digest()}
	st := &fakeStore{id: id, head: []byte("a newer head"), policy: sc.PolicyBytes}
	f := New(fakeRooms{id: rm}, st, discard())
	ctx := context.Background()

	b := store.FeedBatch{
		Records: []store.Record{
			{Room: id, Raw: sc.Records[0]},
			{Room: id, Raw: []byte("WMH1\x00")}, // does not read: left out
			{Room: other, Raw: sc.Records[1]},   // not steered here: left out
			{Room: id, Raw: sc.Records[2]},
		},
		Rooms:    []sig.Hash{id, other},
		Policies: []sig.Hash{id, other},
	}
	if err := f.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if len(rm.peers) != 2 || rm.peers[0].Digest != evidence.NamedDigest(sc.Records[0]) || rm.peers[1].Digest != evidence.NamedDigest(sc.Records[2]) {
		t.Fatalf("records from peers %v", rm.peers)
	}
	if len(rm.heads) != 1 || !bytes.Equal(rm.heads[0], st.head) {
		t.Fatalf("heads installed %q", rm.heads)
	}
	// The store's policy is the room's already: nothing to install.
	if len(rm.policies) != 0 {
		t.Fatalf("policies installed %v", rm.policies)
	}

	// Again: the head is the room's now, and a policy that does not read
	// is left.
	st.policy = []byte("not a policy")
	if err := f.Apply(ctx, store.FeedBatch{Rooms: []sig.Hash{id}, Policies: []sig.Hash{id}}); err != nil {
		t.Fatal(err)
	}
	if len(rm.heads) != 1 || len(rm.policies) != 0 {
		t.Fatalf("installed heads %q, policies %v", rm.heads, rm.policies)
	}

	// Another policy is installed.
	rm.policy = sig.Hash{}
	st.policy = sc.PolicyBytes
	if err := f.Apply(ctx, store.FeedBatch{Policies: []sig.Hash{id}}); err != nil {
		t.Fatal(err)
	}
	if len(rm.policies) != 1 || rm.policies[0] != sc.Policy.Digest() {
		t.Fatalf("policies installed %v", rm.policies)
	}

	// A refusal is the room's and is logged; the store's unavailability
	// fails the batch, to be followed again.
	rm.head, rm.policy = nil, sig.Hash{}
	rm.headErr = api.Errorf(api.KeyLogStale, "older")
	rm.policyErr = api.Errorf(api.PolicySigner, "not allowed")
	if err := f.Apply(ctx, store.FeedBatch{Rooms: []sig.Hash{id}, Policies: []sig.Hash{id}}); err != nil {
		t.Fatal(err)
	}
	rm.headErr = api.Errorf(api.StoreUnavailable, "down")
	if err := f.Apply(ctx, store.FeedBatch{Rooms: []sig.Hash{id}}); err == nil {
		t.Fatal("a head the store could not take: no error")
	}
	rm.policyErr = api.Errorf(api.StoreUnavailable, "down")
	if err := f.Apply(ctx, store.FeedBatch{Policies: []sig.Hash{id}}); err == nil {
		t.Fatal("a policy the store could not take: no error")
	}
	st.err = errors.New("unreachable")
	if err := f.Apply(ctx, store.FeedBatch{Rooms: []sig.Hash{id}}); !errors.Is(err, st.err) {
		t.Fatalf("the store's failure: %v", err)
	}
}

// fakeFeed fails its first calls, and then gives one batch and waits for
// the end.
type fakeFeed struct {
	mu    sync.Mutex
	fails int
	froms []store.FeedPosition
	done  chan struct{}
}

func (f *fakeFeed) FeedHead(context.Context) (store.FeedPosition, error) {
	return store.FeedPosition{}, nil
}

func (f *fakeFeed) Follow(ctx context.Context, from store.FeedPosition, fn func(store.FeedBatch) error) error {
	f.mu.Lock()
	f.froms = append(f.froms, from)
	n := len(f.froms)
	f.mu.Unlock()
	if err := fn(store.FeedBatch{At: store.FeedPosition{Records: from.Records + 1, Changes: from.Changes}}); err != nil {
		return err
	}
	if n <= f.fails {
		return errors.New("connection lost")
	}
	close(f.done)
	<-ctx.Done()
	return ctx.Err()
}

// The follower follows again from the last position applied after each
// failure, and counts the failures.
func TestFollowRetries(t *testing.T) {
	f := New(fakeRooms{}, &fakeStore{}, discard())
	feed := &fakeFeed{fails: 3, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { defer close(ended); f.Follow(ctx, feed, store.FeedPosition{Records: 10, Changes: 2}) }()
	select {
	case <-feed.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not follow again")
	}
	cancel()
	<-ended
	want := []store.FeedPosition{{Records: 10, Changes: 2}, {Records: 11, Changes: 2}, {Records: 12, Changes: 2}, {Records: 13, Changes: 2}}
	if len(feed.froms) != len(want) {
		t.Fatalf("followed from %v, want %v", feed.froms, want)
	}
	for i := range want {
		if feed.froms[i] != want[i] {
			t.Fatalf("followed from %v, want %v", feed.froms, want)
		}
	}
	var b bytes.Buffer
	f.WriteMetrics(&b)
	const metric = "# HELP waisteer_feed_failures_total Times following the other servers' writes on a shared store failed and was retried.\n# TYPE waisteer_feed_failures_total counter\nwaisteer_feed_failures_total 3\n"
	if b.String() != metric {
		t.Fatalf("metrics:\n%s\nwant:\n%s", b.String(), metric)
	}
}
