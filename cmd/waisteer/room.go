package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/waisteer/waisteer/internal/files"
	"github.com/waisteer/waisteer/internal/room"
	"github.com/waisteer/waisteer/internal/sig"
)

// The operator's commands for keys, the room descriptor and the origin's
// key log (COMPANION §4).

func init() {
	register(&command{name: "keygen", summary: "make a private key file and print its public key", run: keygen})
	register(&command{name: "room init", summary: "sign a room descriptor and print the room id", run: roomInit})
	register(&command{name: "room show", summary: "check a room descriptor's reading and signature and print it", run: roomShow})
	register(&command{name: "keylog add", summary: "add or replace a key's entry in the origin's key log", run: keylogAdd})
	register(&command{name: "keylog revoke", summary: "mark a key's entry revoked in the origin's key log", run: keylogRevoke})
	register(&command{name: "keylog show", summary: "check a key log head and print it, optionally with its room", run: keylogShow})
}

func keygen(e *env, args []string) error {
	fs := newFlags(e, "keygen", "-o FILE [-f]")
	out := fs.String("o", "", "the private key `file` to write (mode 0600)")
	force := fs.Bool("f", false, "overwrite an existing file")
	if err := roomParseArgs(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return roomUsage(fs, "-o FILE is required")
	}
	k, err := sig.GenerateKey(nil)
	if err != nil {
		return err
	}
	if err := files.Write(*out, sig.MarshalPrivateKey(k), 0o600, *force); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, k.Public())
	return nil
}

func roomInit(e *env, args []string) error {
	fs := newFlags(e, "room init", "-key AUTHORITY.key [-origin HEX] -name NAME -o FILE [-f]")
	keyFile := fs.String("key", "", "the room authority's private key `file`")
	originHex := fs.String("origin", "", "the origin's public key, 64 hexadecimal digits; none for a room with no origin")
	name := fs.String("name", "", "the room's name, 1 to 64 bytes")
	out := fs.String("o", "", "the descriptor `file` to write")
	force := fs.Bool("f", false, "overwrite an existing file")
	if err := roomParseArgs(fs, args, 0); err != nil {
		return err
	}
	if *keyFile == "" || *out == "" || *name == "" {
		return roomUsage(fs, "-key, -name and -o are required")
	}
	k, err := roomReadKey(*keyFile)
	if err != nil {
		return err
	}
	var origin *sig.PublicKey
	if *originHex != "" {
		o, err := roomPublicKey("-origin", *originHex)
		if err != nil {
			return err
		}
		origin = &o
	}
	b, err := room.NewDescriptor(k, origin, *name)
	if err != nil {
		return err
	}
	d, err := room.ParseDescriptor(b)
	if err != nil {
		return err
	}
	if err := files.Write(*out, b, 0o644, *force); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, d.ID())
	return nil
}

func roomShow(e *env, args []string) error {
	fs := newFlags(e, "room show", "FILE")
	if err := roomParseArgs(fs, args, 1); err != nil {
		return err
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	// The room step's checks of the descriptor (COMPANION §4.1 steps 1, 2).
	d, err := room.ParseDescriptor(b)
	if err != nil {
		return err
	}
	if err := d.Verify(); err != nil {
		return err
	}
	origin := "none"
	if d.Origin != nil {
		origin = d.Origin.String()
	}
	fmt.Fprintf(e.stdout, "version    %d\nauthority  %s\norigin     %s\nname       %s\nroom id    %s\n",
		room.Version, d.Authority, origin, strconv.Quote(d.Name), d.ID())
	return nil
}

func keylogAdd(e *env, args []string) error {
	fs := newFlags(e, "keylog add", "-key ORIGIN.key [-head FILE] -entry HEX -may-sign A,B,... -o FILE [-f]")
	keyFile := fs.String("key", "", "the origin's private key `file`")
	headFile := fs.String("head", "", "the current head `file`; none to start the key log")
	entryHex := fs.String("entry", "", "the key to list, 64 hexadecimal digits")
	maySign := fs.String("may-sign", "", "the authorities it holds, comma-separated: "+strings.Join(room.Authorities(), ","))
	out := fs.String("o", "", "the head `file` to write (it may be -head's)")
	force := fs.Bool("f", false, "with no -head, overwrite an existing file: a new key log")
	if err := roomParseArgs(fs, args, 0); err != nil {
		return err
	}
	if *keyFile == "" || *entryHex == "" || *maySign == "" || *out == "" {
		return roomUsage(fs, "-key, -entry, -may-sign and -o are required")
	}
	k, err := roomReadKey(*keyFile)
	if err != nil {
		return err
	}
	key, err := roomPublicKey("-entry", *entryHex)
	if err != nil {
		return err
	}
	authorities, err := room.ParseAuthorities(*maySign)
	if err != nil {
		return fmt.Errorf("-may-sign: %w", err)
	}
	var h *room.KeyLogHead
	if *headFile != "" {
		if h, err = roomReadHead(*headFile); err != nil {
			return err
		}
	} else if _, err := os.Stat(*out); err == nil && !*force {
		return fmt.Errorf("%s exists: give it as -head to add to its key log, or -f to start a new one", *out)
	}
	b, seq, replaced, err := room.Grant(h, k, key, authorities)
	if err != nil && *headFile != "" {
		return fmt.Errorf("%s: %w", *headFile, err)
	}
	if err != nil {
		return err
	}
	if err := files.Write(*out, b, 0o644, true); err != nil {
		return err
	}
	verb := "added"
	if replaced {
		verb = "replaced"
	}
	fmt.Fprintf(e.stdout, "seq %d: %s %s: %s\n", seq, verb, key, strings.Join(authorities, ","))
	return nil
}

func keylogRevoke(e *env, args []string) error {
	fs := newFlags(e, "keylog revoke", "-key ORIGIN.key -head FILE -entry HEX -o FILE")
	keyFile := fs.String("key", "", "the origin's private key `file`")
	headFile := fs.String("head", "", "the current head `file`")
	entryHex := fs.String("entry", "", "the key to revoke, 64 hexadecimal digits")
	out := fs.String("o", "", "the head `file` to write (it may be -head's)")
	if err := roomParseArgs(fs, args, 0); err != nil {
		return err
	}
	if *keyFile == "" || *headFile == "" || *entryHex == "" || *out == "" {
		return roomUsage(fs, "-key, -head, -entry and -o are required")
	}
	k, err := roomReadKey(*keyFile)
	if err != nil {
		return err
	}
	key, err := sig.ParsePublicKey(*entryHex)
	if err != nil {
		return fmt.Errorf("-entry: %w", err)
	}
	h, err := roomReadHead(*headFile)
	if err != nil {
		return err
	}
	b, seq, err := room.Revoke(h, k, key)
	if err != nil {
		return fmt.Errorf("%s: %w", *headFile, err)
	}
	if err := files.Write(*out, b, 0o644, true); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "seq %d: revoked %s\n", seq, key)
	return nil
}

func keylogShow(e *env, args []string) error {
	fs := newFlags(e, "keylog show", "FILE [-room FILE]")
	roomFile := fs.String("room", "", "the room descriptor `file`: run the room step (COMPANION §4.1) on both")
	if err := roomParseArgs(fs, args, 1); err != nil {
		return err
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	h, err := room.ParseKeyLogHead(b)
	if err != nil {
		return err
	}
	if err := h.Verify(); err != nil {
		return fmt.Errorf("the head's signature by its origin: %w", err)
	}
	fmt.Fprintf(e.stdout, "version  %d\norigin   %s\nseq      %d\nentries  %d\n", room.Version, h.Origin, h.Seq, len(h.Entries))
	for _, en := range h.Entries {
		revoked := ""
		if en.Revoked {
			revoked = "  revoked"
		}
		fmt.Fprintf(e.stdout, "  %s  %s%s\n", en.Key, strings.Join(en.MaySign, ","), revoked)
	}
	if *roomFile == "" {
		return nil
	}
	d, err := os.ReadFile(*roomFile)
	if err != nil {
		return err
	}
	r, err := room.Open(d, b)
	if err != nil {
		return fmt.Errorf("room step: %w", err)
	}
	if r.Head() == nil {
		return fmt.Errorf("room step: the room %s names no origin, so it has no key log and this head is not read", r.ID())
	}
	fmt.Fprintf(e.stdout, "room step passes: room %s\n", r.ID())
	return nil
}

// roomParseArgs parses flags wherever they stand among the arguments (`keylog
// show FILE -room R`) and requires exactly n positional arguments.
func roomParseArgs(fs *flag.FlagSet, args []string, n int) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != n {
		return roomUsage(fs, "%d file arguments, not %d", len(pos), n)
	}
	return fs.Parse(append([]string{"--"}, pos...)) // so that fs.Arg gives them
}

func roomReadKey(path string) (sig.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return sig.PrivateKey{}, err
	}
	k, err := sig.ParsePrivateKey(b)
	if err != nil {
		return sig.PrivateKey{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// roomPublicKey reads a key given on the command line and refuses one that
// could never verify (COMPANION §2 steps 1 and 2).
func roomPublicKey(flagName, s string) (sig.PublicKey, error) {
	k, err := sig.ParsePublicKey(s)
	if err != nil {
		return k, fmt.Errorf("%s: %w", flagName, err)
	}
	if err := sig.CheckKey(k); err != nil {
		return k, fmt.Errorf("%s: %w", flagName, err)
	}
	return k, nil
}

// roomReadHead reads a key log head.
func roomReadHead(path string) (*room.KeyLogHead, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, err := room.ParseKeyLogHead(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// roomUsage prints the command's usage and returns a usage error (exit 2).
func roomUsage(fs *flag.FlagSet, format string, args ...any) error {
	fs.Usage()
	return usagef(format, args...)
}
