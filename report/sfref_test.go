package report

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file is a second, independent reading of RFC 9651 §4.2 for
// Dictionaries, written from the RFC's parsing algorithms step by step, with
// §4.4's Byte Sequence rule (COMPANION §6) in place of the RFC's SHOULDs.
// The tests check it against the structured-field-tests suite, then use it
// as the reference the fuzzer compares the package's reading (a scan for
// Byte Sequences, then httpsfv) with.

// refBare is a bare item: kind 'i' Integer, 'd' Decimal, 's' String, 't'
// Token, 'b' Byte Sequence, '?' Boolean, '@' Date, '%' Display String.
type refBare struct {
	kind byte
	n    int64  // Integer, Date, Boolean (0 or 1)
	s    string // the rest, decoded; a Decimal as written
}

type refParam struct {
	key string
	val refBare
}

type refItem struct {
	bare   refBare
	params []refParam
}

type refMember struct {
	key    string
	inner  bool
	items  []refItem // one for an Item
	params []refParam
}

type refParser struct {
	s   string
	err error
}

func (p *refParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *refParser) peek() (byte, bool) {
	if p.err != nil || len(p.s) == 0 {
		return 0, false
	}
	return p.s[0], true
}

func (p *refParser) skip(set string) {
	for len(p.s) > 0 && strings.IndexByte(set, p.s[0]) >= 0 {
		p.s = p.s[1:]
	}
}

// refDictionary is RFC 9651 §4.2 with field type Dictionary: its members in
// the order of their keys' first appearance, each with its last value.
func refDictionary(text string) ([]refMember, error) {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return nil, fmt.Errorf("not ASCII")
		}
	}
	p := &refParser{s: text}
	p.skip(" ")
	d := p.dictionary()
	p.skip(" ")
	if p.err == nil && len(p.s) > 0 {
		p.fail("trailing %q", p.s)
	}
	if p.err != nil {
		return nil, p.err
	}
	return d, nil
}

// §4.2.2.
func (p *refParser) dictionary() []refMember {
	var d []refMember
	for len(p.s) > 0 && p.err == nil {
		m := refMember{key: p.key()}
		if c, _ := p.peek(); c == '=' && p.err == nil {
			p.s = p.s[1:]
			m.inner, m.items, m.params = p.itemOrInnerList()
		} else {
			m.items = []refItem{{bare: refBare{kind: '?', n: 1}, params: p.params()}}
		}
		replaced := false
		for i := range d {
			if d[i].key == m.key {
				d[i] = m
				replaced = true
			}
		}
		if !replaced {
			d = append(d, m)
		}
		p.skip(" \t")
		if len(p.s) == 0 {
			return d
		}
		if p.s[0] != ',' {
			p.fail("want , at %q", p.s)
			return nil
		}
		p.s = p.s[1:]
		p.skip(" \t")
		if len(p.s) == 0 {
			p.fail("trailing ,")
		}
	}
	return d
}

// §4.2.1.1.
func (p *refParser) itemOrInnerList() (bool, []refItem, []refParam) {
	if c, _ := p.peek(); c == '(' {
		items, params := p.innerList()
		return true, items, params
	}
	return false, []refItem{p.item()}, nil
}

// §4.2.1.2.
func (p *refParser) innerList() ([]refItem, []refParam) {
	p.s = p.s[1:]
	var items []refItem
	for len(p.s) > 0 && p.err == nil {
		p.skip(" ")
		if len(p.s) == 0 {
			break
		}
		if p.s[0] == ')' {
			p.s = p.s[1:]
			return items, p.params()
		}
		items = append(items, p.item())
		if c, ok := p.peek(); !ok || c != ' ' && c != ')' {
			p.fail("inner list item not followed by SP or )")
			return nil, nil
		}
	}
	p.fail("inner list not closed")
	return nil, nil
}

// §4.2.3.
func (p *refParser) item() refItem {
	b := p.bareItem()
	return refItem{bare: b, params: p.params()}
}

// §4.2.3.2.
func (p *refParser) params() []refParam {
	var ps []refParam
	for {
		c, ok := p.peek()
		if !ok || c != ';' {
			return ps
		}
		p.s = p.s[1:]
		p.skip(" ")
		k := p.key()
		v := refBare{kind: '?', n: 1}
		if c, _ := p.peek(); c == '=' && p.err == nil {
			p.s = p.s[1:]
			v = p.bareItem()
		}
		replaced := false
		for i := range ps {
			if ps[i].key == k {
				ps[i].val = v
				replaced = true
			}
		}
		if !replaced {
			ps = append(ps, refParam{k, v})
		}
	}
}

// §4.2.3.3.
func (p *refParser) key() string {
	c, ok := p.peek()
	if !ok || !('a' <= c && c <= 'z' || c == '*') {
		p.fail("bad key start")
		return ""
	}
	i := 1
	for i < len(p.s) && ('a' <= p.s[i] && p.s[i] <= 'z' || '0' <= p.s[i] && p.s[i] <= '9' || strings.IndexByte("_-.*", p.s[i]) >= 0) {
		i++
	}
	k := p.s[:i]
	p.s = p.s[i:]
	return k
}

// §4.2.3.1.
func (p *refParser) bareItem() refBare {
	c, ok := p.peek()
	switch {
	case !ok:
		p.fail("no bare item")
		return refBare{}
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		return p.token()
	case c == ':':
		return p.binary()
	case c == '?':
		return p.boolean()
	case c == '@':
		return p.date()
	case c == '%':
		return p.displayString()
	}
	p.fail("bad bare item start %q", c)
	return refBare{}
}

// §4.2.4.
func (p *refParser) number() refBare {
	kind := byte('i')
	neg := false
	if p.s[0] == '-' {
		neg = true
		p.s = p.s[1:]
	}
	if len(p.s) == 0 || p.s[0] < '0' || p.s[0] > '9' {
		p.fail("number: no digit")
		return refBare{}
	}
	num := ""
	for len(p.s) > 0 {
		c := p.s[0]
		if '0' <= c && c <= '9' {
			num += string(c)
		} else if kind == 'i' && c == '.' {
			if len(num) > 12 {
				p.fail("decimal: integer part too long")
				return refBare{}
			}
			num += "."
			kind = 'd'
		} else {
			break
		}
		p.s = p.s[1:]
		if kind == 'i' && len(num) > 15 || kind == 'd' && len(num) > 16 {
			p.fail("number too long")
			return refBare{}
		}
	}
	if kind == 'i' {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			p.fail("%v", err)
		}
		if neg {
			n = -n
		}
		return refBare{kind: 'i', n: n}
	}
	if num[len(num)-1] == '.' {
		p.fail("decimal ends with .")
		return refBare{}
	}
	if len(num)-strings.IndexByte(num, '.')-1 > 3 {
		p.fail("decimal: more than 3 fraction digits")
		return refBare{}
	}
	if neg {
		num = "-" + num
	}
	return refBare{kind: 'd', s: num}
}

// §4.2.5.
func (p *refParser) str() refBare {
	p.s = p.s[1:]
	var b strings.Builder
	for len(p.s) > 0 {
		c := p.s[0]
		p.s = p.s[1:]
		switch {
		case c == '\\':
			if len(p.s) == 0 || p.s[0] != '"' && p.s[0] != '\\' {
				p.fail("bad escape")
				return refBare{}
			}
			b.WriteByte(p.s[0])
			p.s = p.s[1:]
		case c == '"':
			return refBare{kind: 's', s: b.String()}
		case c <= 0x1f || c >= 0x7f:
			p.fail("bad string char")
			return refBare{}
		default:
			b.WriteByte(c)
		}
	}
	p.fail("string not closed")
	return refBare{}
}

// §4.2.6.
func (p *refParser) token() refBare {
	i := 1
	for i < len(p.s) && isTokenChar(p.s[i]) {
		i++
	}
	t := p.s[:i]
	p.s = p.s[i:]
	return refBare{kind: 't', s: t}
}

// §4.2.7, with §4.4's rule: padding supplied, then exact base64.
func (p *refParser) binary() refBare {
	p.s = p.s[1:]
	end := strings.IndexByte(p.s, ':')
	if end < 0 {
		p.fail("byte sequence not closed")
		return refBare{}
	}
	content := p.s[:end]
	p.s = p.s[end+1:]
	for i := 0; i < len(content); i++ {
		c := content[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			p.fail("bad byte sequence char")
			return refBare{}
		}
	}
	for len(content)%4 != 0 {
		content += "="
	}
	b, err := base64.StdEncoding.Strict().DecodeString(content)
	if err != nil {
		p.fail("byte sequence: %v", err)
		return refBare{}
	}
	return refBare{kind: 'b', s: string(b)}
}

// §4.2.8.
func (p *refParser) boolean() refBare {
	if len(p.s) < 2 || p.s[1] != '0' && p.s[1] != '1' {
		p.fail("bad boolean")
		return refBare{}
	}
	n := int64(p.s[1] - '0')
	p.s = p.s[2:]
	return refBare{kind: '?', n: n}
}

// §4.2.9.
func (p *refParser) date() refBare {
	p.s = p.s[1:]
	if len(p.s) == 0 {
		p.fail("date: no number")
		return refBare{}
	}
	b := p.number()
	if p.err == nil && b.kind != 'i' {
		p.fail("date: not an integer")
	}
	return refBare{kind: '@', n: b.n}
}

// §4.2.10.
func (p *refParser) displayString() refBare {
	if len(p.s) < 2 || p.s[1] != '"' {
		p.fail("display string: no quote")
		return refBare{}
	}
	p.s = p.s[2:]
	var b []byte
	for len(p.s) > 0 {
		c := p.s[0]
		p.s = p.s[1:]
		switch {
		case c <= 0x1f || c >= 0x7f:
			p.fail("display string: bad char")
			return refBare{}
		case c == '%':
			if len(p.s) < 2 {
				p.fail("display string: short %%")
				return refBare{}
			}
			var v byte
			for _, h := range []byte(p.s[:2]) {
				switch {
				case '0' <= h && h <= '9':
					v = v<<4 | (h - '0')
				case 'a' <= h && h <= 'f':
					v = v<<4 | (h - 'a' + 10)
				default:
					p.fail("display string: bad hex")
					return refBare{}
				}
			}
			b = append(b, v)
			p.s = p.s[2:]
		case c == '"':
			if !utf8.Valid(b) {
				p.fail("display string: not UTF-8")
				return refBare{}
			}
			return refBare{kind: '%', s: string(b)}
		default:
			b = append(b, c)
		}
	}
	p.fail("display string not closed")
	return refBare{}
}

// refKey is §4.4's reading of a member, from the reference's structure.
func refKey(d []refMember, key string) (uint64, bool) {
	for _, m := range d {
		if m.key != key {
			continue
		}
		if m.inner && len(m.items) == 0 {
			return 0, false
		}
		var least uint64
		for i, it := range m.items {
			if it.bare.kind != 'i' || it.bare.n < 0 {
				return 0, false
			}
			if i == 0 || uint64(it.bare.n) < least {
				least = uint64(it.bare.n)
			}
		}
		return least, true
	}
	return 0, false
}

// render writes the structure in a form a test can compare with the
// suite's expected value: bare items as kind:value.
func (b refBare) render() string {
	switch b.kind {
	case 'i', '@', '?':
		return fmt.Sprintf("%c%d", b.kind, b.n)
	case 'd':
		f, _ := strconv.ParseFloat(b.s, 64)
		return "d" + strconv.FormatFloat(f, 'g', -1, 64)
	default:
		return fmt.Sprintf("%c%q", b.kind, b.s)
	}
}

func renderParams(ps []refParam) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(";" + p.key + "=" + p.val.render())
	}
	return b.String()
}

func renderDictionary(d []refMember) string {
	var b strings.Builder
	for _, m := range d {
		b.WriteString(m.key + "=")
		if m.inner {
			b.WriteString("(")
		}
		for i, it := range m.items {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(it.bare.render() + renderParams(it.params))
		}
		if m.inner {
			b.WriteString(")" + renderParams(m.params))
		}
		b.WriteString(",")
	}
	return b.String()
}
