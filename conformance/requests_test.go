package conformance

import (
	"strings"
	"testing"
)

// handReports is each request's protocol and report worked out by hand from
// the text, not from the reader: §4.1 (the query), §4.2 (HLS), §4.3 (DASH),
// §4.4 (CMCD) and COMPANION §6's readings. "-" is absent. The ids are a, b, c
// (0 to 2) for the one-class policy; a, b, c, a-clone, b-host, c-params (0 to
// 5) for the clones policy; CDN-A, cdn_b.2, edge.c (0 to 2) for the ids
// policy.
var handReports = map[string]struct {
	protocol int
	c, T, B  string
}{
	"hls: first request, no query":                      {1, "-", "-", "-"},
	"hls: a session and no report":                      {1, "-", "-", "-"}, // the session is not the report
	"hls: quoted pathway and throughput":                {1, "1", "5000000", "-"},
	"hls: quotes percent-encoded":                       {1, "2", "800000", "-"}, // decoded, then unquoted
	"hls: unquoted pathway":                             {1, "0", "-", "-"},      // unquoting is only when both ends are "
	"hls: a pathway the policy does not have":           {1, "-", "1", "-"},      // c only when an id of the policy
	"hls: a lone quote stays":                           {1, "-", "-", "-"},      // COMPANION §6: two bytes at least
	"hls: a quote at one end only":                      {1, "-", "-", "-"},      // `"a` is not unquoted
	"hls: one pair of quotes removed, not two":          {1, "-", "-", "-"},      // `""a""` gives `"a"`
	"hls: a quoted throughput is not an integer":        {1, "1", "-", "-"},      // COMPANION §6: only pathways unquote
	"hls: 20-digit throughput, 2^64 - 1":                {1, "-", "18446744073709551615", "-"},
	"hls: throughput 2^64":                              {1, "-", "-", "-"},  // above 2^64 - 1
	"hls: 20 digits with leading zeros":                 {1, "-", "42", "-"}, // 1 to 20 digits
	"hls: 21 digits":                                    {1, "-", "-", "-"},  // more than 20 digits
	"hls: an empty first throughput hides a later one":  {1, "2", "-", "-"},  // the first part is read
	"hls: a part with no = has an empty value":          {1, "1", "-", "-"},
	"hls: a plus sign is not a digit":                   {1, "-", "-", "-"},
	"hls: a space is not a digit":                       {1, "-", "-", "-"},
	"hls: repeated parts, the first read":               {1, "1", "1", "-"},
	"hls: a bad percent-encoding skips the part":        {1, "1", "-", "-"}, // %zz: skipped, no part; the next is first
	"hls: a % at the end skips the part":                {1, "-", "7", "-"},
	"hls: a bad % in the name skips the part":           {1, "2", "-", "-"},
	"hls: percent-encoded names, upper case":            {1, "1", "300", "-"}, // names are decoded too
	"hls: percent-encoded names and values, lower case": {1, "0", "123", "-"},
	"hls: %2561 decodes once, to %61":                   {1, "-", "-", "-"},
	"hls: + is not a space":                             {1, "-", "-", "-"}, // "a+" is no id
	"hls: names are case-sensitive":                     {1, "-", "-", "-"},
	"hls: the query ends at #":                          {1, "1", "-", "-"},
	"hls: a # before the ? means no query":              {1, "-", "-", "-"},
	"hls: the query starts after the first ?":           {1, "-", "-", "-"}, // the value is `b?_HLS_throughput=5`
	"hls: a value is cut at the first =":                {1, "-", "-", "-"}, // values `=b` and `5=5`
	"hls: an encoded & stays in the value":              {1, "-", "-", "-"},
	"hls: empty parts":                                  {1, "2", "-", "-"},
	"hls: a clone's id":                                 {1, "3", "2000000", "-"},
	"hls: a clone's id percent-encoded":                 {1, "5", "-", "-"},
	"hls: an id with capitals and a dash":               {1, "0", "-", "-"},
	"hls: ids compare bytewise, case and all":           {1, "-", "-", "-"},

	"dash: a quoted list, the first item current":            {2, "1", "5000000", "-"},
	"dash: the first item the policy has":                    {2, "2", "2", "-"}, // c at j = 1: the second throughput
	"dash: an unquoted list":                                 {2, "2", "9000000", "-"},
	"dash: quotes and commas percent-encoded":                {2, "0", "700000", "-"},
	"dash: fewer throughputs than the position":              {2, "1", "-", "-"}, // j = 2, two items
	"dash: no pathway current, the first throughput":         {2, "-", "700000", "-"},
	"dash: throughput alone":                                 {2, "-", "2500000", "-"},
	"dash: pathway alone":                                    {2, "0", "-", "-"},
	"dash: items are not trimmed":                            {2, "-", "1", "-"}, // " c" is no id
	"dash: items are not unquoted":                           {2, "-", "1", "-"}, // `x"` and `"b`
	"dash: a throughput that is not an integer":              {2, "1", "-", "-"},
	"dash: an empty first item":                              {2, "1", "5", "-"}, // b at j = 1
	"dash: both protocols, DASH read alone":                  {2, "2", "2", "-"}, // COMPANION §6
	"dash: both protocols, the HLS throughput not read":      {2, "1", "-", "-"},
	"dash: a skipped _DASH_ part is no part: HLS":            {1, "1", "-", "-"},
	"dash: an empty _DASH_throughput makes the request DASH": {2, "-", "-", "-"},
	"dash: a 20-digit throughput":                            {2, "1", "18446744073709551615", "-"},
	"dash: a clone's id":                                     {2, "5", "3000000", "-"},
	"dash: ids with dots, dashes and underscores":            {2, "2", "6000000", "-"},

	"cmcd query: bl and mtp, percent-encoded":                          {1, "0", "25400000", "21300"}, // T = mtp × 1000
	"cmcd query: bl and mtp, = and , as they are":                      {1, "1", "25400000", "21300"}, // cut at the first =
	"cmcd query: mtp does not replace the HLS throughput":              {1, "-", "5000000", "-"},
	"cmcd query: mtp gives T when the HLS throughput does not read":    {1, "-", "100000", "-"},
	"cmcd query: mtp gives T when DASH gives none":                     {2, "1", "1500000", "-"},
	"cmcd query: inner lists with parameters, the least":               {1, "-", "800000", "5000"},
	"cmcd query: a Byte Sequence without padding":                      {1, "-", "-", "300"},
	"cmcd query: a Byte Sequence of a length 1 mod 4":                  {1, "-", "-", "-"}, // the whole Dictionary fails
	"cmcd query: a Byte Sequence with pad bits set":                    {1, "-", "-", "-"},
	"cmcd query: a Byte Sequence outside the base64 alphabet":          {1, "-", "-", "-"},
	"cmcd query: a Date and a Display String":                          {1, "-", "-", "1200"},
	"cmcd query: a Display String that is not UTF-8":                   {1, "-", "-", "-"}, // RFC 9651 §4.2.10
	"cmcd query: a key given twice, the last kept":                     {1, "-", "-", "2000"},
	"cmcd query: a Date is no Integer":                                 {1, "-", "5000", "-"},
	"cmcd query: a Decimal is no Integer":                              {1, "-", "-", "-"},
	"cmcd query: a String is no Integer":                               {1, "-", "-", "-"},
	"cmcd query: a Boolean and a Token are no Integers":                {1, "-", "-", "-"},
	"cmcd query: a negative Integer, and -0":                           {1, "-", "0", "-"},
	"cmcd query: an Integer with parameters":                           {1, "-", "-", "900"},
	"cmcd query: an empty Inner List":                                  {1, "-", "-", "-"},
	"cmcd query: an Inner List with a Decimal":                         {1, "-", "-", "-"},
	"cmcd query: an Inner List with a negative Integer":                {1, "-", "-", "-"},
	"cmcd query: a 15-digit mtp":                                       {1, "-", "999999999999999000", "-"},
	"cmcd query: a 16-digit Integer fails the Dictionary":              {1, "-", "-", "-"},
	"cmcd query: a CMCD part that does not parse, the header not read": {1, "-", "-", "-"},
	"cmcd query: an empty CMCD part, the header not read":              {1, "-", "-", "-"},
	"cmcd query: a CMCD part skipped for a bad %, the header read":     {1, "-", "-", "700"},
	"cmcd query: two CMCD parts, the first read":                       {1, "-", "-", "1"},
	"cmcd query: the name is case-sensitive, the header read":          {1, "-", "-", "2"},
	"cmcd query: keys in capitals do not parse":                        {1, "-", "-", "-"},
	"cmcd query: spaces around the comma":                              {1, "-", "2000", "1"},
	"cmcd query: both CMCD and the header, the query read":             {1, "-", "-", "10"},

	"cmcd header: bl and mtp":                              {1, "2", "25400000", "21300"},
	"cmcd header: a field name in lower case":              {1, "-", "-", "4000"},
	"cmcd header: mtp does not replace the HLS throughput": {1, "-", "3000000", "800"},
	"cmcd header: inner lists with parameters":             {1, "-", "900000", "3200"},
	"cmcd header: a Byte Sequence without padding":         {1, "-", "-", "1000"},
	"cmcd header: an = inside a Byte Sequence":             {1, "-", "-", "-"},
	"cmcd header: a colon inside a String":                 {1, "-", "-", "1000"},
	"cmcd header: colons inside a Token":                   {1, "-", "-", "1000"},
	"cmcd header: a Date and a Display String":             {1, "-", "-", "900"},
	"cmcd header: a 16-digit Integer":                      {1, "-", "-", "-"},
	"cmcd header: another shard is not read":               {1, "-", "-", "-"},
	"cmcd header: a Dictionary that does not parse":        {1, "-", "-", "-"},
	"cmcd header: DASH, T from mtp":                        {2, "1", "4000000", "-"},
	"cmcd header: bl=0 and mtp=0 are present":              {1, "-", "0", "0"},
	"cmcd header: bl=-0 is 0":                              {1, "-", "-", "0"},
	"cmcd header: a key twice, the last kept":              {1, "-", "-", "200"},
	"cmcd header: a key twice, the last not an Integer":    {1, "-", "-", "-"},
	"cmcd header: a clone current, over DASH":              {2, "4", "9000000", "15000"},
}

func dash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// TestRequestsByHand: every request of the corpus gives, read by this
// implementation and written in the file, the report worked out by hand from
// §4's text, so that the corpus does not carry the reader's own mistakes.
func TestRequestsByHand(t *testing.T) {
	f := committed(t)
	if len(f.Requests) != len(handReports) {
		t.Errorf("%d requests in the corpus, %d worked out by hand", len(f.Requests), len(handReports))
	}
	for _, q := range f.Requests {
		want, ok := handReports[q.Name]
		if !ok {
			t.Errorf("%q: no report worked out by hand", q.Name)
			continue
		}
		c := "-"
		if q.Report.Pathway != nil {
			c = strings.TrimSpace(optInt(q.Report.Pathway))
		}
		got := [4]string{optInt(&q.Protocol), c, dash(q.Report.Throughput), dash(q.Report.Buffer)}
		exp := [4]string{optInt(&want.protocol), want.c, want.T, want.B}
		if got != exp {
			t.Errorf("%q: protocol, c, T, B = %v; by hand %v", q.Name, got, exp)
		}
	}
}

// TestRequestsCover: the requests hold what §11 and the brief list: both
// protocols, CMCD in the query and in the header, and each hard case.
func TestRequestsCover(t *testing.T) {
	f := committed(t)
	var hls, dashes, query, header int
	for _, q := range f.Requests {
		switch q.Protocol {
		case 1:
			hls++
		case 2:
			dashes++
		}
		if strings.Contains(q.Target, "CMCD") {
			query++
		}
		for _, h := range q.Headers {
			if strings.EqualFold(h.Name, "CMCD-Request") {
				header++
			}
		}
	}
	if hls == 0 || dashes == 0 || query == 0 || header == 0 {
		t.Errorf("HLS %d, DASH %d, CMCD in the query %d, in the header %d: each must be some", hls, dashes, query, header)
	}
	for _, want := range []string{"inner lists with parameters", "without padding", "outside the base64 alphabet",
		"Date and a Display String", "twice", "percent-encoding", "20-digit", "16-digit", "quoted list", "unquoted list"} {
		found := false
		for _, q := range f.Requests {
			found = found || strings.Contains(q.Name, want)
		}
		if !found {
			t.Errorf("no request %q", want)
		}
	}
}
