package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoVerifies: the README's first command makes a decision that
// `waisteer verify` accepts, manifest included (§9.1).
func TestDemoVerifies(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := waisteer(t, "", "demo", "-dir", dir)
	if code != 0 {
		t.Fatalf("demo exited %d: %s", code, errs)
	}
	if !strings.Contains(out, `"PATHWAY-PRIORITY"`) || !strings.Contains(out, "#EXT-X-CONTENT-STEERING:") {
		t.Errorf("demo output lacks the manifest or the tag:\n%s", out)
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	out, errs, code = waisteer(t, "", "verify", "-room", f("room.cbor"), "-keylog", f("keylog.cbor"),
		"-policy", f("policy.wsp1"), "-decision", f("decision.wsd1"), "-records", f("records.wmh1"), "-manifest", f("manifest.json"))
	if code != 0 || !strings.HasPrefix(out, `{"outcome":"accept"`) {
		t.Fatalf("verify exited %d: %s %s", code, out, errs)
	}
	// One record short: the decision names it, so it is refused (§9.1 step 4.1).
	out, _, code = waisteer(t, "", "verify", "-room", f("room.cbor"), "-keylog", f("keylog.cbor"),
		"-policy", f("policy.wsp1"), "-decision", f("decision.wsd1"))
	if code != 1 || !strings.Contains(out, `"reason":"record_missing"`) || !strings.Contains(out, `"where":"evidence/0/0"`) {
		t.Errorf("verify without records: exit %d, %s", code, out)
	}
}
