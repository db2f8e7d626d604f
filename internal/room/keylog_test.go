package room

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// sortedKeys returns n public keys of fixed labels in ascending bytewise
// order, as COMPANION §4 orders entries.
func sortedKeys(n int) []sig.PublicKey {
	keys := make([]sig.PublicKey, n)
	for i := range keys {
		keys[i] = TestKey(fmt.Sprint("key log test key ", i)).Public()
	}
	slices.SortFunc(keys, func(a, b sig.PublicKey) int { return bytes.Compare(a[:], b[:]) })
	return keys
}

// COMPANION §4: NewKeyLogHead writes exactly the deterministic encoding,
// entries in ascending key order and each may_sign ascending, whatever the
// caller's order, signed by the origin in wai:key-log-head.
func TestNewKeyLogHeadBytes(t *testing.T) {
	k := sortedKeys(3)
	got, err := NewKeyLogHead(originKey, 300, []Entry{
		{Key: k[2], MaySign: []string{"live/steer", "energy/ModelBased"}},
		{Key: k[0], MaySign: []string{"live/hop"}, Revoked: true},
		{Key: k[1], MaySign: []string{"live/hop", "energy/Estimator", "energy/CalibratedInstrument"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := headBodyBytes(originPub[:], 300,
		entry(k[0][:], true, "live/hop"),
		entry(k[1][:], false, "energy/CalibratedInstrument", "energy/Estimator", "live/hop"),
		entry(k[2][:], false, "energy/ModelBased", "live/steer"))
	if want := signed(originKey, sig.DomainKeyLog, body); !bytes.Equal(got, want) {
		t.Fatalf("\n got %x\nwant %x", got, want)
	}
	h, err := ParseKeyLogHead(got)
	if err != nil {
		t.Fatal(err)
	}
	if h.Origin != originPub || h.Seq != 300 || len(h.Entries) != 3 || !bytes.Equal(h.Body, body) {
		t.Errorf("read back as %+v", h)
	}
	if err := h.Verify(); err != nil {
		t.Error(err)
	}
	if e := h.Entry(k[1]); e == nil || !e.Holds("energy/Estimator") || e.Holds("live/steer") || e.Revoked {
		t.Errorf("entry of k1: %+v", e)
	}
	if e := h.Entry(k[0]); e == nil || !e.Revoked {
		t.Errorf("entry of k0: %+v", e)
	}
	if e := h.Entry(authPub); e != nil {
		t.Errorf("an unlisted key has entry %+v", e)
	}
}

// COMPANION §4 sets no lower bound on entries: a head with none reads (the
// room step refuses it for a room: authority_not_listed, tested in
// room_test.go).
func TestEmptyKeyLogHead(t *testing.T) {
	b, err := NewKeyLogHead(originKey, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := signed(originKey, sig.DomainKeyLog, headBodyBytes(originPub[:], 0)); !bytes.Equal(b, want) {
		t.Fatalf("got %x, want %x", b, want)
	}
	if h, err := ParseKeyLogHead(b); err != nil || len(h.Entries) != 0 {
		t.Errorf("%+v, %v", h, err)
	}
}

// COMPANION §4: NewKeyLogHead refuses, with an error, what no ordering
// repairs.
func TestNewKeyLogHeadRefuses(t *testing.T) {
	k := sortedKeys(2)
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("a%02d", i)
	}
	for name, entries := range map[string][]Entry{
		"key twice":         {{Key: k[0], MaySign: []string{"live/hop"}}, {Key: k[0], MaySign: []string{"live/steer"}}},
		"authority twice":   {{Key: k[0], MaySign: []string{"live/hop", "live/hop"}}},
		"no authority":      {{Key: k[0]}},
		"33 authorities":    {{Key: k[0], MaySign: many}},
		"empty authority":   {{Key: k[0], MaySign: []string{""}}},
		"65-byte authority": {{Key: k[0], MaySign: []string{strings.Repeat("a", 65)}}},
		"newline":           {{Key: k[0], MaySign: []string{"live/hop\n"}}},
		"non-ASCII":         {{Key: k[0], MaySign: []string{"énergie"}}},
		"DEL (0x7f)":        {{Key: k[0], MaySign: []string{"live\x7f"}}},
	} {
		if _, err := NewKeyLogHead(originKey, 1, entries); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewKeyLogHead(sig.PrivateKey{}, 1, nil); err == nil {
		t.Error("no origin key: no error")
	}
	// The bounds themselves are fine: 32 authorities, of 64 bytes and of 1,
	// spaces and tildes included.
	ok := []string{strings.Repeat("~", 64), " ", "x"}
	for i := len(ok); i < 32; i++ {
		ok = append(ok, fmt.Sprintf("b%02d", i))
	}
	if _, err := NewKeyLogHead(originKey, 1, []Entry{{Key: k[0], MaySign: ok}}); err != nil {
		t.Error(err)
	}
}

// COMPANION §4.1 step 4: a head whose bytes are not exactly the
// deterministic encoding of §4's shape is key_log_invalid. Each case is a
// control of one defect against a valid encoding (checked first).
func TestParseKeyLogHeadInvalid(t *testing.T) {
	O := originPub[:]
	k := sortedKeys(3)
	k0, k1 := k[0][:], k[1][:]
	e0 := entry(k0, false, "live/hop")
	e1 := entry(k1, true, "energy/ModelBased", "live/steer")
	valid := headBodyBytes(O, 7, e0, e1)
	many := make([]string, 32)
	for i := range many {
		many[i] = fmt.Sprintf("a%02d", i)
	}
	for _, ok := range [][]byte{
		valid,
		headBodyBytes(O, 0),
		headBodyBytes(O, 1<<64-1, e0),
		headBodyBytes(O, 7, entry(k0, false, many...)),
		headBodyBytes(O, 7, entry(k0, false, " ", strings.Repeat("~", 64))),
		headBodyBytes(O, 7, entry(k0, false, "unknown/authority")),
	} {
		if _, err := ParseKeyLogHead(ar(bs(ok), bs(zeroSig))); err != nil {
			t.Fatalf("control %x does not read: %v", ok, err)
		}
	}
	over := append(slices.Clone(many), "a99")
	bodies := []struct {
		name string
		body []byte
	}{
		{"extra key 5", mp(u(1), u(1), u(2), bs(O), u(3), u(7), u(4), ar(e0), u(5), u(0))},
		{"extra entry key 4", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), tsArr("live/hop"), u(3), boolean(false), u(4), u(0)))},
		{"version as text", mp(u(1), ts("1"), u(2), bs(O), u(3), u(7), u(4), ar(e0))},
		{"origin as text", mp(u(1), u(1), u(2), ts(strings.Repeat("o", 32)), u(3), u(7), u(4), ar(e0))},
		{"seq negative", mp(u(1), u(1), u(2), bs(O), u(3), hd(1, 0), u(4), ar(e0))},
		{"seq a bignum", mp(u(1), u(1), u(2), bs(O), u(3), cat([]byte{0xc2}, bs([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0})), u(4), ar(e0))},
		{"entries a map", mp(u(1), u(1), u(2), bs(O), u(3), u(7), u(4), mp(u(0), e0))},
		{"entries null", mp(u(1), u(1), u(2), bs(O), u(3), u(7), u(4), []byte{0xf6})},
		{"entry an array", headBodyBytes(O, 7, ar(bs(k0), tsArr("live/hop"), boolean(false)))},
		{"entry key as text", headBodyBytes(O, 7, mp(u(1), ts(strings.Repeat("k", 32)), u(2), tsArr("live/hop"), u(3), boolean(false)))},
		{"may_sign a string", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), ts("live/hop"), u(3), boolean(false)))},
		{"authority as bytes", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), ar(bs([]byte("live/hop"))), u(3), boolean(false)))},
		{"revoked as integer", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), tsArr("live/hop"), u(3), u(0)))},
		{"revoked null", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), tsArr("live/hop"), u(3), []byte{0xf6}))},
		{"revoked absent", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), tsArr("live/hop")))},
		{"may_sign absent", headBodyBytes(O, 7, mp(u(1), bs(k0), u(3), boolean(false)))},
		{"key absent", headBodyBytes(O, 7, mp(u(2), tsArr("live/hop"), u(3), boolean(false)))},
		{"entries absent", mp(u(1), u(1), u(2), bs(O), u(3), u(7))},
		{"seq absent", mp(u(1), u(1), u(2), bs(O), u(4), ar(e0))},
		{"out-of-order keys 3, 2", mp(u(1), u(1), u(3), u(7), u(2), bs(O), u(4), ar(e0))},
		{"out-of-order entry keys", headBodyBytes(O, 7, mp(u(2), tsArr("live/hop"), u(1), bs(k0), u(3), boolean(false)))},
		{"duplicate key 3", mp(u(1), u(1), u(2), bs(O), u(3), u(7), u(3), u(7), u(4), ar(e0))},
		{"duplicate entry key 3", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), tsArr("live/hop"), u(3), boolean(false), u(3), boolean(false)))},
		{"non-shortest seq", mp(u(1), u(1), u(2), bs(O), u(3), hdw(0, 7, 4), u(4), ar(e0))},
		{"non-shortest seq 300", mp(u(1), u(1), u(2), bs(O), u(3), hdw(0, 300, 8), u(4), ar(e0))},
		{"non-shortest entries length", mp(u(1), u(1), u(2), bs(O), u(3), u(7), u(4), cat(hdw(4, 1, 1), e0))},
		{"non-shortest may_sign length", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), cat(hdw(4, 1, 2), ts("live/hop")), u(3), boolean(false)))},
		{"non-shortest authority length", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), ar(cat(hdw(3, 8, 1), []byte("live/hop"))), u(3), boolean(false)))},
		{"indefinite entries", mp(u(1), u(1), u(2), bs(O), u(3), u(7), u(4), cat([]byte{0x9f}, e0, []byte{0xff}))},
		{"indefinite entry", headBodyBytes(O, 7, cat([]byte{0xbf}, u(1), bs(k0), u(2), tsArr("live/hop"), u(3), boolean(false), []byte{0xff}))},
		{"indefinite authority", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), ar(cat([]byte{0x7f}, ts("live/hop"), []byte{0xff})), u(3), boolean(false)))},
		{"version 2", mp(u(1), u(2), u(2), bs(O), u(3), u(7), u(4), ar(e0))},
		{"short origin", headBodyBytes(O[:31], 7, e0)},
		{"long origin", headBodyBytes(append(O[:32:32], 9), 7, e0)},
		{"short entry key", headBodyBytes(O, 7, entry(k0[:31], false, "live/hop"))},
		{"long entry key", headBodyBytes(O, 7, entry(append(k0[:32:32], 9), false, "live/hop"))},
		{"unsorted entries", headBodyBytes(O, 7, e1, e0)},
		{"duplicate entry", headBodyBytes(O, 7, e0, e0)},
		{"duplicate entry key, other content", headBodyBytes(O, 7, e0, entry(k0, true, "live/steer"))},
		{"unsorted may_sign", headBodyBytes(O, 7, entry(k0, false, "live/steer", "live/hop"))},
		{"unsorted may_sign by byte", headBodyBytes(O, 7, entry(k0, false, "live/hop", "Live/hop"))},
		{"duplicate may_sign", headBodyBytes(O, 7, entry(k0, false, "live/hop", "live/hop"))},
		{"empty may_sign", headBodyBytes(O, 7, entry(k0, false))},
		{"33 may_sign", headBodyBytes(O, 7, entry(k0, false, over...))},
		{"empty authority", headBodyBytes(O, 7, entry(k0, false, ""))},
		{"65-byte authority", headBodyBytes(O, 7, entry(k0, false, strings.Repeat("a", 65)))},
		{"authority with 0x1f", headBodyBytes(O, 7, entry(k0, false, "live/\x1fhop"))},
		{"authority with tab", headBodyBytes(O, 7, entry(k0, false, "live/\thop"))},
		{"authority with 0x7f", headBodyBytes(O, 7, entry(k0, false, "live/hop\x7f"))},
		{"authority not ASCII", headBodyBytes(O, 7, entry(k0, false, "énergie"))},
		{"authority not UTF-8", headBodyBytes(O, 7, mp(u(1), bs(k0), u(2), ar(cat(hd(3, 1), []byte{0xc3})), u(3), boolean(false)))},
		{"body trailing byte", cat(valid, []byte{0})},
	}
	for _, tc := range bodies {
		check(t, tc.name, ar(bs(tc.body), bs(zeroSig)), ParseKeyLogHeadErr, reason.KeyLogInvalid)
	}
	outers := []struct {
		name string
		b    []byte
	}{
		{"nothing", nil},
		{"trailing byte after the array", cat(ar(bs(valid), bs(zeroSig)), []byte{0xf6})},
		{"short sig", ar(bs(valid), bs(zeroSig[:63]))},
		{"long sig", ar(bs(valid), bs(append(zeroSig[:64:64], 0)))},
		{"array of 3", ar(bs(valid), bs(zeroSig), bs(zeroSig))},
		{"non-shortest array length", cat(hdw(4, 2, 2), bs(valid), bs(zeroSig))},
		{"indefinite array", cat([]byte{0x9f}, bs(valid), bs(zeroSig), []byte{0xff})},
		{"a descriptor", ar(bs(descBody(authPub[:], nil, "r")), bs(zeroSig))},
	}
	for _, tc := range outers {
		check(t, tc.name, tc.b, ParseKeyLogHeadErr, reason.KeyLogInvalid)
	}
}

// ParseKeyLogHeadErr adapts ParseKeyLogHead for check.
func ParseKeyLogHeadErr(b []byte) error { _, err := ParseKeyLogHead(b); return err }
