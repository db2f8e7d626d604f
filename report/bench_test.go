package report

import (
	"net/http"
	"testing"
)

// benchIDs is a policy of eight pathways (§3.2).
var benchIDs = []string{"cdn-a", "cdn-b", "cdn-c", "cdn-d", "edge.eu-1", "edge.eu-2", "edge.us-1", "origin"}

func benchRead(b *testing.B, target string, h http.Header, want Report) {
	b.Helper()
	if _, r := Read(target, h, benchIDs); r != want {
		b.Fatalf("Read = %+v; want %+v", r, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		Read(target, h, benchIDs)
	}
}

// A request a real server sees carries other header fields too.
func benchHeader() http.Header {
	return http.Header{
		"Accept":          {"application/json"},
		"Accept-Encoding": {"gzip, deflate, br"},
		"User-Agent":      {"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36"},
		"Origin":          {"https://player.example"},
		"Referer":         {"https://player.example/watch"},
		"Connection":      {"keep-alive"},
	}
}

// BenchmarkReadHLS is an HLS steering request without CMCD (§4.2).
func BenchmarkReadHLS(b *testing.B) {
	benchRead(b, `/steer/room1?wai_session=00112233445566778899aabbccddeeff&_HLS_pathway="edge.eu-2"&_HLS_throughput=8000000`,
		benchHeader(), with(c(5), T(8000000)))
}

// BenchmarkReadDASH is a DASH steering request (§4.3), quoted list
// percent-encoded as a player sends it.
func BenchmarkReadDASH(b *testing.B) {
	benchRead(b, `/steer/room1?wai_session=00112233445566778899aabbccddeeff&_DASH_pathway=%22beta,edge.us-1,cdn-a%22&_DASH_throughput=5000000,12000000,9000000`,
		benchHeader(), with(c(6), T(12000000)))
}

// BenchmarkReadCMCDQuery is a request with CMCD in the query (§4.4).
func BenchmarkReadCMCDQuery(b *testing.B) {
	benchRead(b, `/steer/room1?_HLS_pathway="cdn-b"&CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Cd%3D4004%2Cmtp%3D48100%2Cot%3Dv%2Csid%3D%226e2fb550-c457-11e9-bb97-0800200c9a66%22%2Ctb%3D6000`,
		benchHeader(), with(c(1), B(21300), T(48100000)))
}

// BenchmarkReadCMCDHeader is a request with CMCD in the header (§4.4).
func BenchmarkReadCMCDHeader(b *testing.B) {
	h := benchHeader()
	h.Set("CMCD-Object", "br=3200,d=4004,ot=v,tb=6000")
	h.Set("CMCD-Request", `bl=21300,dl=18500,mtp=48100,nor="..%2F300kbps%2Ftrack.m4v",nrr="12323-48763",su`)
	h.Set("CMCD-Session", `cid="faec5fc2-ac30-11ea-bb37-0242ac130002",pr=1.08,sf=d,sid="6e2fb550-c457-11e9-bb97-0800200c9a66",st=v`)
	benchRead(b, `/steer/room1?_HLS_pathway="cdn-b"`, h, with(c(1), B(21300), T(48100000)))
}

// BenchmarkSessionOf is the session read (COMPANION §6 "Session").
func BenchmarkSessionOf(b *testing.B) {
	target := `/steer/room1?wai_session=00112233445566778899aabbccddeeff&_HLS_pathway="edge.eu-2"&_HLS_throughput=8000000`
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := SessionOf(target); !ok {
			b.Fatal("no session")
		}
	}
}
