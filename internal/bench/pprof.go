package bench

// A reader of the CPU profiles the server's profiling listener writes
// (runtime/pprof: a gzipped profile.proto message, github.com/google/pprof's
// proto/profile.proto), enough for the cost per stage (stages.go): each
// sample's stack as function names, leaf first, and its values. It reads
// outside bytes, so it checks every length and returns a reason, never
// panics (FuzzParseProfile).
//
// The fields it reads (field number, wire type):
//
//	Profile   1 sample_type ValueType (len)   2 sample Sample (len)
//	          4 location Location (len)       5 function Function (len)
//	          6 string_table string (len)    10 duration_nanos (varint)
//	         12 period (varint)
//	ValueType 1 type, 2 unit: indexes in string_table (varint)
//	Sample    1 location_id (varint, or packed), 2 value (varint, or packed)
//	Location  1 id (varint), 4 line Line (len)
//	Line      1 function_id (varint)
//	Function  1 id (varint), 2 name: an index in string_table (varint)
//
// Every other field is skipped by its wire type.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// benchProfileMax bounds a profile's size once decompressed.
const benchProfileMax = 256 << 20

// benchProfile is a profile as stages.go reads it.
type benchProfile struct {
	types    []string // each value's "type/unit", as "cpu/nanoseconds"
	samples  []benchSample
	duration int64 // ns
	period   int64
}

// benchSample is one sample: its stack's function names, leaf first (a
// location's inlined frames innermost first, as pprof shows them), and its
// values, one for each of the profile's types.
type benchSample struct {
	stack  []string
	values []int64
}

// valueIndex is the index of the values of type typ ("cpu"), or -1.
func (p *benchProfile) valueIndex(typ string) int {
	for i, t := range p.types {
		if name, _, _ := bytes.Cut([]byte(t), []byte("/")); string(name) == typ {
			return i
		}
	}
	return -1
}

// pbField is one field of a protobuf message: its number and wire type,
// and its value (a varint's, or a length-delimited field's bytes).
type pbField struct {
	num  uint64
	wire uint8
	v    uint64
	b    []byte
}

// pbFields reads the fields of message b in order, calling fn with each.
func pbFields(b []byte, fn func(f pbField) error) error {
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("a field's key is not a varint")
		}
		b = b[n:]
		f := pbField{num: key >> 3, wire: uint8(key & 7)}
		if f.num == 0 {
			return errors.New("a field numbered 0")
		}
		switch f.wire {
		case 0: // varint
			if f.v, n = binary.Uvarint(b); n <= 0 {
				return fmt.Errorf("field %d: not a varint", f.num)
			}
			b = b[n:]
		case 1: // 64-bit
			if len(b) < 8 {
				return fmt.Errorf("field %d: truncated", f.num)
			}
			f.v, b = binary.LittleEndian.Uint64(b), b[8:]
		case 2: // length-delimited
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return fmt.Errorf("field %d: a length past the message's end", f.num)
			}
			f.b, b = b[n:n+int(l)], b[n+int(l):]
		case 5: // 32-bit
			if len(b) < 4 {
				return fmt.Errorf("field %d: truncated", f.num)
			}
			f.v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		default:
			return fmt.Errorf("field %d: wire type %d", f.num, f.wire)
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// pbVarints appends a repeated varint field's values: one when it was
// written alone, all of a packed run's.
func pbVarints(dst []uint64, f pbField) ([]uint64, error) {
	switch f.wire {
	case 0:
		return append(dst, f.v), nil
	case 2:
		for b := f.b; len(b) > 0; {
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return dst, fmt.Errorf("field %d: a packed value is not a varint", f.num)
			}
			dst, b = append(dst, v), b[n:]
		}
		return dst, nil
	}
	return dst, fmt.Errorf("field %d: wire type %d for varints", f.num, f.wire)
}

// parseProfile reads a profile, gzipped as runtime/pprof writes it or not.
func parseProfile(raw []byte) (*benchProfile, error) {
	if len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("profile: %v", err)
		}
		b, err := io.ReadAll(io.LimitReader(zr, benchProfileMax+1))
		if err != nil {
			return nil, fmt.Errorf("profile: %v", err)
		}
		if len(b) > benchProfileMax {
			return nil, fmt.Errorf("profile: more than %d bytes once decompressed", benchProfileMax)
		}
		raw = b
	}
	type location struct{ funcs []uint64 }
	type rawSample struct{ locs, vals []uint64 }
	var (
		strs      []string
		typeIdx   [][2]uint64
		samples   []rawSample
		locations = map[uint64]location{}
		functions = map[uint64]uint64{} // id → name's index
		p         = &benchProfile{}
	)
	err := pbFields(raw, func(f pbField) error {
		if f.wire != 2 && (f.num == 1 || f.num == 2 || f.num == 4 || f.num == 5 || f.num == 6) {
			return fmt.Errorf("field %d: wire type %d, not a message", f.num, f.wire)
		}
		switch f.num {
		case 1:
			var vt [2]uint64
			err := pbFields(f.b, func(g pbField) error {
				if (g.num == 1 || g.num == 2) && g.wire == 0 {
					vt[g.num-1] = g.v
				}
				return nil
			})
			typeIdx = append(typeIdx, vt)
			return err
		case 2:
			var s rawSample
			err := pbFields(f.b, func(g pbField) error {
				var err error
				switch g.num {
				case 1:
					s.locs, err = pbVarints(s.locs, g)
				case 2:
					s.vals, err = pbVarints(s.vals, g)
				}
				return err
			})
			samples = append(samples, s)
			return err
		case 4:
			var id uint64
			var loc location
			err := pbFields(f.b, func(g pbField) error {
				switch {
				case g.num == 1 && g.wire == 0:
					id = g.v
				case g.num == 4 && g.wire == 2:
					return pbFields(g.b, func(h pbField) error {
						if h.num == 1 && h.wire == 0 {
							loc.funcs = append(loc.funcs, h.v)
						}
						return nil
					})
				}
				return nil
			})
			locations[id] = loc
			return err
		case 5:
			var id, name uint64
			err := pbFields(f.b, func(g pbField) error {
				if g.wire == 0 && g.num == 1 {
					id = g.v
				} else if g.wire == 0 && g.num == 2 {
					name = g.v
				}
				return nil
			})
			functions[id] = name
			return err
		case 6:
			strs = append(strs, string(f.b))
		case 10:
			p.duration = int64(f.v)
		case 12:
			p.period = int64(f.v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("profile: %v", err)
	}
	str := func(i uint64) (string, error) {
		if i >= uint64(len(strs)) {
			return "", fmt.Errorf("profile: string %d of a table of %d", i, len(strs))
		}
		return strs[i], nil
	}
	for _, vt := range typeIdx {
		t, err1 := str(vt[0])
		u, err2 := str(vt[1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		p.types = append(p.types, t+"/"+u)
	}
	names := map[uint64][]string{} // a location's names, resolved once
	for _, s := range samples {
		if len(s.vals) != len(p.types) {
			return nil, fmt.Errorf("profile: a sample of %d values, for %d types", len(s.vals), len(p.types))
		}
		out := benchSample{values: make([]int64, len(s.vals))}
		for i, v := range s.vals {
			out.values[i] = int64(v)
		}
		for _, id := range s.locs {
			ns, ok := names[id]
			if !ok {
				loc, found := locations[id]
				if !found {
					return nil, fmt.Errorf("profile: a sample names location %d, which is not there", id)
				}
				for _, fid := range loc.funcs {
					ni, found := functions[fid]
					if !found {
						return nil, fmt.Errorf("profile: location %d names function %d, which is not there", id, fid)
					}
					name, err := str(ni)
					if err != nil {
						return nil, err
					}
					ns = append(ns, name)
				}
				names[id] = ns
			}
			out.stack = append(out.stack, ns...)
		}
		p.samples = append(p.samples, out)
	}
	return p, nil
}
