package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/waisteer/waisteer/internal/api"
	"github.com/waisteer/waisteer/internal/declog"
	"github.com/waisteer/waisteer/internal/sig"
	"github.com/waisteer/waisteer/internal/view"
	"github.com/waisteer/waisteer/store"
)

// TestLogsOfOneLog (issue 31): on a store of one log (memory, bbolt) the
// room's logs are its log 0 alone: /logs lists it, and /logs/0/ serves it
// as /log/ does, the same bytes (one checkpoint cache per log).
func TestLogsOfOneLog(t *testing.T) {
	e := newEnv(t)
	id := e.sc.Room.ID()
	e.decide(4)
	base := "/v1/rooms/" + id.String()
	w := e.get(base + "/logs")
	var got []view.Log
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" ||
		len(got) != 1 || got[0] != (view.Log{Log: 0, Server: "", Size: 4, Sealed: false}) {
		t.Fatalf("/logs: %d %s", w.Code, w.Body)
	}
	if w.Body.String() != `[{"log":0,"server":"","size":4,"sealed":false}]`+"\n" {
		t.Errorf("/logs writes %q", w.Body)
	}
	for _, rest := range []string{"checkpoint", "epochs", "tile/entries/000.p/4", "tile/0/000.p/4", "inclusion/" + e.decided[2].Digest.String(), "consistency?from=1&size=4"} {
		old, now := e.get(base+"/log/"+rest), e.get(base+"/logs/0/"+rest)
		if old.Code != 200 || now.Code != 200 || !bytes.Equal(old.Body.Bytes(), now.Body.Bytes()) {
			t.Errorf("%s: /log/ %d %q, /logs/0/ %d %q", rest, old.Code, old.Body, now.Code, now.Body)
		}
	}
	for _, c := range []struct {
		target string
		status int
		code   api.Code
	}{
		{"/logs/1/checkpoint", 404, api.NotFound},
		{"/logs/00/checkpoint", 400, api.BadLogRequest},
		{"/logs/0x1/epochs", 400, api.BadLogRequest},
		{"/logs/1e3/epochs", 400, api.BadLogRequest},
		{"/logs/-0/epochs", 400, api.BadLogRequest},
	} {
		if w := e.get(base + c.target); w.Code != c.status || refusal(w) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.target, w.Code, w.Body, c.status, c.code)
		}
	}
	// A room of no origin and no decision has no log yet.
	if w := e.get("/v1/rooms/" + e.archived.ID().String() + "/logs"); w.Code != 200 || w.Body.String() != "[]\n" {
		t.Errorf("a room of no log: %d %s", w.Code, w.Body)
	}
}

// epochStore is a memory store whose room's key epochs are given: starts
// of heads in logs other than 0 too.
type epochStore struct {
	*store.Memory
	es []store.KeyEpoch
}

func (s *epochStore) KeyEpochs(context.Context, sig.Hash) ([]store.KeyEpoch, error) { return s.es, nil }

// TestEpochOfLog (issue 31: "a decision at index i of log n is checked
// against the last epoch whose start in log n is at or before i"): the
// epoch a checkpoint of log n names is the latest with a start in log n at
// or before its size, whatever the other logs' starts.
func TestEpochOfLog(t *testing.T) {
	e := newEnv(t)
	id := e.sc.Room.ID()
	st := &epochStore{Memory: e.st, es: []store.KeyEpoch{
		{Seq: 1, Log: 0, From: 0}, {Seq: 1, Log: 5, From: 0},
		{Seq: 2, Log: 0, From: 40}, {Seq: 2, Log: 5, From: 3},
		{Seq: 3, Log: 5, From: 9},
	}}
	a := &Audit{st: st}
	rm := Room{Head: []byte{1}}
	for _, c := range []struct {
		n, size int64
		want    *declog.Epoch
	}{
		{0, 0, &declog.Epoch{Seq: 1, From: 0}},
		{0, 39, &declog.Epoch{Seq: 1, From: 0}},
		{0, 40, &declog.Epoch{Seq: 2, From: 40}},
		{0, 1000, &declog.Epoch{Seq: 2, From: 40}},
		{5, 2, &declog.Epoch{Seq: 1, From: 0}},
		{5, 3, &declog.Epoch{Seq: 2, From: 3}},
		{5, 9, &declog.Epoch{Seq: 3, From: 9}},
		{7, 9, nil}, // a log with no start of any head
	} {
		got, err := a.epochOf(bg, id, rm, c.n, c.size)
		if c.want == nil {
			if err == nil {
				t.Errorf("log %d at %d: %+v, want an error (no start)", c.n, c.size, got)
			}
			continue
		}
		if err != nil || got == nil || *got != *c.want {
			t.Errorf("log %d at %d: %+v, %v, want %+v", c.n, c.size, got, err, *c.want)
		}
	}
	// A room with no origin names no epoch.
	if got, err := a.epochOf(bg, id, Room{}, 5, 9); got != nil || err != nil {
		t.Errorf("no origin: %+v, %v", got, err)
	}
}
