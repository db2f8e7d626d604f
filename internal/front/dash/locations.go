package dash

import "bytes"

// ServiceLocations lists the serviceLocation attribute values of the MPD
// b's BaseURL elements (ISO/IEC 23009-1 §5.6.4), wherever they are, in
// order, each once: the pathways a DASH player can be steered between,
// of which defaultServiceLocation must name one (DASH-IF Content Steering,
// §6; issue 28, "Warnings"). It reads elements only: text, comments,
// CDATA sections and processing instructions are passed over. Bytes that
// are not an MPD, or a tag that does not read, are an error.
func ServiceLocations(b []byte) ([]string, error) {
	mpd, err := root(b)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for i := mpd.start; i < len(b); {
		k := bytes.IndexByte(b[i:], '<')
		if k < 0 {
			break
		}
		i += k
		if end, err := skip(b, i); err != nil {
			return nil, err
		} else if end >= 0 {
			i = end
			continue
		}
		if bytes.HasPrefix(b[i:], []byte("</")) {
			_, end, err := endTag(b, i)
			if err != nil {
				return nil, err
			}
			i = end
			continue
		}
		t, err := startTag(b, i)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(localName(t.name(b)), []byte("BaseURL")) {
			eachAttr(b, t, func(name, value []byte) bool {
				if bytes.Equal(name, []byte("serviceLocation")) && !seen[string(value)] {
					seen[string(value)] = true
					out = append(out, string(value))
				}
				return true
			})
		}
		i = t.end
	}
	return out, nil
}
