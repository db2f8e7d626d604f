package web

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The metrics are written by hand in the Prometheus text exposition format
// (version 0.0.4), from atomic counters: no dependency, and nothing on a
// request's path takes a lock to count it.

// LatencyBounds are the upper bounds of the latency histograms' buckets: a
// steering request costs tens of microseconds to sign and a group commit's
// wait, a few milliseconds on a disk.
var LatencyBounds = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Histogram counts observations into fixed buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Uint64   // in the unit's smallest step: ns for durations
	scale  float64         // sum × scale is the sum in the metric's unit
}

// NewHistogram counts into buckets of the upper bounds given, ascending; a
// raw observation × scale is in the metric's unit.
func NewHistogram(bounds []float64, scale float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1), scale: scale}
}

// NewLatencyHistogram counts durations into LatencyBounds, in seconds.
func NewLatencyHistogram() *Histogram {
	b := make([]float64, len(LatencyBounds))
	for i, d := range LatencyBounds {
		b[i] = d.Seconds()
	}
	return NewHistogram(b, 1e-9)
}

// Observe counts v, adding raw to the sum.
func (h *Histogram) Observe(v float64, raw uint64) {
	i, _ := slices.BinarySearch(h.bounds, v) // first bound ≥ v: le is inclusive
	h.counts[i].Add(1)
	h.sum.Add(raw)
}

// ObserveDuration counts a duration.
func (h *Histogram) ObserveDuration(d time.Duration) {
	h.Observe(d.Seconds(), uint64(max(d, 0)))
}

// Write writes the histogram's series under name, with labels (without
// braces; "" for none).
func (h *Histogram) Write(b *bytes.Buffer, name, labels string) {
	var cum uint64
	sep := ""
	if labels != "" {
		sep = ","
	}
	for i, bound := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(b, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, strconv.FormatFloat(bound, 'g', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)].Load()
	fmt.Fprintf(b, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	fmt.Fprintf(b, "%s_sum%s %s\n", name, braces(labels), strconv.FormatFloat(float64(h.sum.Load())*h.scale, 'g', -1, 64))
	fmt.Fprintf(b, "%s_count%s %d\n", name, braces(labels), cum)
}

func braces(labels string) string {
	if labels == "" {
		return ""
	}
	return "{" + labels + "}"
}

// Counters is a family of counters keyed by a label value that is not
// known in advance (a status, a refusal code).
type Counters[K cmp.Ordered] struct{ m sync.Map }

// Add counts one for k.
func (c *Counters[K]) Add(k K) {
	v, ok := c.m.Load(k)
	if !ok {
		v, _ = c.m.LoadOrStore(k, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// Get is k's count.
func (c *Counters[K]) Get(k K) uint64 {
	if v, ok := c.m.Load(k); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// Sorted returns the keys and counts in ascending order of key.
func (c *Counters[K]) Sorted() ([]K, []uint64) {
	var ks []K
	c.m.Range(func(k, _ any) bool { ks = append(ks, k.(K)); return true })
	slices.Sort(ks)
	vs := make([]uint64, len(ks))
	for i, k := range ks {
		vs[i] = c.Get(k)
	}
	return ks, vs
}

// Totals are the number of observations and the sum of their raw values.
func (h *Histogram) Totals() (count, raw uint64) {
	for i := range h.counts {
		count += h.counts[i].Load()
	}
	return count, h.sum.Load()
}
