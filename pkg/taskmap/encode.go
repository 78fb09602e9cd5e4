package taskmap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Version is the task map version this package reads and writes.
const Version = 1

// Encode returns the RFC 34 JSON object form, {"version":1,"map":[...]},
// compact, as it appears in a job's shell.start event.
func (m *Map) Encode() string {
	var sb strings.Builder
	sb.WriteString(`{"version":1,"map":`)
	formatBlocks(&sb, m.blocks)
	sb.WriteByte('}')
	return sb.String()
}

// EncodeArray returns the bare JSON array of map blocks, e.g. [[0,4,4,1]].
func (m *Map) EncodeArray() string {
	var sb strings.Builder
	formatBlocks(&sb, m.blocks)
	return sb.String()
}

// MarshalJSON encodes m in the object form (see [Map.Encode]).
func (m *Map) MarshalJSON() ([]byte, error) {
	if m.ntasks == 0 {
		return nil, fmt.Errorf("%w: no tasks", ErrInvalid)
	}
	return []byte(m.Encode()), nil
}

// UnmarshalJSON decodes either JSON form (see [Decode]).
func (m *Map) UnmarshalJSON(b []byte) error {
	d, err := Decode(b)
	if err != nil {
		return err
	}
	*m = *d
	return nil
}

// Decode parses a JSON task map: the object form with exactly the keys
// "version" (which must be 1) and "map", or the bare array of blocks. Each
// block is an array of four integers: nodeid >= 0 and nnodes, ppn,
// repeat >= 1. There must be at least one block.
func Decode(data []byte) (*Map, error) {
	data = bytes.TrimSpace(data)
	var raw json.RawMessage
	switch {
	case len(data) > 0 && data[0] == '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		for k := range obj {
			if k != "version" && k != "map" {
				return nil, fmt.Errorf("%w: unknown key %q", ErrInvalid, k)
			}
		}
		v, ok := obj["version"]
		if !ok {
			return nil, fmt.Errorf("%w: missing key \"version\"", ErrInvalid)
		}
		if string(v) != "1" {
			return nil, fmt.Errorf("%w: version %s is not %d", ErrInvalid, v, Version)
		}
		if raw, ok = obj["map"]; !ok {
			return nil, fmt.Errorf("%w: missing key \"map\"", ErrInvalid)
		}
	case len(data) > 0 && data[0] == '[':
		raw = data
	default:
		return nil, fmt.Errorf("%w: not a JSON object or array", ErrInvalid)
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(raw, &rows); err != nil || rows == nil {
		return nil, fmt.Errorf("%w: map is not an array of blocks", ErrInvalid)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: map has no blocks", ErrInvalid)
	}
	blocks := make([]MapBlock, len(rows))
	for i, row := range rows {
		var f []json.RawMessage
		if err := json.Unmarshal(row, &f); err != nil || f == nil || len(f) != 4 {
			return nil, fmt.Errorf("%w: block %d is not an array of 4 integers", ErrInvalid, i)
		}
		var v [4]int
		for j, n := range f {
			// ParseInt rejects strings, fractions and exponents.
			x, err := strconv.ParseInt(string(n), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%w: block %d element %d (%s) is not a 32-bit integer", ErrInvalid, i, j, n)
			}
			v[j] = int(x)
		}
		blocks[i] = MapBlock{NodeID: v[0], NNodes: v[1], PPN: v[2], Repeat: v[3]}
	}
	return FromBlocks(blocks)
}

// EncodeRaw returns the RFC 34 raw form: for each node in order, the idset
// of its task ranks, separated by ";" (e.g. "0-3;4-7"). A node without
// tasks has an empty idset, so the string grows with NNodes.
func (m *Map) EncodeRaw() string {
	var b []byte
	for node := 0; node < m.nnodes; node++ {
		if node > 0 {
			b = append(b, ';')
		}
		var set []byte
		m.rangesOnNode(node, func(lo, hi int) { set = appendRange(set, lo, hi) })
		b = append(b, set...)
	}
	return string(b)
}

// DecodeRaw parses the raw form (see [Map.EncodeRaw]). Each idset follows
// RFC 22: ascending decimal ids and lo-hi ranges separated by commas,
// optionally inside square brackets. Together the idsets must hold each
// task rank from 0 to N-1 exactly once.
func DecodeRaw(s string) (*Map, error) {
	var runs []taskRun
	for node, set := range strings.Split(s, ";") {
		r, err := parseIDSet(set)
		if err != nil {
			return nil, fmt.Errorf("%w: node %d: %v", ErrInvalid, node, err)
		}
		for _, x := range r {
			runs = append(runs, taskRun{node: node, lo: x[0], hi: x[1]})
		}
	}
	return fromRuns(runs)
}

// EncodePMI returns the PMI-1 PMI_process_mapping form,
// "(vector,(nodeid,nnodes,ppn),...)", which has no repeat count: a
// repeated block is written out once per repetition.
func (m *Map) EncodePMI() string {
	var sb strings.Builder
	sb.WriteString("(vector")
	for _, b := range m.blocks {
		for range b.Repeat {
			fmt.Fprintf(&sb, ",(%d,%d,%d)", b.NodeID, b.NNodes, b.PPN)
		}
	}
	sb.WriteByte(')')
	return sb.String()
}

// DecodePMI parses the PMI_process_mapping form "(vector,(0,4,4),...)",
// without white space.
func DecodePMI(s string) (*Map, error) {
	body, ok := strings.CutPrefix(s, "(vector,")
	if !ok {
		return nil, fmt.Errorf(`%w: PMI mapping must start with "(vector,"`, ErrInvalid)
	}
	body, ok = strings.CutSuffix(body, ")")
	if !ok {
		return nil, fmt.Errorf(`%w: PMI mapping must end with ")"`, ErrInvalid)
	}
	var blocks []MapBlock
	for i := 0; body != ""; i++ {
		if i > 0 {
			if body, ok = strings.CutPrefix(body, ","); !ok {
				return nil, fmt.Errorf("%w: PMI block %d is not separated by a comma", ErrInvalid, i)
			}
		}
		tuple, rest, found := strings.Cut(body, ")")
		tuple, ok = strings.CutPrefix(tuple, "(")
		if !found || !ok {
			return nil, fmt.Errorf("%w: PMI block %d is not a (nodeid,nnodes,ppn) tuple", ErrInvalid, i)
		}
		f := strings.Split(tuple, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: PMI block %d has %d elements, want 3", ErrInvalid, i, len(f))
		}
		var v [3]int
		for j, e := range f {
			x, err := parseDecimal(e)
			if err != nil {
				return nil, fmt.Errorf("%w: PMI block %d element %d: %v", ErrInvalid, i, j, err)
			}
			v[j] = x
		}
		blocks = append(blocks, MapBlock{NodeID: v[0], NNodes: v[1], PPN: v[2], Repeat: 1})
		body = rest
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%w: PMI mapping has no blocks", ErrInvalid)
	}
	return FromBlocks(blocks)
}
