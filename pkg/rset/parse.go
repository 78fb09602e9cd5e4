package rset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Parse decodes an R JSON document. It is strict: a missing or mistyped
// key, a malformed idset or hostlist, a rank listed twice, a nodelist
// whose length differs from the number of ranks or a property naming
// unknown ranks is an error. Errors are *ParseError values wrapping
// ErrInvalid.
func Parse(data []byte) (*R, error) {
	top, err := object(data, "")
	if err != nil {
		return nil, err
	}
	r := &R{}
	if err := parseVersion(top); err != nil {
		return nil, err
	}
	rawExec, ok := top["execution"]
	if !ok {
		return nil, parseErr("execution", "missing", nil)
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		v := top[k]
		switch k {
		case "version", "execution":
		case "scheduling":
			if r.scheduling, err = compactJSON(v); err != nil {
				return nil, parseErr("scheduling", "invalid JSON", err)
			}
		default:
			c, err := compactJSON(v)
			if err != nil {
				return nil, parseErr(k, "invalid JSON", err)
			}
			r.extra = setRaw(r.extra, k, c)
		}
	}
	if err := r.parseExecution(rawExec); err != nil {
		return nil, err
	}
	return r, nil
}

// UnmarshalJSON decodes an R document into r (see Parse).
func (r *R) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*r = *p
	return nil
}

// ReadAll reads one or more R documents, one after the other with
// optional white space between them, until the end of rd. It fails if rd
// holds none.
func ReadAll(rd io.Reader) ([]*R, error) {
	dec := json.NewDecoder(rd)
	var out []*R
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, parseErr("", fmt.Sprintf("R object %d: invalid JSON: %v", len(out)+1, err), err)
		}
		r, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("R object %d: %w", len(out)+1, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, parseErr("", "no R object found", nil)
	}
	return out, nil
}

func parseVersion(top map[string]json.RawMessage) error {
	raw, ok := top["version"]
	if !ok {
		return parseErr("version", "missing", nil)
	}
	v, err := number(raw, "version")
	if err != nil {
		return err
	}
	if v != 1 {
		return parseErr("version", fmt.Sprintf("unsupported version %s", bytes.TrimSpace(raw)), nil)
	}
	return nil
}

func (r *R) parseExecution(raw json.RawMessage) error {
	exec, err := object(raw, "execution")
	if err != nil {
		return err
	}
	rawLite, ok := exec["R_lite"]
	if !ok {
		return parseErr("execution.R_lite", "missing", nil)
	}
	if err := r.parseRlite(rawLite); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(exec)) {
		v := exec[k]
		key := "execution." + k
		switch k {
		case "R_lite":
		case "nodelist":
			if err := r.parseNodelist(v); err != nil {
				return err
			}
		case "properties":
			if err := r.parseProperties(v); err != nil {
				return err
			}
		case "starttime":
			if r.start, err = number(v, key); err != nil {
				return err
			}
		case "expiration":
			if r.expiration, err = number(v, key); err != nil {
				return err
			}
		default:
			c, err := compactJSON(v)
			if err != nil {
				return parseErr(key, "invalid JSON", err)
			}
			r.execExtra = setRaw(r.execExtra, k, c)
		}
	}
	if err := checkTimes(r.start, r.expiration); err != nil {
		return parseErr("execution", err.Error(), nil)
	}
	return nil
}

func (r *R) parseNodelist(raw json.RawMessage) error {
	const key = "execution.nodelist"
	if !startsWith(raw, '[') {
		return parseErr(key, "not an array", nil)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return parseErr(key, "invalid JSON", err)
	}
	var all *hostlist.Hostlist
	for i, item := range items {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		s, err := str(item, ikey)
		if err != nil {
			return err
		}
		hl, err := hostlist.Parse(s)
		if err != nil {
			return parseErr(ikey, fmt.Sprintf("invalid hostlist %q", s), err)
		}
		if all == nil {
			all = hl
		} else {
			all.AppendList(hl)
		}
	}
	n := 0
	if all != nil {
		n = all.Len()
	}
	if n != r.nranks {
		return parseErr(key, fmt.Sprintf("%d hosts for %d ranks", n, r.nranks), nil)
	}
	if n > 0 {
		r.names = &names{hl: all, complete: true}
	}
	return nil
}

func (r *R) parseProperties(raw json.RawMessage) error {
	const key = "execution.properties"
	props, err := object(raw, key)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		v := props[name]
		pkey := key + "." + name
		if err := CheckPropertyName(name); err != nil {
			return parseErr(pkey, "invalid property name", err)
		}
		ranks, err := idsetValue(v, pkey)
		if err != nil {
			return err
		}
		if ranks.Empty() {
			return parseErr(pkey, "empty idset", nil)
		}
		if missing := ranks.Difference(r.ranks); !missing.Empty() {
			return parseErr(pkey, fmt.Sprintf("ranks %s not found", missing), nil)
		}
		if r.props == nil {
			r.props = make(map[string]idset.Set, len(props))
		}
		r.props[name] = ranks
	}
	return nil
}

// object decodes a JSON object into its raw members.
func object(raw []byte, key string) (map[string]json.RawMessage, error) {
	if !startsWith(raw, '{') {
		if key == "" {
			if !json.Valid(raw) {
				return nil, parseErr("", "invalid JSON", nil)
			}
			return nil, parseErr("", "not a JSON object", nil)
		}
		return nil, parseErr(key, "not an object", nil)
	}
	m := make(map[string]json.RawMessage)
	err := jsonwire.Object(raw, func(k, v []byte) error {
		key := string(k)
		if !utf8.ValidString(key) {
			key = string([]rune(key)) // U+FFFD per bad byte, as encoding/json
		}
		m[key] = v // a later duplicate wins, as with encoding/json
		return nil
	})
	if err != nil {
		return nil, parseErr(key, "invalid JSON", err)
	}
	return m, nil
}

func str(raw json.RawMessage, key string) (string, error) {
	if !startsWith(raw, '"') {
		return "", parseErr(key, "not a string", nil)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", parseErr(key, "invalid JSON", err)
	}
	return s, nil
}

func number(raw json.RawMessage, key string) (float64, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, parseErr(key, "not a number", nil)
	}
	var f float64
	if err := json.Unmarshal(t, &f); err != nil {
		return 0, parseErr(key, fmt.Sprintf("invalid number %s", t), err)
	}
	return f, nil
}

func idsetValue(raw json.RawMessage, key string) (idset.Set, error) {
	s, err := str(raw, key)
	if err != nil {
		return idset.Set{}, err
	}
	ids, msg, err := parseIDs(s)
	if msg != "" {
		return idset.Set{}, parseErr(key, msg, err)
	}
	return ids, nil
}

// MaxID is the largest rank, core or GPU id an R may hold; like Flux,
// ids are 32-bit and the largest 32-bit value is reserved.
const MaxID = math.MaxUint32 - 1

// parseIDs parses an idset of an R. On failure msg says what is wrong
// and err is the idset error, if any.
func parseIDs(s string) (ids idset.Set, msg string, err error) {
	if ids, err = idset.Parse(s); err != nil {
		return idset.Set{}, fmt.Sprintf("invalid idset %q", s), err
	}
	if last, ok := ids.Last(); ok && last > MaxID {
		return idset.Set{}, fmt.Sprintf("id %d is larger than %d", last, uint(MaxID)), nil
	}
	return ids, "", nil
}

func startsWith(raw []byte, c byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == c
}

func compactJSON(raw []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
