package dash

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzElements are the elements FuzzMPD sets, by its choice byte: "" removes.
var fuzzElements = []string{
	poolElement,
	`<ContentSteering defaultServiceLocation="b" queryBeforeStart="true">https://s.example/?a=1&amp;b=2</ContentSteering>`,
	`<ContentSteering defaultServiceLocation='x'/>`,
	"",
}

// xmlTokens is b read by encoding/xml, an independent reader that resolves
// namespaces, with the ContentSteering children of MPD (in the MPD
// namespace) left out, runs of
// character data joined and trimmed of white space, and those left empty
// dropped: what SetSteering must keep. ok is false when encoding/xml does
// not read b.
func xmlTokens(b []byte) (out []string, ok bool) {
	d := xml.NewDecoder(bytes.NewReader(b))
	depth, skipTo := 0, -1
	text := ""
	flush := func() {
		if t := strings.TrimSpace(text); t != "" {
			out = append(out, "text "+t)
		}
		text = ""
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			flush()
			return out, depth == 0
		}
		if err != nil {
			return nil, false
		}
		if skipTo >= 0 {
			switch tok.(type) {
			case xml.StartElement:
				depth++
			case xml.EndElement:
				depth--
				if depth == skipTo {
					skipTo = -1
				}
			}
			continue
		}
		switch tok := tok.(type) {
		case xml.CharData:
			text += string(tok)
			continue
		case xml.StartElement:
			depth++
			if depth == 2 && tok.Name == (xml.Name{Space: Namespace, Local: "ContentSteering"}) {
				skipTo = 1
				continue
			}
			flush()
			var s strings.Builder
			s.WriteString("start " + tok.Name.Space + ":" + tok.Name.Local)
			for _, a := range tok.Attr {
				s.WriteString(" " + a.Name.Space + ":" + a.Name.Local + "=" + a.Value)
			}
			out = append(out, s.String())
		case xml.EndElement:
			depth--
			flush()
			out = append(out, "end "+tok.Name.Space+":"+tok.Name.Local)
		case xml.Comment:
			flush()
			out = append(out, "comment "+string(tok))
		case xml.ProcInst:
			flush()
			out = append(out, "pi "+tok.Target+" "+string(tok.Inst))
		case xml.Directive:
			flush()
			out = append(out, "directive "+string(tok))
		}
	}
}

// sameOutside reports whether a and b read the same to encoding/xml outside
// the ContentSteering children of MPD; ok is false when encoding/xml does
// not read both.
func sameOutside(a, b []byte) (same, ok bool) {
	ta, oka := xmlTokens(a)
	tb, okb := xmlTokens(b)
	if !oka || !okb {
		return false, false
	}
	if len(ta) != len(tb) {
		return false, true
	}
	for i := range ta {
		if ta[i] != tb[i] {
			return false, true
		}
	}
	return true, true
}

// FuzzMPD: SetSteering never panics; it succeeds only on an MPD; its output
// is an MPD; setting twice is setting once; removing after setting is
// removing; the element set is found once, as MPD's only ContentSteering
// child; and, where encoding/xml reads the input, it reads the output the
// same outside the ContentSteering children.
func FuzzMPD(f *testing.F) {
	names, err := filepath.Glob(filepath.Join("testdata", "*.mpd"))
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		for c := range len(fuzzElements) {
			f.Add(b, uint8(c))
		}
	}
	f.Add([]byte(mpdTag+"<ContentSteering/><a><b/></a></MPD>"), uint8(0))
	f.Add([]byte("\xef\xbb\xbf<MPD xmlns='urn:mpeg:dash:schema:mpd:2011'>\r\n <!--c-->\r\n<?p x?><![CDATA[<]]></MPD>"), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, choice uint8) {
		element := fuzzElements[int(choice)%len(fuzzElements)]
		out, err := SetSteering(nil, b, element)
		if err != nil {
			if IsMPD(b) && errors.Is(err, ErrNotMPD) && !bytes.Contains(b, []byte("<!DOCTYPE")) {
				t.Fatalf("IsMPD but refused as not an MPD: %v", err)
			}
			if !errors.Is(err, ErrNotMPD) && !errors.Is(err, ErrXML) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("an error with no reason: %v", err)
			}
			return
		}
		if !IsMPD(b) || !IsMPD(out) {
			t.Fatalf("IsMPD: input %v, output %v", IsMPD(b), IsMPD(out))
		}
		again, err := SetSteering(nil, out, element)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("set twice: %v\n%q\nonce\n%q", err, again, out)
		}
		removed, err1 := SetSteering(nil, b, "")
		setRemoved, err2 := SetSteering(nil, out, "")
		if err1 != nil || err2 != nil || !bytes.Equal(removed, setRemoved) {
			t.Fatalf("removing after setting: %v %v\n%q\nremoving\n%q", err1, err2, setRemoved, removed)
		}
		if element != "" && bytes.Equal(removed, b) {
			// Nothing to replace: the output is the input with the element
			// inserted once.
			if len(out) < len(b)+len(element) {
				t.Fatalf("output %q", out)
			}
			p := 0
			for p < len(b) && out[p] == b[p] {
				p++
			}
			if !bytes.Equal(out[len(out)-(len(b)-p):], b[p:]) {
				t.Fatalf("not one insertion into the input\n%q\n%q", b, out)
			}
		}
		if same, ok := sameOutside(b, out); ok && !same {
			a, _ := xmlTokens(b)
			o, _ := xmlTokens(out)
			t.Fatalf("encoding/xml reads the input\n%q\nand the output\n%q", a, o)
		}
	})
}

// FuzzServiceLocations: any bytes are read without a panic (issue 28,
// "Warnings"); every location listed is the value of a serviceLocation
// attribute written in the bytes, listed once.
func FuzzServiceLocations(f *testing.F) {
	f.Add(`<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><BaseURL serviceLocation="a">http://a/</BaseURL><!-- <BaseURL serviceLocation="no"/> --><Period><BaseURL serviceLocation='b'>x</BaseURL><BaseURL serviceLocation="a">y</BaseURL></Period></MPD>`)
	f.Add(`<MPD><BaseURL serviceLocation="a"`)
	f.Fuzz(func(t *testing.T, in string) {
		locs, err := ServiceLocations([]byte(in))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, l := range locs {
			if seen[l] || !strings.Contains(in, `serviceLocation="`+l+`"`) && !strings.Contains(in, `serviceLocation='`+l+`'`) {
				t.Fatalf("%q: %q listed", in, l)
			}
			seen[l] = true
		}
	})
}
