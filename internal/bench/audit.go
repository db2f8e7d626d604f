package bench

// `waisteer bench -audit N` (issue 16): the real server (fasthttp, bbolt,
// a room of 3 pathways, one with a capacity and one with a band) under
// the Go generator's saturated load, its hops posting, until it has made
// N decisions; then an auditor's run over its log: the tree, a sample
// verified by §9, every decision read and recounted (§9.2).

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/waisteer/waisteer/internal/client"
	"github.com/waisteer/waisteer/internal/serve"
	"github.com/waisteer/waisteer/verify/audit"
)

// auditPhase is how long each round of load lasts before the count of
// decisions is read again.
const auditPhase = 2 * time.Second

func (b *bencher) audit(ctx context.Context, w io.Writer) error {
	o := b.o
	hc := o.halfConns()
	b.o.Conns = []int{hc}
	r, err := newBenchRoom(3, o.Players)
	if err != nil {
		return err
	}
	s, err := b.startReal(ctx, r, serve.EngineFast, b.pin.serverCore(), nil, b.o.Conns)
	if err != nil {
		return err
	}
	defer s.close()
	srv := s.loads[hc]
	began := time.Now()
	var stored uint64
	for ctx.Err() == nil {
		if err := b.saturate(ctx, auditPhase, srv); err != nil {
			return err
		}
		c, _ := settledCounts(s.c.addr)
		if stored = c.stored; stored >= uint64(o.Audit) {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	served, err := b.served(srv)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "waisteer bench -audit %d, %s\n", o.Audit, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "serve behind fasthttp, 3 pathways (p00 with a capacity of %d, p02 with a band of 10%%), bbolt, %d players on %d conns, its hops posting: %d decisions in %s (%s/s, %d failed)\n",
		max(o.Players/4, 1), o.Players, hc, stored, time.Since(began).Round(time.Second), benchRate(served.rate), served.failed)
	start := time.Now()
	rep, err := audit.Run(ctx, client.New(), "http://"+s.c.addr, r.sc.Room.ID(), audit.Options{Sample: o.AuditSample, Seed: 1})
	if err != nil {
		return fmt.Errorf("the audit: %w", err)
	}
	fmt.Fprint(w, rep)
	fmt.Fprintf(w, "  the audit took %s (%s decisions/s)\n", time.Since(start).Round(time.Millisecond), benchRate(float64(rep.Fetched)/time.Since(start).Seconds()))
	if !rep.OK() {
		return fmt.Errorf("the audit found a mismatch")
	}
	return nil
}
