package hls

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// refLines splits b into lines, each with its line ending (RFC 8216 §4.1:
// LF or CR LF; a bare CR is part of a line).
func refLines(b string) []string {
	lines := strings.SplitAfter(b, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// refName is the tag name of a line, or "".
func refName(l string) string {
	l = strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")
	if !strings.HasPrefix(l, "#EXT") {
		return ""
	}
	name, _, _ := strings.Cut(l[1:], ":")
	return name
}

func refEnding(l string) string {
	switch {
	case strings.HasSuffix(l, "\r\n"):
		return "\r\n"
	case strings.HasSuffix(l, "\n"):
		return "\n"
	}
	return ""
}

// refSet is SetSteering's rule written over a list of lines, for a
// multivariant playlist b: the first steering line's text replaced, every
// later one dropped; with none, tag inserted after #EXTM3U and the
// EXT-X-VERSION, EXT-X-INDEPENDENT-SEGMENTS and EXT-X-START lines directly
// after it, ending as the #EXTM3U line does.
func refSet(b []byte, tag string) []byte {
	s, mark := string(b), ""
	if strings.HasPrefix(s, bom) {
		s, mark = s[len(bom):], bom
	}
	lines := refLines(s)
	eol := refEnding(lines[0])
	if eol == "" {
		eol = "\n"
	}
	var out []string
	found := false
	for _, l := range lines {
		if refName(l) != SteeringTag {
			out = append(out, l)
			continue
		}
		if !found && tag != "" {
			out = append(out, tag+refEnding(l))
		}
		found = true
	}
	if !found && tag != "" {
		h := 0
		for h+1 < len(lines) && slices.Contains([]string{"EXT-X-VERSION", "EXT-X-INDEPENDENT-SEGMENTS", "EXT-X-START"}, refName(lines[h+1])) {
			h++
		}
		out = slices.Insert(out, h+1, tag+eol)
	}
	return []byte(mark + strings.Join(out, ""))
}

// hasOtherMultivariant reports whether b holds a multivariant-only tag
// other than a steering tag.
func hasOtherMultivariant(b []byte) bool {
	for _, l := range refLines(string(b)) {
		if n := refName(l); n != SteeringTag && multivariantOnly([]byte(n)) {
			return true
		}
	}
	return false
}

// refURILine is the package doc's rule for a backup URI: not empty, not
// beginning with '#', no control bytes but tabs, no spaces or tabs at
// either end.
func refURILine(u string) bool {
	if u == "" || u[0] == '#' || strings.Trim(u, " \t") != u {
		return false
	}
	for _, c := range []byte(u) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func seeds(f *testing.F) [][]byte {
	names, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, n := range names {
		if fi, err := os.Stat(n); err != nil || fi.IsDir() {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzSetSteering: SetSteering never panics; it refuses exactly what
// Classify and the tag's rule refuse; otherwise its output is refSet's
// (everything outside the steering lines kept, byte for byte), setting
// twice is setting once, removing after setting is removing, and the
// output classifies as the input did (a playlist whose only multivariant
// tags were steering tags has none left once they are removed).
func FuzzSetSteering(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b, stationTag)
		f.Add(b, "")
	}
	f.Add([]byte("#EXTM3U\n"+stationTag), `#EXT-X-CONTENT-STEERING:SERVER-URI="x"`)
	f.Add([]byte("#EXTM3U\r\n#EXT-X-VERSION:3\r\n#EXT-X-CONTENT-STEERING:A\r"), "#EXT-X-CONTENT-STEERING:")
	f.Fuzz(func(t *testing.T, b []byte, tag string) {
		out, err := SetSteering(nil, b, tag)
		kind, cerr := Classify(b)
		badTag := tag != "" && (!strings.HasPrefix(tag, "#"+SteeringTag+":") || strings.ContainsAny(tag, "\r\n"))
		switch {
		case badTag:
			if !errors.Is(err, ErrTag) {
				t.Fatalf("tag %q: error %v", tag, err)
			}
			return
		case cerr != nil:
			if err == nil || err.Error() != cerr.Error() {
				t.Fatalf("Classify: %v; SetSteering: %v", cerr, err)
			}
			return
		case kind == Media:
			if !errors.Is(err, ErrMedia) {
				t.Fatalf("media playlist: error %v", err)
			}
			return
		case kind == NotPlaylist:
			if !errors.Is(err, ErrNotPlaylist) {
				t.Fatalf("not a playlist: error %v", err)
			}
			return
		case err != nil:
			t.Fatalf("a multivariant playlist: %v", err)
		}
		if want := refSet(b, tag); !bytes.Equal(out, want) {
			t.Fatalf("SetSteering(%q, %q)\n= %q\nwant %q", b, tag, out, want)
		}
		again, err := SetSteering(nil, out, tag)
		if tag == "" && !hasOtherMultivariant(b) {
			if k, err := Classify(out); k != NotPlaylist || !errors.Is(err, ErrEmpty) {
				t.Fatalf("the steering tags removed from %q: %v, %v", b, k, err)
			}
			return
		}
		if k, err := Classify(out); k != Multivariant || err != nil {
			t.Fatalf("output %q classifies as %v, %v", out, k, err)
		}
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("set twice: %v\n%q\nonce\n%q", err, again, out)
		}
		removed, err1 := SetSteering(nil, b, "")
		setRemoved, err2 := SetSteering(nil, out, "")
		if err1 != nil || err2 != nil || !bytes.Equal(removed, setRemoved) {
			t.Fatalf("removing after setting: %v %v\n%q\nremoving\n%q", err1, err2, setRemoved, removed)
		}
		if bytes.Equal(b, removed) && tag != "" {
			// With no tag to replace, removing then setting is setting.
			if fromRemoved, err := SetSteering(nil, removed, tag); err != nil || !bytes.Equal(fromRemoved, out) {
				t.Fatalf("setting after removing: %v\n%q\nsetting\n%q", err, fromRemoved, out)
			}
		}
	})
}

// FuzzWithBackups: WithBackups never panics; it refuses what Variants
// refuses; otherwise its output is the input with one run of lines
// inserted, classifies as the input did, and lists the input's variants
// and then each variant's backups, first backups first, with no
// PATHWAY-ID and the same STABLE-VARIANT-ID.
func FuzzWithBackups(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b, "https://edge-2.example/", "https://edge-3.example/", uint8(0x1b))
	}
	f.Add([]byte("#EXTM3U\n#EXT-X-STREAM-INF:PATHWAY-ID=\"a\"\nu"), "b/", "c/", uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, p1, p2 string, counts uint8) {
		calls := 0
		backup := func(uri string) []string {
			n := int(counts>>(2*(calls%4))) & 3 // 0 to 3 backups, by variant
			calls++
			return []string{p1 + uri, p2 + uri, "third/" + uri}[:n]
		}
		out, err := WithBackups(nil, b, backup)
		in, verr := Variants(b)
		if verr != nil {
			if err == nil || err.Error() != verr.Error() {
				t.Fatalf("Variants: %v; WithBackups: %v", verr, err)
			}
			return
		}
		calls = 0
		bad := false
		for _, v := range in {
			bs := backup(v.URI)
			for _, u := range bs[:min(2, len(bs))] {
				bad = bad || !refURILine(u)
			}
		}
		calls = 0
		if bad != errors.Is(err, ErrBackup) || !bad && err != nil {
			t.Fatalf("backups bad %v; WithBackups: %v", bad, err)
		}
		if bad {
			return
		}
		if len(out) < len(b) {
			t.Fatalf("output shorter than the input\n%q\n%q", b, out)
		}
		k, _ := Classify(b)
		if k2, err := Classify(out); k2 != k || err != nil {
			t.Fatalf("output classifies as %v, %v; input %v", k2, err, k)
		}
		// One contiguous insertion: b = out's prefix and suffix.
		p := 0
		for p < len(b) && out[p] == b[p] {
			p++
		}
		if !bytes.Equal(out[len(out)-(len(b)-p):], b[p:]) {
			t.Fatalf("not one insertion into the input\n%q\n%q", b, out)
		}
		calls = 0
		want := slices.Clone(in)
		var second []Variant
		for _, v := range in {
			bs := backup(v.URI)
			if len(bs) > 0 {
				want = append(want, Variant{URI: bs[0], StableID: v.StableID})
			}
			if len(bs) > 1 {
				second = append(second, Variant{URI: bs[1], StableID: v.StableID})
			}
		}
		want = append(want, second...)
		got, err := Variants(out)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("variants of the output: %v\n%q\nwant\n%q", err, got, want)
		}
	})
}

// FuzzBackup (issue 28, "Backups"): Backup never panics; what it writes
// holds no steering tag line and no variant (EXT-X-STREAM-INF or
// EXT-X-I-FRAME-STREAM-INF) with a PATHWAY-ID attribute; every variant of
// the input is listed on the viewer's pathway with its URI (and so every
// "{$name}" reference in it, rfc8216bis-22 §4.3) as own wrote it; and a
// backup playlist read again with nothing to change is itself.
func FuzzBackup(f *testing.F) {
	for _, b := range seeds(f) {
		f.Add(b, "https://edge-2.example/")
	}
	f.Add([]byte(steeredOrigin), "https://edge-2.example/{$x}/")
	f.Add([]byte("#EXTM3U\n#EXT-X-STREAM-INF:PATHWAY-ID=\"a\",B=1\n{$v}.m3u8\n#EXT-X-STREAM-INF:B=1,PATHWAY-ID=\"b\"\n{$v}.m3u8\n"), "b/")
	f.Fuzz(func(t *testing.T, b []byte, p2 string) {
		own := func(uri string) string { return "https://edge-1.example/" + uri }
		out, err := Backup(nil, b, own, func(uri string) []string { return []string{p2 + uri} })
		if err != nil {
			return
		}
		lines := refLines(string(out))
		uris := map[string]bool{}
		for i, l := range lines {
			name := refName(l)
			if name == SteeringTag {
				t.Fatalf("a steering tag at line %d:\n%q", i+1, out)
			}
			if name == "EXT-X-STREAM-INF" || name == "EXT-X-I-FRAME-STREAM-INF" {
				text := strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")
				for _, a := range splitAttrs(text[len(name)+2:]) {
					if k, _, _ := strings.Cut(a, "="); k == "PATHWAY-ID" {
						t.Fatalf("PATHWAY-ID at line %d:\n%q", i+1, out)
					}
				}
			}
			uris[strings.TrimSuffix(strings.TrimSuffix(l, "\n"), "\r")] = true
		}
		in, verr := Variants(b)
		if verr != nil {
			t.Fatalf("Backup wrote what Variants refuses (%v):\n%q", verr, b)
		}
		for _, v := range in {
			if !uris[own(v.URI)] {
				t.Fatalf("variant %q not on the viewer's pathway as written:\n%q", v.URI, out)
			}
		}
		// Lines that are neither a variant, a URI line nor a steering tag
		// (the header, EXT-X-DEFINE, renditions, comments, blank lines)
		// are all kept, in order, byte for byte.
		others := func(b []byte) []string {
			var out []string
			for _, l := range refLines(string(b)) {
				switch refName(l) {
				case SteeringTag, "EXT-X-STREAM-INF", "EXT-X-I-FRAME-STREAM-INF":
					continue
				}
				text := strings.TrimSuffix(l, refEnding(l))
				if text == "" || text[0] == '#' || strings.Trim(text, " \t") == "" {
					out = append(out, l)
				}
			}
			return out
		}
		if got, want := others(out), others(b); !slices.Equal(got, want) {
			t.Fatalf("other lines %q, want %q", got, want)
		}
		again, err := Backup(nil, out, func(string) string { return "" }, func(string) []string { return nil })
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("read again: %v\n%q\nwas\n%q", err, again, out)
		}
	})
}

// FuzzPlaceRenditions (issue 28, "Backups' renditions"): any playlist is
// read without a panic; with no URI placed and every variant on the own
// pathway, a playlist that reads is written back byte for byte; with URIs
// placed on three pathways, what is written is still a multivariant
// playlist, every backup group a variant names is declared by an
// EXT-X-MEDIA line, and every placed URI is on its pathway.
func FuzzPlaceRenditions(f *testing.F) {
	f.Add("#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"x\",URI=\"a.m3u8\"\n#EXT-X-STREAM-INF:BANDWIDTH=1,AUDIO=\"a\"\nv.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=1,AUDIO=\"a\"\nb1/v.m3u8\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"i.m3u8\"")
	f.Add("#EXTM3U\r\n#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"s\",NAME=\"x\",URI=\"s.m3u8\"\r\n#EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID=\"c\",NAME=\"y\",INSTREAM-ID=\"CC1\"\r\n#EXT-X-STREAM-INF:BANDWIDTH=1,SUBTITLES=\"s\",CLOSED-CAPTIONS=\"c\"\r\nb2/v.m3u8")
	f.Add("#EXTM3U\n#EXT-X-MEDIA:GROUP-ID=\"a-backup1\",URI=\"x\"\n#EXT-X-MEDIA:GROUP-ID=\"a\",URI=\"y\"\n#EXT-X-STREAM-INF:AUDIO=\"a\"\nb1/z")
	f.Fuzz(func(t *testing.T, in string) {
		b := []byte(in)
		same, err := PlaceRenditions(nil, b, 3, func(string) int { return 0 }, func(string, int) string { return "" })
		if err == nil && !bytes.Equal(same, b) {
			t.Fatalf("nothing placed, yet\n%q\nwritten\n%q", in, same)
		}
		// A variant's URI beginning "b1/" or "b2/" is on backup 1 or 2.
		which := func(u string) int {
			switch {
			case strings.HasPrefix(u, "b1/"):
				return 1
			case strings.HasPrefix(u, "b2/"):
				return 2
			}
			return 0
		}
		out, err := PlaceRenditions(nil, b, 3, which, func(u string, k int) string { return "http://p" + string(rune('0'+k)) + "/" + u })
		if err != nil {
			return
		}
		if k, _ := Classify(b); k == Multivariant {
			if k2, err := Classify(out); k2 != Multivariant {
				t.Fatalf("%q written %q: %v %v", in, out, k2, err)
			}
		}
		declared := map[string]bool{}
		for _, l := range refLines(string(out)) {
			if refName(l) == "EXT-X-MEDIA" {
				if _, g, ok := strings.Cut(l, `GROUP-ID=`); ok {
					if q, ok := strings.CutPrefix(g, `"`); ok {
						g, _, _ = strings.Cut(q, `"`)
					} else {
						g, _, _ = strings.Cut(strings.TrimRight(g, "\r\n"), ",")
					}
					declared[g] = true
				}
			}
		}
		for _, l := range refLines(string(out)) {
			if refName(l) != "EXT-X-STREAM-INF" || !strings.Contains(l, "-backup") {
				continue
			}
			for _, a := range []string{`AUDIO="`, `SUBTITLES="`, `VIDEO="`} {
				if _, g, ok := strings.Cut(l, ","+a); ok {
					g, _, _ = strings.Cut(g, `"`)
					if strings.Contains(g, "-backup") && !declared[g] {
						t.Fatalf("%q written %q: group %q named, not declared", in, out, g)
					}
				}
			}
		}
	})
}
