package dash

import (
	"slices"
	"testing"
)

// TestServiceLocations (issue 28, "Warnings"): the serviceLocations of an
// MPD's BaseURLs at every level (ISO/IEC 23009-1 §5.6.4), written by hand
// below: in order, once each, with a prefixed BaseURL read, and none from
// a comment or from another element's attribute of the same name.
func TestServiceLocations(t *testing.T) {
	const mpd = `<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" xmlns:d="urn:mpeg:dash:schema:mpd:2011">
  <BaseURL serviceLocation="cdn-a">https://cdn-a.example/</BaseURL>
  <!-- <BaseURL serviceLocation="commented"/> -->
  <Period>
    <d:BaseURL serviceLocation='cdn-b'>https://cdn-b.example/</d:BaseURL>
    <AdaptationSet serviceLocation="not-a-base-url">
      <BaseURL serviceLocation="cdn-a">https://cdn-a.example/v/</BaseURL>
      <BaseURL>https://plain.example/</BaseURL>
    </AdaptationSet>
  </Period>
</MPD>
`
	got, err := ServiceLocations([]byte(mpd))
	if err != nil || !slices.Equal(got, []string{"cdn-a", "cdn-b"}) {
		t.Errorf("%q %v, want cdn-a, cdn-b", got, err)
	}
	if _, err := ServiceLocations([]byte("#EXTM3U\n")); err == nil {
		t.Error("an HLS playlist read as an MPD")
	}
}
