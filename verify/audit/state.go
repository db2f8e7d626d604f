package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/waisteer/waisteer/internal/declog"
)

// What an auditor keeps between two audits of a room (`waisteer audit
// -state FILE`): the last checkpoint it checked of each of the room's
// logs, and whether the log was sealed then (issue 31). The file is JSON:
//
//	{"logs":[{"log":0,"sealed":false,"checkpoint":"waisteer/rooms/…/log\n…"},
//	         {"log":3,"sealed":true,"checkpoint":"waisteer/rooms/…/log/3\n…"}]}
//
// A file of issue 16 holds the signed checkpoint of log 0 alone, its bytes
// as served; it reads as a state of that one log, open.

// State is the checkpoints an auditor saw, one per log.
type State struct {
	Logs []SeenLog `json:"logs"`
}

// SeenLog is the checkpoint an auditor last checked of one log.
type SeenLog struct {
	Log    int64 `json:"log"`
	Sealed bool  `json:"sealed"` // the server listed it sealed: its size may not change
	// Checkpoint is the signed note, as served.
	Checkpoint string `json:"checkpoint"`
}

// MaxStateBytes bounds a state an auditor reads: 4 096 logs' checkpoints.
const MaxStateBytes = 4096 * (declog.MaxCheckpointBytes + 64)

// ParseState reads a state as AppendState writes it, strictly (each log
// once, by ascending number, each checkpoint within its bound), or an
// issue 16 state: one signed checkpoint, of log 0. The checkpoints are not
// opened here; the audit opens each under its log's epochs.
func ParseState(b []byte) (State, error) {
	if len(b) > MaxStateBytes {
		return State{}, fmt.Errorf("audit: a state of %d bytes, more than %d", len(b), MaxStateBytes)
	}
	if !bytes.HasPrefix(b, []byte("{")) {
		// Issue 16's file: a checkpoint's note starts with its origin.
		if len(b) == 0 || len(b) > declog.MaxCheckpointBytes || !utf8.Valid(b) {
			return State{}, fmt.Errorf("audit: a state of one checkpoint of %d bytes, not 1 to %d of UTF-8 (a signed note)", len(b), declog.MaxCheckpointBytes)
		}
		return State{Logs: []SeenLog{{Log: 0, Checkpoint: string(b)}}}, nil
	}
	var s State
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return State{}, fmt.Errorf("audit: the state does not read: %v", clipErr(err))
	}
	if _, err := d.Token(); err != io.EOF {
		return State{}, errors.New("audit: the state has more after its object")
	}
	for i, l := range s.Logs {
		switch {
		case l.Log < 0 || i > 0 && l.Log <= s.Logs[i-1].Log:
			return State{}, fmt.Errorf("audit: the state's log %d is not after the one before, by ascending number", l.Log)
		case len(l.Checkpoint) == 0 || len(l.Checkpoint) > declog.MaxCheckpointBytes:
			return State{}, fmt.Errorf("audit: the state's checkpoint of log %d has %d bytes, not 1 to %d", l.Log, len(l.Checkpoint), declog.MaxCheckpointBytes)
		}
	}
	// One spelling of each state: what AppendState writes.
	if want := AppendState(nil, s); !bytes.Equal(b, want) && !bytes.Equal(append(bytes.Clone(b), '\n'), want) {
		return State{}, errors.New("audit: the state is not the JSON an audit writes: each key once, as written, in order, and no other spelling")
	}
	return s, nil
}

// AppendState appends the state's JSON and a newline.
func AppendState(dst []byte, s State) []byte {
	if s.Logs == nil {
		s.Logs = []SeenLog{}
	}
	b, _ := json.Marshal(s)
	return append(append(dst, b...), '\n')
}

// seen is the checkpoint the state holds of log n, if any.
func (s State) seen(n int64) (SeenLog, bool) {
	for _, l := range s.Logs {
		if l.Log == n {
			return l, true
		}
	}
	return SeenLog{}, false
}

// clipErr shortens an error that quotes outside bytes.
func clipErr(err error) string {
	if s := err.Error(); len(s) > 160 {
		return s[:160] + "…"
	}
	return err.Error()
}
