package report

import (
	"net/http"
	"slices"
	"strings"

	"github.com/dunglas/httpsfv"
)

// cmcdKeys are the CMCD keys §4.4 reads, CTA-5004-B's `bl` (buffer length,
// milliseconds) and `mtp` (measured throughput, kilobits per second).
var cmcdKeys = [2]string{"bl", "mtp"}

// cmcdHeader is the header shard that carries bl and mtp (§4.4), in the
// canonical form net/http gives header keys.
const cmcdHeader = "Cmcd-Request"

// cmcdRequest returns the CMCD-Request field's value: its field lines
// combined into one with ", " (RFC 9110 §5.3, RFC 9651 §4.2), and false when
// h has no such line. The name is matched case-insensitively (COMPANION §6
// "CMCD-Request"): net/http gives canonical keys, which the first lookup
// finds; a header built by hand may hold other spellings, taken after the
// canonical one in bytewise order of the key so that the result is fixed.
func cmcdRequest(h http.Header) (string, bool) {
	lines, ok := h[cmcdHeader]
	var others []string
	for k := range h {
		if len(k) == len(cmcdHeader) && k != cmcdHeader && strings.EqualFold(k, cmcdHeader) {
			others = append(others, k)
		}
	}
	if others != nil {
		slices.Sort(others)
		lines = lines[:len(lines):len(lines)] // so that append copies, never writing into h
		for _, k := range others {
			lines = append(lines, h[k]...)
		}
		ok = true
	}
	if !ok {
		return "", false
	}
	if len(lines) == 1 {
		return lines[0], true
	}
	return strings.Join(lines, ", "), true
}

// cmcdKeyValues are bl and mtp as a Dictionary gives them (§4.4): v[i]
// when has[i]; given[i] when cmcdKeys[i] is a member at all, whether or not
// its value reads.
type cmcdKeyValues struct {
	v     [2]uint64
	has   [2]bool
	given [2]bool
}

// readDictionary reads bl and mtp from text as an RFC 9651 Dictionary
// (§4.4): the value of each that reads, and has[i] when cmcdKeys[i] does.
// A text that does not parse gives neither key, and parsed false.
func readDictionary(text string) (k cmcdKeyValues, parsed bool) {
	if k, ok := readSimpleDictionary(text); ok {
		return k, true
	}
	d, ok := parseDictionary(text)
	if !ok {
		return k, false
	}
	for i, key := range cmcdKeys {
		// A key given twice keeps its last value (RFC 9651 §4.2.2), as
		// httpsfv's Dictionary does.
		if m, ok := d.Get(key); ok {
			k.given[i] = true
			k.v[i], k.has[i] = keyValue(m)
		}
	}
	return k, true
}

// readSimpleDictionary is readDictionary for the Dictionaries players send:
// each member a key alone (a Boolean), or with an Integer, a String without
// escapes or a Token, and no parameters, read as RFC 9651 §4.2 parses them
// (leading SP, then members apart by a comma with OWS around it, then
// trailing OWS). It allocates nothing. ok is false for any other text:
// another item, parameters, an Inner List, or text that is no Dictionary,
// which readDictionary parses in full (and FuzzSimpleDictionary holds the
// two to one answer).
func readSimpleDictionary[T string | []byte](s T) (k cmcdKeyValues, ok bool) {
	i := 0
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i == len(s) {
		return k, true // no member
	}
	for {
		// A key: lcalpha or "*", then lcalpha, DIGIT, "_", "-", "." or "*".
		if !isLower(s[i]) && s[i] != '*' {
			return k, false
		}
		start := i
		for i++; i < len(s) && isKeyChar(s[i]); i++ {
		}
		which := -1
		switch string(s[start:i]) {
		case cmcdKeys[0]:
			which = 0
		case cmcdKeys[1]:
			which = 1
		}
		// Each value replaces the key's before (§4.2.2); only a
		// non-negative Integer gives the key a value (keyValue).
		n, integer := uint64(0), false
		if i < len(s) && s[i] == '=' {
			i++
			if i == len(s) {
				return k, false
			}
			switch c := s[i]; {
			case c == '-' || '0' <= c && c <= '9': // an Integer: at most 15 digits
				negative := c == '-'
				if negative {
					i++
				}
				digits := i
				for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
					n = n*10 + uint64(s[i]-'0')
				}
				if i == digits || i-digits > 15 || i < len(s) && s[i] == '.' { // none, too many, or a Decimal
					return k, false
				}
				integer = !negative || n == 0
			case c == '"': // a String, none of whose characters is escaped
				for i++; i < len(s) && s[i] != '"'; i++ {
					if s[i] == '\\' || s[i] < 0x20 || s[i] > 0x7e {
						return k, false
					}
				}
				if i == len(s) {
					return k, false
				}
				i++
			case isAlpha(c) || c == '*': // a Token
				for i++; i < len(s) && isTokenChar(s[i]); i++ {
				}
			default:
				return k, false
			}
		}
		if which >= 0 {
			k.v[which], k.has[which], k.given[which] = 0, false, true
			if integer {
				k.v[which], k.has[which] = n, true
			}
		}
		if i < len(s) && s[i] == ';' { // parameters
			return k, false
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return k, true
		}
		if s[i] != ',' {
			return k, false
		}
		for i++; i < len(s) && (s[i] == ' ' || s[i] == '\t'); i++ {
		}
		if i == len(s) { // a trailing comma
			return k, false
		}
	}
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// isKeyChar is a character of a key after its first (RFC 9651 §3.1.2).
func isKeyChar(c byte) bool {
	return isLower(c) || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*'
}

// parseDictionary parses text as an RFC 9651 Dictionary (§4.2.2 of that
// RFC) with §4.4's Byte Sequence rule.
func parseDictionary(text string) (*httpsfv.Dictionary, bool) {
	text, ok := padByteSequences(text)
	if !ok {
		return nil, false
	}
	d, err := httpsfv.UnmarshalDictionary([]string{text})
	if err != nil {
		return nil, false
	}
	return d, true
}

// keyValue is §4.4's reading of a key's value: an Integer of 0 or above,
// whatever parameters it carries (COMPANION §6 "CMCD items"); or a non-empty
// Inner List of such Integers, each with any parameters and the list's own
// ignored (COMPANION §6 "Inner Lists"): the least of them. Anything else
// (a Decimal, a String, a Token, a Boolean, a Date, ...) is absent.
func keyValue(m httpsfv.Member) (uint64, bool) {
	switch m := m.(type) {
	case httpsfv.Item:
		return nonNegative(m.Value)
	case httpsfv.InnerList:
		if len(m.Items) == 0 {
			return 0, false
		}
		least, ok := nonNegative(m.Items[0].Value)
		if !ok {
			return 0, false
		}
		for _, it := range m.Items[1:] {
			n, ok := nonNegative(it.Value)
			if !ok {
				return 0, false
			}
			least = min(least, n)
		}
		return least, true
	}
	return 0, false
}

// nonNegative reads a bare item that is an Integer of 0 or above. httpsfv
// gives an Integer as int64 and nothing else as int64. "-0" is the Integer 0.
func nonNegative(b any) (uint64, bool) {
	n, ok := b.(int64)
	if !ok || n < 0 {
		return 0, false
	}
	return uint64(n), true
}

// padByteSequences applies §4.4's Byte Sequence rule (COMPANION §6 "Byte
// Sequences") before httpsfv parses text: in each Byte Sequence, = is
// appended until the content's length is a multiple of 4, and the content
// must then be exactly the RFC 4648 §4 base64 of some octets. It returns the
// text with each Byte Sequence so padded, and false when one breaks the
// rule: the Dictionary then gives neither key.
//
// httpsfv decodes a Byte Sequence with encoding/base64's StdEncoding, which
// refuses missing padding (RFC 9651 §4.2.7 says a parser should accept it,
// and this text supplies it) and accepts non-zero pad bits (which this text
// refuses). So the content is checked here and handed to httpsfv padded.
//
// Finding the Byte Sequences needs no parse: outside a String, a Display
// String and a Token (which may hold ":"), a ":" of a valid Dictionary opens
// or closes a Byte Sequence, and no other rule puts one there. So for a text
// that is valid with its padding supplied, the sequences found here are its
// Byte Sequences; for any other text, padding inside what is taken for one
// changes only base64 characters between two ":", which cannot make httpsfv
// accept the text.
func padByteSequences(text string) (string, bool) {
	var b strings.Builder // written only when a sequence lacks padding
	done := 0             // text[:done] is in b
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '"': // sf-string: to the closing ", past each \ escape
			i++
			for i < len(text) && text[i] != '"' {
				if text[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '%' && i+1 < len(text) && text[i+1] == '"': // sf-displaystring: no escapes but %XX
			i += 2
			for i < len(text) && text[i] != '"' {
				i++
			}
			i++
		case isAlpha(c) || c == '*': // sf-token or key: tchar, ":" and "/"
			i++
			for i < len(text) && isTokenChar(text[i]) {
				i++
			}
		case c == ':': // sf-binary
			end := strings.IndexByte(text[i+1:], ':')
			if end < 0 {
				// Never closed: httpsfv refuses the text as it is.
				i = len(text)
				break
			}
			content := text[i+1 : i+1+end]
			pad, ok := base64Padding(content)
			if !ok {
				return "", false
			}
			if pad > 0 {
				b.WriteString(text[done : i+1+end])
				b.WriteString("=="[:pad])
				done = i + 1 + end
			}
			i += end + 2
		default:
			i++
		}
	}
	if done == 0 {
		return text, true
	}
	b.WriteString(text[done:])
	return b.String(), true
}

// base64Padding checks a Byte Sequence's content by the rule of
// padByteSequences and returns how many = it lacks (0, 1 or 2).
func base64Padding(s string) (int, bool) {
	// The content is data characters, then at most two =.
	n := len(s)
	for n > 0 && s[n-1] == '=' {
		n--
	}
	data, given := s[:n], len(s)-n
	for i := 0; i < len(data); i++ {
		if !isBase64(data[i]) {
			return 0, false // outside the alphabet, or an = before the end
		}
	}
	// The data's length fixes the padding of exact base64: 0 mod 4 none,
	// 2 two, 3 one; 1 is no encoding of whole octets. The = given must be
	// at most those (the rest is supplied), and the bits the padding covers
	// must be zero (RFC 4648 §3.5 allows a decoder to refuse them; this
	// text does).
	var want int
	var mask byte
	switch len(data) % 4 {
	case 0:
		want, mask = 0, 0
	case 2:
		want, mask = 2, 0x0f
	case 3:
		want, mask = 1, 0x03
	default:
		return 0, false
	}
	if given > want {
		return 0, false
	}
	if mask != 0 && base64Value(data[len(data)-1])&mask != 0 {
		return 0, false
	}
	return want - given, true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isTokenChar is RFC 9651's tchar, ":" and "/" (§3.3.4).
func isTokenChar(c byte) bool {
	if isAlpha(c) || '0' <= c && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

// isBase64 is the alphabet of RFC 4648 §4, without the pad.
func isBase64(c byte) bool {
	return isAlpha(c) || '0' <= c && c <= '9' || c == '+' || c == '/'
}

// base64Value is the 6-bit value of an RFC 4648 §4 character.
func base64Value(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c - 'A'
	case 'a' <= c && c <= 'z':
		return c - 'a' + 26
	case '0' <= c && c <= '9':
		return c - '0' + 52
	case c == '+':
		return 62
	default: // '/'
		return 63
	}
}
