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

	"github.com/waisteer/waisteer/decision"
	"github.com/waisteer/waisteer/internal/scenario"
	"github.com/waisteer/waisteer/policy"
)

// poolElement is the element a pool's MPD would carry (ETSI TS 103 998
// clause 5.2), written by hand.
const poolElement = `<ContentSteering defaultServiceLocation="edge-1" queryBeforeStart="false">/api/v1/steering</ContentSteering>`

func file(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSetSteering compares SetSteering's output with expected files written
// by hand (§8.3; issue 13: the element is MPD's first child, one already
// there is replaced, never doubled).
func TestSetSteering(t *testing.T) {
	for _, c := range []struct {
		name, in, element, want string
	}{
		{"none: the first child, after an XML declaration and a comment, indented as the first child", "plain.mpd", poolElement, "plain.set.mpd"},
		{"with content, replaced where it stands", "existing.mpd", poolElement, "existing.set.mpd"},
		{"with content, removed with its line", "existing.mpd", "", "existing.removed.mpd"},
		{"self-closing, replaced; CRLF and tabs", "selfclosing.mpd", poolElement, "selfclosing.set.mpd"},
		{"self-closing, removed", "selfclosing.mpd", "", "selfclosing.removed.mpd"},
		{"none, CRLF and tabs: the new line ends CRLF", "selfclosing.removed.mpd", poolElement, "selfclosing.set.mpd"},
		{"MPD under a prefix, another default namespace: written with the prefix", "prefixed.mpd", poolElement, "prefixed.set.mpd"},
		{"a prefix bound on the child; other namespaces and depths left alone", "nsmix.mpd", poolElement, "nsmix.set.mpd"},
		{"two: the first replaced, the second removed with its line", "two.mpd", poolElement, "two.set.mpd"},
		{"two, both removed", "two.mpd", "", "two.removed.mpd"},
		{"all on one line: directly after the start tag", "oneline.mpd", poolElement, "oneline.set.mpd"},
		{"removed from one line", "oneline.set.mpd", "", "oneline.mpd"},
		{"nothing to remove", "plain.mpd", "", "plain.mpd"},
		{"set on what is set", "plain.set.mpd", poolElement, "plain.set.mpd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := SetSteering(nil, file(t, c.in), c.element)
			if err != nil {
				t.Fatal(err)
			}
			if want := file(t, c.want); !bytes.Equal(got, want) {
				t.Errorf("got\n%q\nwant\n%q", got, want)
			}
			steering := mpdChildren(t, got)
			if c.element != "" && (len(steering) != 1 || steering[0] != "/api/v1/steering") {
				t.Errorf("encoding/xml reads ContentSteering children %q", steering)
			}
			if c.element == "" && len(steering) != 0 {
				t.Errorf("encoding/xml reads ContentSteering children %q", steering)
			}
		})
	}
}

// mpdChildren reads b with encoding/xml, an independent reader, and returns
// the text of each ContentSteering child of MPD in the MPD namespace.
func mpdChildren(t *testing.T, b []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var out []string
	depth := 0
	in := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("encoding/xml: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 && tok.Name != (xml.Name{Space: Namespace, Local: "MPD"}) {
				t.Fatalf("encoding/xml: root %v", tok.Name)
			}
			if depth == 2 && tok.Name == (xml.Name{Space: Namespace, Local: "ContentSteering"}) {
				out, in = append(out, ""), true
			}
		case xml.CharData:
			if in {
				out[len(out)-1] += string(tok)
			}
		case xml.EndElement:
			depth--
			in = false
		}
	}
}

// TestSetSteeringRoom_8_3: an energy room's element, as
// decision.DASHElement writes it for a policy whose initial pathway is "b",
// with queryBeforeStart set (flags bit 0) and an `&` in server_uri written
// `&amp;` (§8.3). The expected file holds the bytes §8.3 gives, written by
// hand.
func TestSetSteeringRoom_8_3(t *testing.T) {
	sc, err := scenario.Build(scenario.Spec{Policy: func(p *policy.Policy) {
		p.ServerURI = "https://steer.example/v1/steer?room=r1&v=2"
		p.Initial = 1
		p.Flags = policy.FlagQueryBeforeStart
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := SetSteering(nil, file(t, "plain.mpd"), decision.DASHElement(sc.Policy))
	if err != nil {
		t.Fatal(err)
	}
	if want := file(t, "plain.room.mpd"); !bytes.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if s := mpdChildren(t, got); len(s) != 1 || s[0] != "https://steer.example/v1/steer?room=r1&v=2" {
		t.Errorf("encoding/xml reads %q", s)
	}
}

const mpdTag = `<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="p" minBufferTime="PT2S">`

// TestIsMPD: the root is MPD in the MPD namespace (ISO/IEC 23009-1 clause
// 5.2), after a BOM, an XML declaration, comments, processing instructions
// and white space.
func TestIsMPD(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{string(file(t, "plain.mpd")), true},
		{string(file(t, "prefixed.mpd")), true},
		{bom + `<?xml version="1.0"?>` + "\n<?xml-stylesheet href='a.xsl'?>\n<!-- c -->\n" + mpdTag, true},
		{`<MPD xmlns='urn:mpeg:dash:schema:mpd:2011'/>`, true},
		{"<MPD\n\txmlns = \"urn:mpeg:dash:schema:mpd:2011\">", true},
		{`<d:MPD xmlns:d="urn:mpeg:dash:schema:mpd:2011" xmlns="x">`, true},
		{"", false},
		{"<!doctype html><title>502</title>", false},
		{`<Playlist xmlns="urn:mpeg:dash:schema:mpd:2011">`, false},
		{`<MPD profiles="p">`, false},
		{`<MPD xmlns="urn:mpeg:DASH:schema:MPD:2011">`, false},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011 ">`, false},
		{`<d:MPD xmlns="urn:mpeg:dash:schema:mpd:2011">`, false},
		{`<MPD xmlns:d="urn:mpeg:dash:schema:mpd:2011">`, false},
		{`<!DOCTYPE MPD []>` + mpdTag, false},
		{" <?xml version=\"1.0\"?>" + mpdTag, false},
		{"x" + mpdTag, false},
		{"<![CDATA[x]]>" + mpdTag, false},
		{`<!-- not closed ` + mpdTag, false},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"`, false},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011>`, false},
		{`<MPD xmlns=urn:mpeg:dash:schema:mpd:2011>`, false},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"profiles="p">`, false},
	} {
		if got := IsMPD([]byte(c.in)); got != c.want {
			t.Errorf("IsMPD(%.70q) = %v", c.in, got)
		}
	}
}

// TestRefused: what is not an MPD, an MPD that is not well-formed where it
// is read, and an element that is not one ContentSteering element, are
// refused with their reason; dst is left as it was.
func TestRefused(t *testing.T) {
	deep := mpdTag + strings.Repeat("<a>", 65) + strings.Repeat("</a>", 65) + "</MPD>"
	for _, c := range []struct {
		in, element string
		err         error
		msg         string
	}{
		{"<html></html>", poolElement, ErrNotMPD, `dash: byte 0: not an MPD: the root element is "html"`},
		{`<!DOCTYPE MPD>` + mpdTag + "</MPD>", poolElement, ErrNotMPD, "dash: byte 0: not an MPD: a document type declaration, which is not read"},
		{`<MPD xmlns="urn:x">`, "", ErrNotMPD, `dash: byte 0: not an MPD: MPD is in namespace "urn:x", not urn:mpeg:dash:schema:mpd:2011`},
		{mpdTag + "<Period>", poolElement, ErrXML, "dash: byte 0: not well-formed XML: MPD not closed"},
		{mpdTag + "<Period></period></MPD>", poolElement, ErrXML, `dash: byte 85: not well-formed XML: end tag "period" closes "Period"`},
		{mpdTag + "</mpd>", poolElement, ErrXML, `dash: byte 77: not well-formed XML: end tag "mpd" closes "MPD"`},
		{mpdTag + `<Period id="<"/></MPD>`, poolElement, ErrXML, "dash: byte 89: not well-formed XML: '<' in an attribute value"},
		{mpdTag + "</MPD><MPD/>", poolElement, ErrXML, "dash: byte 83: not well-formed XML: an element after the MPD element"},
		{mpdTag + "</MPD>x", poolElement, ErrXML, "dash: byte 83: not well-formed XML: content after the MPD element"},
		{mpdTag + "<!-- x</MPD>", poolElement, ErrXML, "dash: byte 77: not well-formed XML: a comment not closed"},
		{mpdTag + "<?xml version='1.0'?></MPD>", poolElement, ErrXML, "dash: byte 77: not well-formed XML: an XML declaration not at the start"},
		{mpdTag + "<!ENTITY x 'y'></MPD>", poolElement, ErrXML, "dash: byte 77: not well-formed XML: '<!' that begins no comment or CDATA section"},
		{deep, poolElement, ErrXML, "dash: byte 269: not well-formed XML: elements nested deeper than 64 below MPD"},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns=""></MPD>`, poolElement, ErrXML, "dash: byte 0: not well-formed XML: xmlns declared twice"},
		{`<d:MPD xmlns:d="urn:mpeg:dash:schema:mpd:2011" xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns="x"><d:Period/></d:MPD>`, poolElement, ErrXML, "dash: byte 0: not well-formed XML: xmlns declared twice"},
		{mpdTag + `<ContentSteering xmlns:c="1" xmlns="x" xmlns="y"/></MPD>`, poolElement, ErrXML, "dash: byte 77: not well-formed XML: xmlns declared twice"},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:c="a" xmlns:c="b"><c:ContentSteering/></MPD>`, poolElement, ErrXML, "dash: byte 0: not well-formed XML: xmlns:c declared twice"},
		{`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"/>`, poolElement, ErrEmpty, "dash: byte 0: an MPD with no children (self-closing): nowhere to put ContentSteering"},
		{string(file(t, "plain.mpd")), `<dash:ContentSteering/>`, ErrElement, `dash: not one ContentSteering element: "<dash:ContentSteering/>": not named ContentSteering, unprefixed`},
		{string(file(t, "plain.mpd")), `<BaseURL>x</BaseURL>`, ErrElement, `dash: not one ContentSteering element: "<BaseURL>x</BaseURL>": not named ContentSteering, unprefixed`},
		{string(file(t, "plain.mpd")), poolElement + "\n", ErrElement, `dash: not one ContentSteering element: "<ContentSteering defaultServiceLocation=\"edge-1\" queryBefore": bytes after the element`},
		{string(file(t, "plain.mpd")), `<ContentSteering>a<b/></ContentSteering>`, ErrElement, `dash: not one ContentSteering element: "<ContentSteering>a<b/></ContentSteering>": no end tag after its text`},
		{string(file(t, "plain.mpd")), `<ContentSteering>a`, ErrElement, `dash: not one ContentSteering element: "<ContentSteering>a": no end tag`},
		{string(file(t, "plain.mpd")), `<ContentSteering/><x/>`, ErrElement, `dash: not one ContentSteering element: "<ContentSteering/><x/>": bytes after the element`},
		{string(file(t, "plain.mpd")), `ContentSteering`, ErrElement, `dash: not one ContentSteering element: "ContentSteering": not a start tag`},
		{string(file(t, "plain.mpd")), `<ContentSteering a="1"b="2"/>`, ErrElement, `dash: not one ContentSteering element: "<ContentSteering a=\"1\"b=\"2\"/>": dash: byte 22: not well-formed XML: white space expected before an attribute`},
	} {
		got, err := SetSteering([]byte("kept"), []byte(c.in), c.element)
		if !errors.Is(err, c.err) || err.Error() != c.msg {
			t.Errorf("%.50q: error %v\nwant %s", c.in, err, c.msg)
		}
		if string(got) != "kept" {
			t.Errorf("%.50q: dst %q on an error", c.in, got)
		}
	}
	// Removing from a self-closing MPD changes nothing.
	in := `<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"/>`
	if got, err := SetSteering(nil, []byte(in), ""); err != nil || string(got) != in {
		t.Errorf("%q, %v", got, err)
	}
}
