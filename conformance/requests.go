package conformance

import (
	"github.com/waisteer/waisteer/internal/scenario"
)

// RequestCase is a steering request of the corpus before its report is
// read: a policy, whose ids the report names, and what the client sent.
type RequestCase struct {
	Name    string
	Policy  []byte
	Target  string
	Headers []Header
}

// requestPolicies are the policies the requests are read under (their ids
// in the policy's order): the "three pathways, one class" vector's (a, b,
// c), the "pathway clones" vector's (a, b, c, a-clone, b-host, c-params)
// and the ids vector's (CDN-A, cdn_b.2, edge.c).
func requestPolicies() (one, clones, ids []byte) {
	policyOf := func(spec scenario.Spec) []byte {
		spec.Periods = -1 // the policy alone: no records
		return build(spec).PolicyBytes
	}
	return policyOf(oneClassSpec()), policyOf(clonesSpec()), policyOf(idsSpec())
}

// session32 is a session as a client sends it back (§8.1).
const session32 = "wai_session=00112233445566778899aabbccddeeff"

// Requests returns the corpus's steering requests (§11): HLS and DASH, with
// and without CMCD in the query and in the header, and the cases §4 and
// COMPANION §6 make hard.
func Requests() []RequestCase {
	one, clones, ids := requestPolicies()
	var rs []RequestCase
	q := func(name string, policy []byte, target string, headers ...Header) {
		rs = append(rs, RequestCase{Name: name, Policy: policy, Target: target, Headers: headers})
	}
	cmcd := func(v string) Header { return Header{Name: "CMCD-Request", Value: v} }
	const s = "/v1/steer"

	// §4.1 and §4.2: HLS.
	q("hls: first request, no query", one, s)
	q("hls: a session and no report", one, s+"?"+session32)
	q("hls: quoted pathway and throughput", one, s+`?_HLS_pathway="b"&_HLS_throughput=5000000&`+session32)
	q("hls: quotes percent-encoded", one, s+"?_HLS_pathway=%22c%22&_HLS_throughput=800000")
	q("hls: unquoted pathway", one, s+"?_HLS_pathway=a")
	q("hls: a pathway the policy does not have", one, s+`?_HLS_pathway="z"&_HLS_throughput=1`)
	q("hls: a lone quote stays", one, s+`?_HLS_pathway="`)
	q("hls: a quote at one end only", one, s+`?_HLS_pathway="a`)
	q("hls: one pair of quotes removed, not two", one, s+`?_HLS_pathway=""a""`)
	q("hls: a quoted throughput is not an integer", one, s+`?_HLS_pathway=b&_HLS_throughput="5000000"`)
	q("hls: 20-digit throughput, 2^64 - 1", one, s+"?_HLS_throughput=18446744073709551615")
	q("hls: throughput 2^64", one, s+"?_HLS_throughput=18446744073709551616")
	q("hls: 20 digits with leading zeros", one, s+"?_HLS_throughput=00000000000000000042")
	q("hls: 21 digits", one, s+"?_HLS_throughput=000000000000000000042")
	q("hls: an empty first throughput hides a later one", one, s+"?_HLS_throughput=&_HLS_throughput=5000000&_HLS_pathway=c")
	q("hls: a part with no = has an empty value", one, s+"?_HLS_throughput&_HLS_pathway=b")
	q("hls: a plus sign is not a digit", one, s+"?_HLS_throughput=+5000")
	q("hls: a space is not a digit", one, s+"?_HLS_throughput=%205000")
	q("hls: repeated parts, the first read", one, s+"?_HLS_pathway=b&_HLS_pathway=c&_HLS_throughput=1&_HLS_throughput=2")
	q("hls: a bad percent-encoding skips the part", one, s+"?_HLS_pathway=%zzc&_HLS_pathway=b")
	q("hls: a % at the end skips the part", one, s+"?_HLS_throughput=12%2&_HLS_throughput=7")
	q("hls: a bad % in the name skips the part", one, s+"?_HLS_pathway%=a&_HLS_pathway=c")
	q("hls: percent-encoded names, upper case", one, s+"?%5FHLS_pathway=b&_HLS_%74hroughput=300")
	q("hls: percent-encoded names and values, lower case", one, s+"?%5fHLS_pathway=%61&_HLS_throughput=%31%32%33")
	q("hls: %2561 decodes once, to %61", one, s+"?_HLS_pathway=%2561")
	q("hls: + is not a space", one, s+"?_HLS_pathway=a+")
	q("hls: names are case-sensitive", one, s+"?_hls_pathway=b&_HLS_Throughput=5")
	q("hls: the query ends at #", one, s+"?_HLS_pathway=b#&_HLS_throughput=5")
	q("hls: a # before the ? means no query", one, s+"#x?_HLS_pathway=b")
	q("hls: the query starts after the first ?", one, s+"?_HLS_pathway=b?_HLS_throughput=5")
	q("hls: a value is cut at the first =", one, s+"?_HLS_pathway==b&_HLS_throughput=5=5")
	q("hls: an encoded & stays in the value", one, s+"?_HLS_pathway=b%26_HLS_throughput=5")
	q("hls: empty parts", one, s+"?&&_HLS_pathway=c&&")
	q("hls: a clone's id", clones, s+`?_HLS_pathway="a-clone"&_HLS_throughput=2000000`)
	q("hls: a clone's id percent-encoded", clones, s+"?_HLS_pathway=%22c%2Dparams%22")
	q("hls: an id with capitals and a dash", ids, s+`?_HLS_pathway="CDN-A"`)
	q("hls: ids compare bytewise, case and all", ids, s+`?_HLS_pathway="cdn-a"`)

	// §4.3: DASH.
	q("dash: a quoted list, the first item current", one, s+`?_DASH_pathway="b,c"&_DASH_throughput=5000000,3000000`)
	q("dash: the first item the policy has", one, s+`?_DASH_pathway="x,c,b"&_DASH_throughput=1,2,3`)
	q("dash: an unquoted list", one, s+"?_DASH_pathway=c,a&_DASH_throughput=9000000,1")
	q("dash: quotes and commas percent-encoded", one, s+"?_DASH_pathway=%22a%2Cb%22&_DASH_throughput=700000%2C1")
	q("dash: fewer throughputs than the position", one, s+`?_DASH_pathway="x,y,b"&_DASH_throughput=1,2`)
	q("dash: no pathway current, the first throughput", one, s+`?_DASH_pathway="x"&_DASH_throughput=700000,5`)
	q("dash: throughput alone", one, s+"?_DASH_throughput=2500000&"+session32)
	q("dash: pathway alone", one, s+"?_DASH_pathway=a")
	q("dash: items are not trimmed", one, s+"?_DASH_pathway=%22x,%20c%22&_DASH_throughput=1,2")
	q("dash: items are not unquoted", one, s+`?_DASH_pathway="x","b"&_DASH_throughput=1,2`)
	q("dash: a throughput that is not an integer", one, s+"?_DASH_pathway=b&_DASH_throughput=fast")
	q("dash: an empty first item", one, s+`?_DASH_pathway=",b"&_DASH_throughput=,5`)
	q("dash: both protocols, DASH read alone", one, s+"?_HLS_pathway=a&_HLS_throughput=1&_DASH_pathway=c&_DASH_throughput=2")
	q("dash: both protocols, the HLS throughput not read", one, s+"?_HLS_throughput=7000000&_DASH_pathway=b")
	q("dash: a skipped _DASH_ part is no part: HLS", one, s+"?_DASH_pathway=%g1&_HLS_pathway=b")
	q("dash: an empty _DASH_throughput makes the request DASH", one, s+"?_DASH_throughput=&_HLS_pathway=a")
	q("dash: a 20-digit throughput", one, s+"?_DASH_pathway=b,a&_DASH_throughput=18446744073709551615,1")
	q("dash: a clone's id", clones, s+`?_DASH_pathway="c-params,a"&_DASH_throughput=3000000,1`)
	q("dash: ids with dots, dashes and underscores", ids, s+`?_DASH_pathway="edge.c,CDN-A"&_DASH_throughput=6000000,2000000`)

	// §4.4: CMCD in the query.
	q("cmcd query: bl and mtp, percent-encoded", one, s+"?_HLS_pathway=a&CMCD=bl%3D21300%2Cmtp%3D25400")
	q("cmcd query: bl and mtp, = and , as they are", one, s+"?CMCD=bl=21300,mtp=25400&_HLS_pathway=b")
	q("cmcd query: mtp does not replace the HLS throughput", one, s+"?_HLS_throughput=5000000&CMCD=mtp%3D100")
	q("cmcd query: mtp gives T when the HLS throughput does not read", one, s+"?_HLS_throughput=x&CMCD=mtp%3D100")
	q("cmcd query: mtp gives T when DASH gives none", one, s+`?_DASH_pathway="x,b"&_DASH_throughput=4000000&CMCD=mtp%3D1500`)
	q("cmcd query: inner lists with parameters, the least", one, s+"?CMCD=bl=(21300;ot=v%205000;ot=a);x,mtp=(800;a=1%20900)")
	q("cmcd query: a Byte Sequence without padding", one, s+"?CMCD=bl=300,sid=:YWI:")
	q("cmcd query: a Byte Sequence of a length 1 mod 4", one, s+"?CMCD=bl=300,sid=:YWJjZ:")
	q("cmcd query: a Byte Sequence with pad bits set", one, s+"?CMCD=bl=300,sid=:YWJ=:")
	q("cmcd query: a Byte Sequence outside the base64 alphabet", one, s+"?CMCD=bl=300,sid=:YW-I:")
	q("cmcd query: a Date and a Display String", one, s+"?CMCD=bl=1200,d=@1659578233,t=%25%22f%25c3%25bc%25c3%25bc%22")
	q("cmcd query: a Display String that is not UTF-8", one, s+"?CMCD=bl=1200,t=%25%22%25ff%22")
	q("cmcd query: a key given twice, the last kept", one, s+"?CMCD=bl=100,bl=2000")
	q("cmcd query: a Date is no Integer", one, s+"?CMCD=bl=@1000,mtp=5")
	q("cmcd query: a Decimal is no Integer", one, s+"?CMCD=bl=1.5")
	q("cmcd query: a String is no Integer", one, s+"?CMCD=bl=%22500%22")
	q("cmcd query: a Boolean and a Token are no Integers", one, s+"?CMCD=bl,mtp=fast")
	q("cmcd query: a negative Integer, and -0", one, s+"?CMCD=bl=-1,mtp=-0")
	q("cmcd query: an Integer with parameters", one, s+"?CMCD=bl=900;ot=v")
	q("cmcd query: an empty Inner List", one, s+"?CMCD=bl=()")
	q("cmcd query: an Inner List with a Decimal", one, s+"?CMCD=bl=(100%202.5)")
	q("cmcd query: an Inner List with a negative Integer", one, s+"?CMCD=bl=(100%20-2)")
	q("cmcd query: a 15-digit mtp", one, s+"?CMCD=mtp=999999999999999")
	q("cmcd query: a 16-digit Integer fails the Dictionary", one, s+"?CMCD=mtp=5,bl=1000000000000000")
	q("cmcd query: a CMCD part that does not parse, the header not read", one, s+"?CMCD=bl=", cmcd("bl=500"))
	q("cmcd query: an empty CMCD part, the header not read", one, s+"?CMCD", cmcd("bl=500"))
	q("cmcd query: a CMCD part skipped for a bad %, the header read", one, s+"?CMCD=bl%3=1", cmcd("bl=700"))
	q("cmcd query: two CMCD parts, the first read", one, s+"?CMCD=bl=1&CMCD=bl=2")
	q("cmcd query: the name is case-sensitive, the header read", one, s+"?cmcd=bl=1", cmcd("bl=2"))
	q("cmcd query: keys in capitals do not parse", one, s+"?CMCD=BL=1")
	q("cmcd query: spaces around the comma", one, s+"?CMCD=bl=1%20,%20mtp=2")
	q("cmcd query: both CMCD and the header, the query read", one, s+"?CMCD=bl%3D10", cmcd("bl=20"))

	// §4.4: CMCD in the header.
	q("cmcd header: bl and mtp", one, s+"?_HLS_pathway=c", cmcd("bl=21300,mtp=25400,ot=v"))
	q("cmcd header: a field name in lower case", one, s, Header{Name: "cmcd-request", Value: "bl=4000"})
	q("cmcd header: mtp does not replace the HLS throughput", one, s+"?_HLS_throughput=3000000", cmcd("bl=800,mtp=100"))
	q("cmcd header: inner lists with parameters", one, s, cmcd("bl=(5000;ot=v 3200;ot=a), mtp=(900 1200);y"))
	q("cmcd header: a Byte Sequence without padding", one, s, cmcd("bl=1000, nor=:YQ:"))
	q("cmcd header: an = inside a Byte Sequence", one, s, cmcd("bl=1000, x=:YQ=a:"))
	q("cmcd header: a colon inside a String", one, s, cmcd(`bl=1000, s="x:Y:"`))
	q("cmcd header: colons inside a Token", one, s, cmcd("bl=1000, t=abc:Y:"))
	q("cmcd header: a Date and a Display String", one, s, cmcd(`bl=900, d=@-62135596800, s=%"caf%c3%a9"`))
	q("cmcd header: a 16-digit Integer", one, s, cmcd("bl=1000000000000000"))
	q("cmcd header: another shard is not read", one, s, Header{Name: "CMCD-Session", Value: "bl=100"})
	q("cmcd header: a Dictionary that does not parse", one, s, cmcd("bl=100,,mtp=2"))
	q("cmcd header: DASH, T from mtp", one, s+`?_DASH_pathway="b"`, cmcd("mtp=4000"))
	q("cmcd header: bl=0 and mtp=0 are present", one, s, cmcd("bl=0,mtp=0"))
	q("cmcd header: bl=-0 is 0", one, s, cmcd("bl=-0"))
	q("cmcd header: a key twice, the last kept", one, s, cmcd("bl=100, bl=(300 200)"))
	q("cmcd header: a key twice, the last not an Integer", one, s, cmcd("bl=100, bl=1.5"))
	q("cmcd header: a clone current, over DASH", clones, s+"?_DASH_pathway=b-host", cmcd("bl=15000,mtp=9000"))
	return rs
}

// scenario0 is the spec of the corpus room's own scenario, with no records:
// its room is the file's.
func scenario0() scenario.Spec { return scenario.Spec{Periods: -1} }
