package declog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/tlog"
)

// MaxProofBytes bounds a proof a reader takes: a proof has at most 2·63
// hashes, each 44 bytes of base64 in JSON.
const MaxProofBytes = 16 << 10

// Inclusion is a decision's place in the log and the proof that the tree
// of Size leaves holds it (RFC 6962 §2.1.1), as the log's route serves it.
// Log names the log, and is written only when it is not 0 (issue 31), so
// that a proof in log 0 is issue 16's JSON.
type Inclusion struct {
	Log   int64       `json:"log,omitempty"`
	Index int64       `json:"index"`
	Size  int64       `json:"size"`
	Proof []tlog.Hash `json:"proof"`
}

// Consistency is the proof that the tree of Size leaves extends the tree
// of From leaves (RFC 6962 §2.1.2).
type Consistency struct {
	From  int64       `json:"from"`
	Size  int64       `json:"size"`
	Proof []tlog.Hash `json:"proof"`
}

// ParseInclusion reads an inclusion proof's JSON strictly.
func ParseInclusion(b []byte) (Inclusion, error) {
	var p Inclusion
	if err := strict(b, &p); err != nil {
		return p, fmt.Errorf("declog: an inclusion proof: %v", err)
	}
	if p.Log < 0 {
		return p, fmt.Errorf("declog: an inclusion proof in log %d", p.Log)
	}
	if p.Index < 0 || p.Index >= p.Size {
		return p, fmt.Errorf("declog: an inclusion proof of leaf %d in a tree of %d", p.Index, p.Size)
	}
	return p, nil
}

// ParseConsistency reads a consistency proof's JSON strictly.
func ParseConsistency(b []byte) (Consistency, error) {
	var p Consistency
	if err := strict(b, &p); err != nil {
		return p, fmt.Errorf("declog: a consistency proof: %v", err)
	}
	if p.From < 0 || p.From > p.Size {
		return p, fmt.Errorf("declog: a consistency proof from %d leaves to %d", p.From, p.Size)
	}
	return p, nil
}

// strict decodes one JSON object with no unknown field and nothing after
// it, and a proof of at most 126 hashes.
func strict(b []byte, v any) error {
	if len(b) > MaxProofBytes {
		return fmt.Errorf("%d bytes, more than %d", len(b), MaxProofBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		// encoding/json quotes an unknown field's name or a number whole.
		return errors.New(clip(err.Error()))
	}
	// More is false before a closing brace or bracket, as if the object
	// were in a list: only the end of the input ends it.
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more after the object")
	}
	var n int
	switch p := v.(type) {
	case *Inclusion:
		n = len(p.Proof)
		if p.Proof == nil {
			p.Proof = []tlog.Hash{} // written [], never null
		}
	case *Consistency:
		n = len(p.Proof)
		if p.Proof == nil {
			p.Proof = []tlog.Hash{}
		}
	}
	if n > 126 {
		return fmt.Errorf("%d hashes, more than a proof has", n)
	}
	// Exactly the JSON the server writes (its keys once each, as written,
	// and each hash in canonical base64), then at most a newline: a
	// reader of outside bytes takes one spelling of each value.
	if want, _ := json.Marshal(v); !bytes.Equal(bytes.TrimSuffix(b, []byte("\n")), want) {
		return errors.New("not the JSON the log writes: each key once, as written, in order, and no other spelling")
	}
	return nil
}
