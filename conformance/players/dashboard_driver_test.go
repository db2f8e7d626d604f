package players

// The dashboard's driver: dashboard.mjs running, and the steps asked of it.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// dashDriver is dashboard.mjs, running, and what it reported.
type dashDriver struct {
	*nodeScript
	mu      sync.Mutex
	events  []map[string]any
	replies map[int]chan map[string]any
	next    int
	// expected are the answers of 400 or more the test provokes, in order.
	expected []expectedResponse
}

type expectedResponse struct {
	status int
	path   string
}

// startDashDriver starts the driver on the Chromium at ws, its page in the
// time zone tz (an IANA name).
func startDashDriver(t *testing.T, node, ws, tz string) *dashDriver {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"cdp": ws, "tz": tz})
	d := &dashDriver{replies: map[int]chan map[string]any{}}
	d.nodeScript = startNode(t, node, "dashboard.mjs", cfg, "dashboard driver: ", 8<<20, func(b []byte) {
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			ev = map[string]any{"kind": "console", "type": "driver", "text": string(b)}
		}
		d.mu.Lock()
		if ev["kind"] == "reply" {
			id, _ := ev["id"].(float64)
			if ch, ok := d.replies[int(id)]; ok {
				ch <- ev
			}
		} else {
			d.events = append(d.events, ev)
		}
		d.mu.Unlock()
	})
	return d
}

// do sends one command and waits for its answer.
func (d *dashDriver) do(t *testing.T, op string, args map[string]any) any {
	t.Helper()
	d.mu.Lock()
	d.next++
	id := d.next
	ch := make(chan map[string]any, 1)
	d.replies[id] = ch
	d.mu.Unlock()
	cmd := map[string]any{"id": id, "op": op}
	for k, v := range args {
		cmd[k] = v
	}
	b, _ := json.Marshal(cmd)
	if _, err := d.stdin.Write(append(b, '\n')); err != nil {
		t.Fatalf("the driver: %v", err)
	}
	select {
	case r := <-ch:
		if ok, _ := r["ok"].(bool); !ok {
			t.Fatalf("the driver's %s %v: %v", op, args, r["error"])
		}
		return r["value"]
	case <-d.exited:
		t.Fatalf("the driver ended during %s", op)
	case <-time.After(60 * time.Second):
		t.Fatalf("the driver did not answer %s", op)
	}
	return nil
}

func (d *dashDriver) evalInto(t *testing.T, fn string, v any) {
	t.Helper()
	b, _ := json.Marshal(d.do(t, "eval", map[string]any{"fn": fn}))
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("reading %s: %v", b, err)
	}
}

func (d *dashDriver) wait(t *testing.T, fn string, within time.Duration) {
	t.Helper()
	d.do(t, "wait", map[string]any{"fn": fn, "timeoutMs": within.Milliseconds()})
}

// waitFor waits for fn and returns when it held.
func (d *dashDriver) waitFor(t *testing.T, fn string, within time.Duration) time.Time {
	t.Helper()
	d.wait(t, fn, within)
	return time.Now()
}

// waitText waits for sel to be visible with text, and returns the text.
func (d *dashDriver) waitText(t *testing.T, sel string, within time.Duration) string {
	t.Helper()
	d.wait(t, fmt.Sprintf(`() => { const e = document.querySelector(%q); return e && !e.hidden && e.textContent.trim() !== '' }`, sel), within)
	var s string
	d.evalInto(t, fmt.Sprintf(`() => document.querySelector(%q).textContent`, sel), &s)
	return s
}

func (d *dashDriver) shot(t *testing.T, path, sel string, full bool) {
	t.Helper()
	abs, _ := filepath.Abs(path)
	d.do(t, "screenshot", map[string]any{"path": abs, "sel": sel, "full": full})
}

// rowHeads is the row headers of the first table in the first of sel.
func (d *dashDriver) rowHeads(t *testing.T, sel string) []string {
	t.Helper()
	var ids []string
	d.evalInto(t, fmt.Sprintf(`() => [...document.querySelector(%q).querySelector('table').tBodies[0].rows].map((r) => r.cells[0].textContent)`, sel), &ids)
	return ids
}

// pageOrder is the order the page lists, as the reader sees it.
func (d *dashDriver) pageOrder(t *testing.T) []string {
	t.Helper()
	var ids []string
	d.evalInto(t, `() => [...document.querySelectorAll('.room .order li')].map((li) => li.textContent)`, &ids)
	return ids
}

func (d *dashDriver) noReload(t *testing.T) {
	t.Helper()
	var mark string
	d.evalInto(t, `() => window.__dashMark || ''`, &mark)
	if mark != "kept" {
		t.Errorf("the page was reloaded")
	}
}

// notBlank requires the page to show some text.
func (d *dashDriver) notBlank(t *testing.T, when string) {
	t.Helper()
	var n int
	d.evalInto(t, `() => document.body.innerText.trim().length`, &n)
	if n < 40 {
		t.Errorf("%s: the page shows %d characters of text", when, n)
	}
}

// inspected is what the inspector shows.
type inspected struct {
	Verdict string   `json:"verdict"`
	Steps   []string `json:"steps"`
	Code    string   `json:"code"`
	Text    string   `json:"text"`
}

func (d *dashDriver) submitInspect(t *testing.T, input string) {
	t.Helper()
	d.do(t, "eval", map[string]any{"fn": `() => { document.getElementById('inspect-out').replaceChildren(); document.getElementById('inspect-msg').hidden = true; return null }`})
	d.do(t, "fill", map[string]any{"sel": "#inspect-input", "value": input})
	d.do(t, "click", map[string]any{"sel": "#inspect-form button"})
}

func (d *dashDriver) inspect(t *testing.T, input string) inspected {
	t.Helper()
	d.submitInspect(t, input)
	d.wait(t, `() => document.querySelector('#inspect-out [data-verdict]')`, 15*time.Second)
	var r inspected
	d.evalInto(t, `() => {
	  const out = document.getElementById('inspect-out');
	  const rows = [...out.querySelector('table').tBodies[0].rows];
	  const refused = rows.find((r) => r.cells[2].textContent === 'refused');
	  return {verdict: out.querySelector('[data-verdict]').dataset.verdict, steps: rows.map((r) => r.cells[2].textContent),
	          code: refused ? refused.cells[3].textContent : '', text: out.innerText};
	}`, &r)
	return r
}

func (d *dashDriver) inspectError(t *testing.T, input string) string {
	t.Helper()
	d.submitInspect(t, input)
	s := d.waitText(t, "#inspect-msg", 15*time.Second)
	d.notBlank(t, "inspecting "+input)
	return s
}

// expect allows one answer of status on path, which the test provokes.
func (d *dashDriver) expect(status int, path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expected = append(d.expected, expectedResponse{status, path})
}

// checkEvents requires no page error, no failed request, no console error
// or warning, and no answer of 400 or more, but the ones the test provoked
// (and the console's line for each of them).
func (d *dashDriver) checkEvents(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	var got []expectedResponse
	provoked := map[string]bool{}
	for _, ev := range d.events {
		switch ev["kind"] {
		case "response":
			u, _ := ev["url"].(string)
			st, _ := ev["status"].(float64)
			path := u
			if i := strings.Index(u, "://"); i >= 0 {
				if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
					path = u[i+3+j:]
				}
			}
			got = append(got, expectedResponse{int(st), path})
			provoked[u] = true
		}
	}
	if !slices.Equal(got, d.expected) {
		t.Errorf("answers of 400 or more: %v; the test provoked %v", got, d.expected)
	}
	for _, ev := range d.events {
		switch ev["kind"] {
		case "pageerror", "requestfailed", "fatal":
			t.Errorf("the page: %v", ev)
		case "console":
			text, _ := ev["text"].(string)
			u, _ := ev["url"].(string)
			if strings.HasPrefix(text, "Failed to load resource: the server responded with a status of ") && provoked[u] {
				continue
			}
			t.Errorf("the console: %v", ev)
		}
	}
}
