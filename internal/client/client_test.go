package client

import (
	"strings"
	"testing"
)

// TestReadManifest: the members a client follows (§8.1), and a manifest
// lacking one refused.
func TestReadManifest(t *testing.T) {
	m, err := ReadManifest([]byte(`{"VERSION":1,"TTL":30,"RELOAD-URI":"http://s/steer?wai_session=00","PATHWAY-PRIORITY":["a","b"],"science.transaction.wai-decision":"http://s/v1/decisions/ab"}`))
	if err != nil || m.Reload != "http://s/steer?wai_session=00" || strings.Join(m.Priority, ",") != "a,b" || m.Decision != "http://s/v1/decisions/ab" {
		t.Errorf("%+v, %v", m, err)
	}
	for _, b := range []string{`{"VERSION":1}`, `[]`, `{"RELOAD-URI":"x","PATHWAY-PRIORITY":[],"science.transaction.wai-decision":"y"}`, ``} {
		if _, err := ReadManifest([]byte(b)); err == nil {
			t.Errorf("%q read", b)
		}
	}
}

// FuzzReadManifest: no answer makes the manifest's reader panic, and one it
// reads has every member it follows.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte(`{"VERSION":1,"TTL":30,"RELOAD-URI":"http://s/steer","PATHWAY-PRIORITY":["a"],"science.transaction.wai-decision":"http://s/d/ab"}`))
	f.Add([]byte(`{"PATHWAY-PRIORITY":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadManifest(b)
		if err == nil && (m.Reload == "" || len(m.Priority) == 0 || m.Decision == "") {
			t.Fatalf("read with a member missing: %+v", m)
		}
	})
}
