package dash

import (
	"fmt"
	"strings"
	"testing"
)

// benchMPD is a live MPD of some 4 KB: a Period of video, audio and
// subtitle adaptation sets, with or without a ContentSteering element.
func benchMPD(steering bool) []byte {
	var s strings.Builder
	s.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	s.WriteString(`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:cenc="urn:mpeg:cenc:2013" type="dynamic" availabilityStartTime="2026-12-01T00:00:00Z" publishTime="2026-12-01T11:00:00Z" minimumUpdatePeriod="PT2S" timeShiftBufferDepth="PT1M" maxSegmentDuration="PT2S" minBufferTime="PT4S" profiles="urn:mpeg:dash:profile:isoff-live:2011,urn:dvb:dash:profile:dvb-dash:2014">` + "\n")
	if steering {
		s.WriteString(`  <ContentSteering defaultServiceLocation="a" queryBeforeStart="false">https://old.example/steer</ContentSteering>` + "\n")
	}
	s.WriteString("  <BaseURL serviceLocation=\"a\">https://a.cdn.example/live/</BaseURL>\n  <BaseURL serviceLocation=\"b\">https://b.cdn.example/live/</BaseURL>\n")
	s.WriteString(`  <Period id="p0" start="PT0S">` + "\n")
	s.WriteString(`    <AdaptationSet id="1" contentType="video" mimeType="video/mp4" segmentAlignment="true" startWithSAP="1" maxWidth="1920" maxHeight="1080">` + "\n")
	s.WriteString(`      <ContentProtection schemeIdUri="urn:mpeg:dash:mp4protection:2011" value="cenc" cenc:default_KID="0123abcd-0123-abcd-0123-0123456789ab"/>` + "\n")
	s.WriteString(`      <SegmentTemplate timescale="90000" duration="180000" startNumber="1" media="$RepresentationID$/$Number%08d$.m4s" initialization="$RepresentationID$/init.mp4"/>` + "\n")
	for i := range 8 {
		fmt.Fprintf(&s, `      <Representation id="v%d" bandwidth="%d" codecs="avc1.640028" width="%d" height="%d" frameRate="30000/1001" sar="1:1"/>`+"\n", i, 500_000*(i+1), 240*(i+1), 135*(i+1))
	}
	s.WriteString("    </AdaptationSet>\n")
	for _, l := range []string{"en", "de", "fr"} {
		fmt.Fprintf(&s, `    <AdaptationSet id="a-%s" contentType="audio" mimeType="audio/mp4" lang="%s" segmentAlignment="true">`+"\n", l, l)
		s.WriteString(`      <Role schemeIdUri="urn:mpeg:dash:role:2011" value="main"/>` + "\n")
		fmt.Fprintf(&s, `      <Representation id="a-%s" bandwidth="128000" codecs="mp4a.40.2" audioSamplingRate="48000"><AudioChannelConfiguration schemeIdUri="urn:mpeg:dash:23003:3:audio_channel_configuration:2011" value="2"/></Representation>`+"\n", l)
		s.WriteString("    </AdaptationSet>\n")
	}
	s.WriteString("  </Period>\n")
	s.WriteString(`  <UTCTiming schemeIdUri="urn:mpeg:dash:utc:http-iso:2014" value="https://time.example/iso"/>` + "\n</MPD>\n")
	return []byte(s.String())
}

// BenchmarkSetSteering: the element inserted into, and replaced in, a 4 KB
// MPD, into a reused buffer.
func BenchmarkSetSteering(b *testing.B) {
	for _, c := range []struct {
		name string
		in   []byte
	}{{"insert", benchMPD(false)}, {"replace", benchMPD(true)}} {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]byte, 0, 8192)
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = SetSteering(dst[:0], c.in, poolElement); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIsMPD(b *testing.B) {
	in := benchMPD(false)
	b.ReportAllocs()
	for b.Loop() {
		if !IsMPD(in) {
			b.Fatal("not an MPD")
		}
	}
}

// BenchmarkManyChildren: 20 000 ContentSteering children under an MPD
// start tag of 1 000 attributes read MPD's declarations once, not once per
// child (some 1 MB).
func BenchmarkManyChildren(b *testing.B) {
	var s strings.Builder
	s.WriteString(`<MPD xmlns="urn:mpeg:dash:schema:mpd:2011"`)
	for i := range 1000 {
		fmt.Fprintf(&s, ` xmlns:p%d="urn:example:%d"`, i, i)
	}
	s.WriteString(">")
	for i := range 20000 {
		fmt.Fprintf(&s, "<p%d:ContentSteering/>", i%1000)
	}
	s.WriteString("</MPD>")
	in := []byte(s.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SetSteering(nil, in, poolElement); err != nil {
			b.Fatal(err)
		}
	}
}
