package evidence_test

import (
	"encoding/hex"
	"fmt"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/policy"
)

// A hop signs a per-hop session record, WMH1, for one minute of the room
// clock; the steering server reads it back, checks it against the room and
// names it by its digest (COMPANION §5, live-metering §3). The keys come
// from fixed seeds, so the bytes below are the same on every run.
func Example() {
	hopKey := room.TestKey("edge a")
	// The room's key log lets the hop sign records of its class.
	rm, err := room.NewTestRoom("example room", room.HopEntry(hopKey.Public(), evidence.OnChipCounter))
	if err != nil {
		panic(err)
	}

	r := &evidence.Record{
		Room:  rm.ID(),
		Start: 0, End: 60_000_000, // [0 s, 60 s) on the room clock
		Class:    evidence.OnChipCounter,
		Joules:   1_250_000_000, // 1 250 J, in µJ
		Sessions: 42,
		Tracks: []evidence.Track{
			{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: 3_000_000_000},
		},
		SubscriberUs: [8]uint64{0, 600_000_000, 1_920_000_000}, // µs of delivery per layer class
	}
	if err := r.Validate(); err != nil {
		panic(err)
	}
	raw := evidence.SignRecord(r, hopKey) // sets r.Hop and r.Sig

	// The server's side: read, check the room and the signature, and ask the
	// room whether the hop may sign a record of its class.
	got, err := evidence.ParseRecord(raw)
	if err != nil {
		panic(err)
	}
	if err := got.Check(rm.ID()); err != nil {
		panic(err)
	}
	if err := rm.MaySignRecord(got.Hop, got.Class); err != nil {
		panic(err)
	}

	// The layout, checked by hand: 227 + 10 × 1 track = 237 bytes; "WMH1" and
	// version 1 first; the class at byte 85 (4, OnChipCounter), joules at
	// 86 (1 250 000 000 = 0x4a817c80, little-endian 80 7c 81 4a 00 00 00 00),
	// the track count at 98, and sig in the last 64. A separate script read
	// these bytes once against COMPANION §5, hashed bytes 0 to 172 and
	// checked the signature over "wai:hop-record" ‖ 0x01 ‖ them, and agreed
	// with the lines below.
	fmt.Println("bytes:", len(raw))
	fmt.Println("magic and version:", hex.EncodeToString(raw[:5]))
	fmt.Println("class and joules:", hex.EncodeToString(raw[85:94]))
	fmt.Println("tracks:", raw[98], hex.EncodeToString(raw[99:109]))
	fmt.Println("digest:", got.Digest())
	fmt.Println("in the window [0 s, 300 s):", got.InWindow(0, 300_000_000))

	// Output:
	// bytes: 237
	// magic and version: 574d483101
	// class and joules: 04807c814a00000000
	// tracks: 1 0102005ed0b200000000
	// digest: 8706aebcae369d23801a575907236d311593a54c836ac62ca62a67a71bf735ca
	// in the window [0 s, 300 s): true
}

// A pathway's evidence over the window (§5): two hops, an edge and an
// interior one, each sign a record per minute; at t = 130 s with L = 10 s
// the window is the two whole minutes [0 s, 120 s), both hops tile it, and
// the figure is J / D with J every record's joules and D the media bytes the
// edge hop sent (basis 1, §5.3).
func ExampleCompute() {
	edge, interior := room.TestKey("edge a"), room.TestKey("interior a")
	p := &policy.Policy{
		PeriodUs: 60_000_000, WindowUs: 120_000_000, LagUs: 10_000_000,
		Basis: policy.PerByte,
		Pathways: []policy.Pathway{{ID: "cdn-a", Base: policy.NoBase, Hops: []policy.Hop{
			{Key: edge.Public(), Place: policy.Edge},
			{Key: interior.Public(), Place: policy.Interior},
		}}},
	}
	var available []evidence.Entry
	sign := func(k sig.PrivateKey, minute, joules, bytes uint64) {
		r := &evidence.Record{
			Start: minute * 60_000_000, End: (minute + 1) * 60_000_000,
			Class: evidence.OnChipCounter, Joules: joules, Sessions: 1,
			Tracks: []evidence.Track{{Kind: evidence.KindMedia, Direction: evidence.DirOut, Bytes: bytes}},
		}
		evidence.SignRecord(r, k)
		available = append(available, evidence.Entry{Digest: r.Digest(), Record: r})
	}
	sign(edge, 0, 1_000_000, 4_000_000)
	sign(edge, 1, 3_000_000, 6_000_000)
	sign(interior, 0, 500_000, 9_000_000) // an interior hop's bytes are not delivery
	sign(interior, 1, 500_000, 9_000_000)

	a, b := evidence.PolicyWindow(p, 130_000_000)
	ev, err := evidence.Compute(p, 0, a, b, available)
	if err != nil {
		panic(err)
	}
	// By hand: J = 1 000 000 + 3 000 000 + 500 000 + 500 000 = 5 000 000 µJ,
	// D = 4 000 000 + 6 000 000 = 10 000 000 bytes: half a µJ a byte.
	fmt.Printf("window [%d, %d) µs\n", a, b)
	fmt.Println("status:", ev.Status, "class:", ev.Class.Label())
	fmt.Println("J:", ev.Joules, "D:", ev.Delivery, "records named:", len(ev.Records))

	// Output:
	// window [0, 120000000) µs
	// status: figure class: OnChipCounter
	// J: 5000000 D: 10000000 records named: 4
}
