package pool

import (
	"strconv"
	"testing"
)

// BenchmarkSteer is a steering request's CPU beyond HTTP, which must stay
// under 5 µs for a pool of a few edges: reading the query, the session
// (AES), the order and the manifest, appended into a buffer reused as the
// server reuses one.
func BenchmarkSteer(b *testing.B) {
	seed := config("edge-1", 1, "edge-2", 2, "bunny", 0)
	buckets := bucketConfig(12, rule(1, 6, "CDN1", "CDN2"), rule(7, 12, "CDN2", "CDN1"))
	var many []any
	for i := range 1000 {
		many = append(many, "edge-"+strconv.Itoa(i), 1+i%3)
	}
	large := config(many...)
	s := refSession(b, testKey, 1, 0).String()
	sb := refSession(b, testKey, 1, 4).String()
	const players = "&_HLS_pathway=edge-1&_HLS_throughput=5000000"
	for _, bc := range []struct {
		name  string
		c     Config
		query string
	}{
		{"3 edges", seed, "session=" + s + players},
		{"3 edges, first request", seed, players},
		{"3 edges, buckets", buckets, "session=" + sb + "&bucket=4" + players},
		{"1000 edges", large, "session=" + s + players},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := newPool(b, bc.c)
			req := &Request{RawQuery: bc.query, Base: "https://steer.example"}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf, _, _ = p.Steer(buf[:0], req)
			}
			b.SetBytes(int64(len(buf)))
		})
	}
	// Every processor at once: Steer takes no lock, and shares only the
	// state pointer and the edges' counts.
	b.Run("3 edges, parallel", func(b *testing.B) {
		p := newPool(b, seed)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req := &Request{RawQuery: "session=" + s + players, Base: "https://steer.example"}
			var buf []byte
			for pb.Next() {
				buf, _, _ = p.Steer(buf[:0], req)
			}
		})
	})
}
