package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/waisteer/waisteer/evidence"
	"github.com/waisteer/waisteer/evidence/description"
	"github.com/waisteer/waisteer/internal/reason"
	"github.com/waisteer/waisteer/internal/sig"
)

// `record sign` and `record show` are a hop's tools for its per-hop session
// records, WMH1 (COMPANION §5): write one from a description and sign it;
// print one and check it against a room.

func init() {
	register(&command{
		name:    "record sign",
		summary: "sign a per-hop session record (WMH1) described in TOML or JSON",
		run:     recordSign,
	})
	register(&command{
		name:    "record show",
		summary: "print a per-hop session record's fields and digest, and check it",
		run:     recordShow,
	})
}

const recordSignUsage = `-key HOP.key [-o OUT] FILE

Reads FILE (TOML or JSON by its extension; - reads JSON from standard input)
and signs the record it describes: room, start, end, class, joules,
sessions, tracks, subscriber_us; cmd/waisteer/testdata/record/example.toml
shows each. The record must pass the rules a reader applies (COMPANION §5).
It is written to OUT, or to standard output when that is not a terminal; its
digest is printed on standard output, or on standard error when the record
goes to standard output.`

func recordSign(e *env, args []string) error {
	fs := newFlags(e, "record sign", recordSignUsage)
	keyFile := fs.String("key", "", "the hop's private key `file`")
	out := fs.String("o", "", "write the record to `file` (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("one FILE is needed: a .toml or .json description, or - for JSON on standard input")
	}
	if *keyFile == "" {
		return usagef("-key is needed: the hop's key signs the record")
	}
	if *out == "" && isTerminal(e.stdout) {
		return usagef("the record is binary: give -o FILE, or redirect standard output")
	}
	name := fs.Arg(0)
	isTOML := false
	switch {
	case name == "-":
	case strings.EqualFold(filepath.Ext(name), ".toml"):
		isTOML = true
	case strings.EqualFold(filepath.Ext(name), ".json"):
	default:
		return usagef("%s: FILE must end in .toml or .json (or be - for JSON on standard input)", name)
	}
	keyBytes, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	key, err := sig.ParsePrivateKey(keyBytes)
	if err != nil {
		return fmt.Errorf("%s: %v", *keyFile, err)
	}
	var data []byte
	if name == "-" {
		name = "standard input"
		data, err = io.ReadAll(e.stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return err
	}

	r, err := description.Read(name, data, isTOML, key.Public())
	if err != nil {
		return err
	}
	b := evidence.SignRecord(r, key)
	digest := r.Digest()
	if *out == "" {
		if _, err := e.stdout.Write(b); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, digest)
		return nil
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, digest)
	return nil
}

const recordShowUsage = `[-room HEX] [-json] [-split] FILE

Prints the per-hop session record in FILE (- reads standard input) with its
digest; with -room, checks it against the room id (wrong_room, bad_key,
bad_signature). A record that does not read, or does not check, prints its
refusal code and exits 1. -split reads FILE as records written back to back.`

func recordShow(e *env, args []string) error {
	fs := newFlags(e, "record show", recordShowUsage)
	roomHex := fs.String("room", "", "check the record against this room id (64 hexadecimal digits)")
	asJSON := fs.Bool("json", false, "print JSON: one object for each record")
	split := fs.Bool("split", false, "read FILE as one or more records written back to back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("one FILE is needed (- for standard input)")
	}
	var room *sig.Hash
	if *roomHex != "" {
		h, err := sig.ParseHash(*roomHex)
		if err != nil {
			return usagef("-room: %v", err)
		}
		room = &h
	}
	var data []byte
	var err error
	if name := fs.Arg(0); name == "-" {
		data, err = io.ReadAll(e.stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return err
	}
	pieces := [][]byte{data}
	var tailErr error
	tailAt := 0
	if *split {
		pieces, tailErr = evidence.SplitRecords(data)
		for _, p := range pieces {
			tailAt += len(p)
		}
	}
	refused := false
	for i, p := range pieces {
		if *split && !*asJSON {
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "record %d, %d bytes\n", i, len(p))
		}
		if !recShowOne(e, p, room, *asJSON) {
			refused = true
		}
	}
	if tailErr != nil {
		refused = true
		if *asJSON {
			recWriteJSON(e, recRefusal(tailErr, tailAt))
		} else {
			if len(pieces) > 0 {
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "refuse %v\n", tailErr)
		}
	}
	if refused {
		return exitCode(1)
	}
	return nil
}

// recJSON is `record show -json`'s object. Integers that can pass 2^53
// are decimal strings, as in the corpus file (COMPANION §8).
type recJSON struct {
	Outcome      string         `json:"outcome"`
	Reason       string         `json:"reason,omitempty"`
	Detail       string         `json:"detail,omitempty"`
	Offset       *int           `json:"offset,omitempty"`
	Digest       string         `json:"digest,omitempty"`
	Room         string         `json:"room,omitempty"`
	Hop          string         `json:"hop,omitempty"`
	Start        string         `json:"start,omitempty"`
	End          string         `json:"end,omitempty"`
	Class        *uint8         `json:"class,omitempty"`
	Label        string         `json:"label,omitempty"`
	Joules       string         `json:"joules,omitempty"`
	Sessions     *uint32        `json:"sessions,omitempty"`
	Tracks       []recJSONTrack `json:"tracks,omitempty"`
	SubscriberUs []string       `json:"subscriber_us,omitempty"`
	Sig          string         `json:"sig,omitempty"`
	Check        *recJSONCheck  `json:"check,omitempty"`
}

type recJSONTrack struct {
	Kind      string `json:"kind"`
	Direction string `json:"direction"`
	Bytes     string `json:"bytes"`
}

type recJSONCheck struct {
	Room    string `json:"room"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

func recRefusal(err error, offset int) recJSON {
	j := recJSON{Outcome: "refuse", Reason: string(reason.Of(err)), Detail: err.Error()}
	var re *reason.Error
	if errors.As(err, &re) {
		j.Detail = re.Detail
	}
	if offset >= 0 {
		j.Offset = &offset
	}
	return j
}

func recWriteJSON(e *env, v any) {
	b, _ := json.Marshal(v) // plain strings, numbers and slices: Marshal cannot fail
	fmt.Fprintf(e.stdout, "%s\n", b)
}

// recShowOne prints one record and reports whether it reads and checks.
func recShowOne(e *env, b []byte, room *sig.Hash, asJSON bool) bool {
	r, err := evidence.ParseRecord(b)
	if err != nil {
		if asJSON {
			recWriteJSON(e, recRefusal(err, -1))
		} else {
			fmt.Fprintf(e.stdout, "refuse %v\n", err)
		}
		return false
	}
	var checkErr error
	if room != nil {
		checkErr = r.Check(*room)
	}
	label := r.Class.Label()
	if r.Class == evidence.Unmetered {
		label = "unmetered"
	}
	if asJSON {
		class, sessions := uint8(r.Class), r.Sessions
		j := recJSON{
			Outcome: "accept", Digest: r.Digest().String(), Room: r.Room.String(), Hop: r.Hop.String(),
			Start: recU64(r.Start), End: recU64(r.End), Class: &class, Label: label, Joules: recU64(r.Joules),
			Sessions: &sessions, Tracks: []recJSONTrack{}, Sig: r.Sig.String(),
		}
		for _, t := range r.Tracks {
			j.Tracks = append(j.Tracks, recJSONTrack{recTrackKind(t.Kind), recTrackDirection(t.Direction), recU64(t.Bytes)})
		}
		for _, us := range r.SubscriberUs {
			j.SubscriberUs = append(j.SubscriberUs, recU64(us))
		}
		if room != nil {
			j.Check = &recJSONCheck{Room: room.String(), Outcome: "accept"}
			if checkErr != nil {
				j.Outcome = "refuse"
				j.Check.Outcome, j.Check.Reason = "refuse", string(reason.Of(checkErr))
				var re *reason.Error
				if errors.As(checkErr, &re) {
					j.Check.Detail = re.Detail
				}
			}
		}
		recWriteJSON(e, j)
		return checkErr == nil
	}
	w := e.stdout
	fmt.Fprintf(w, "digest         %s\n", r.Digest())
	fmt.Fprintf(w, "room           %s\n", r.Room)
	fmt.Fprintf(w, "hop            %s\n", r.Hop)
	fmt.Fprintf(w, "start          %d µs%s\n", r.Start, recRoomTime(r.Start))
	fmt.Fprintf(w, "end            %d µs%s\n", r.End, recRoomTime(r.End))
	fmt.Fprintf(w, "span           %d µs\n", r.End-r.Start)
	fmt.Fprintf(w, "class          %d %s\n", r.Class, label)
	fmt.Fprintf(w, "joules         %d µJ\n", r.Joules)
	fmt.Fprintf(w, "sessions       %d\n", r.Sessions)
	fmt.Fprintf(w, "tracks         %d\n", len(r.Tracks))
	for i, t := range r.Tracks {
		fmt.Fprintf(w, "  %-12s %s %s %d bytes\n", fmt.Sprintf("[%d]", i), recTrackKind(t.Kind), recTrackDirection(t.Direction), t.Bytes)
	}
	fmt.Fprintf(w, "subscriber_us ")
	for _, us := range r.SubscriberUs {
		fmt.Fprintf(w, " %d", us)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "sig            %s\n", r.Sig)
	if room != nil {
		if checkErr != nil {
			fmt.Fprintf(w, "refuse %v\n", checkErr)
			return false
		}
		fmt.Fprintf(w, "check          accept in room %s\n", room)
	}
	return true
}

func recU64(v uint64) string { return strconv.FormatUint(v, 10) }

// recRoomTime writes a room clock instant (COMPANION §4: µs since the Unix
// epoch, UTC) as RFC 3339, when it is within the years RFC 3339 writes.
func recRoomTime(us uint64) string {
	const year10000 = 253402300800_000_000
	if us >= year10000 {
		return ""
	}
	return " (" + time.UnixMicro(int64(us)).UTC().Format("2006-01-02T15:04:05.999999Z07:00") + ")"
}

func recTrackKind(k uint8) string {
	switch k {
	case evidence.KindMedia:
		return "media"
	case evidence.KindOther:
		return "other"
	}
	return strconv.Itoa(int(k))
}

func recTrackDirection(d uint8) string {
	switch d {
	case evidence.DirIn:
		return "in"
	case evidence.DirOut:
		return "out"
	}
	return strconv.Itoa(int(d))
}
