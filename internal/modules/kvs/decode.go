package kvs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"

	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// The commit and fence payloads carry many tree objects (the job manager
// commits a thousand appends at a time); they are parsed here in one pass
// instead of by encoding/json, whose RawMessage handling scans each
// object twice. The format is flux-core's:
//
//	{"namespace":S, "flags":N, "ops":[{"key":S,"flags":N,"dirent":T|null}...],
//	 "name":S, "nprocs":N}
//
// Members may come in any order; unknown members are skipped.

// scanner is a minimal strict JSON reader over a payload.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) errf(format string, args ...any) error {
	return fmt.Errorf("payload offset %d: %s: %w", s.i, fmt.Sprintf(format, args...), syscall.EPROTO)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.i >= len(s.b) {
			return s.errf("unexpected end, want %q", c)
		}
		return s.errf("unexpected %q, want %q", s.b[s.i], c)
	}
	s.i++
	return nil
}

// more consumes a ',' and reports true, or the closing byte and false.
func (s *scanner) more(closing byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.i++
		return true, nil
	case closing:
		s.i++
		return false, nil
	}
	return false, s.errf("want ',' or %q", closing)
}

func (s *scanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.i
	escaped, high := false, false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			if escaped {
				var v string
				if err := json.Unmarshal(s.b[start-1:s.i], &v); err != nil {
					return "", s.errf("bad string: %v", err)
				}
				return v, nil
			}
			if high && !utf8.Valid(raw) {
				return "", s.errf("string is not UTF-8")
			}
			return string(raw), nil
		case c == '\\':
			escaped = true
			s.i += 2
			continue
		case c < 0x20:
			return "", s.errf("control character in string")
		case c >= 0x80:
			high = true
		}
		s.i++
	}
	return "", s.errf("unterminated string")
}

func (s *scanner) int() (int, error) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	if err != nil {
		return 0, s.errf("want an integer")
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, s.errf("want an integer")
	}
	return n, nil
}

// skip skips one JSON value.
func (s *scanner) skip(depth int) error {
	if depth > 64 {
		return s.errf("nested too deep")
	}
	switch c := s.peek(); {
	case c == '"':
		_, err := s.str()
		return err
	case c == '{' || c == '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.i++
		if s.peek() == closing {
			s.i++
			return nil
		}
		for {
			if c == '{' {
				if _, err := s.str(); err != nil {
					return err
				}
				if err := s.expect(':'); err != nil {
					return err
				}
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			more, err := s.more(closing)
			if err != nil || !more {
				return err
			}
		}
	default:
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				goto done
			}
			s.i++
		}
	done:
		tok := s.b[start:s.i]
		if !json.Valid(tok) {
			return s.errf("bad value %q", tok)
		}
		return nil
	}
}

// object calls fn for each member of an object.
func (s *scanner) object(fn func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		more, err := s.more('}')
		if err != nil || !more {
			return err
		}
	}
}

// parseCommit parses a commit/fence payload. The ops are decoded (with
// the guest rule applied) and also returned raw, for relaying.
//
// A request from a module of this broker may carry its operations
// attached instead (fluxkvs.AttachedOps, given as attached) and no "ops"
// in the payload.
func parseCommit(b []byte, guest bool, attached fluxkvs.AttachedOps) (*commitPayload, []op, error) {
	s := &scanner{b: b}
	req := &commitPayload{}
	var ops []op
	haveOps := false
	err := s.object(func(key string) error {
		var err error
		switch key {
		case "namespace":
			req.Namespace, err = s.str()
		case "name":
			req.Name, err = s.str()
		case "flags":
			var n int
			n, err = s.int()
			req.Flags = &n
		case "nprocs":
			req.Nprocs, err = s.int()
		case "ops":
			s.ws()
			start := s.i
			ops, err = s.ops(guest)
			req.Ops = json.RawMessage(s.b[start:s.i])
			haveOps = true
		default:
			err = s.skip(0)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if s.peek() != 0 {
		return nil, nil, s.errf("trailing data")
	}
	if !haveOps {
		if attached == nil {
			return nil, nil, fmt.Errorf("missing ops array: %w", syscall.EPROTO)
		}
		if ops, err = attachedOps(attached, guest); err != nil {
			return nil, nil, err
		}
	}
	return req, ops, nil
}

// attachedOps turns the operations a module attached to its commit into
// the KVS's own, checked as those of a payload are.
func attachedOps(att fluxkvs.AttachedOps, guest bool) ([]op, error) {
	ops := make([]op, len(att))
	// the path components of every key, in one allocation
	n := 0
	for i := range att {
		n += strings.Count(att[i].Key, ".") + 1
	}
	arena := make([]string, 0, n)
	for i := range att {
		a := &att[i]
		o := &ops[i]
		o.key, o.flags = a.Key, a.Flags
		if data, ok := a.Value(); ok && a.Flags&flagAppend != 0 {
			o.dirent, o.raw = emptyVal, data
			if o.raw == nil {
				o.raw = []byte{}
			}
		} else if ok {
			o.dirent = treeobj.NewVal(data)
		} else if t := a.Treeobj(); t != nil {
			o.dirent = t // built in this broker by treeobj: valid, immutable
		} else if len(a.Dirent) > 0 && string(a.Dirent) != "null" {
			d, err := treeobj.Decode(a.Dirent)
			if err != nil {
				return nil, fmt.Errorf("op %d (%s): %v: %w", i, a.Key, err, syscall.EPROTO)
			}
			o.dirent = d
		}
		start := len(arena)
		arena = treeobj.AppendSplitKey(arena, o.key)
		o.comps = arena[start:len(arena):len(arena)]
		if err := checkOp(i, o, guest); err != nil {
			return nil, err
		}
	}
	return ops, nil
}

// emptyVal stands for an attached append's data (op.raw) where an op
// needs a dirent; it is never stored.
var emptyVal = treeobj.NewVal(nil)

func (s *scanner) ops(guest bool) ([]op, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	var ops []op
	if s.peek() == ']' {
		s.i++
		return ops, nil
	}
	// Sized from the bytes left (a job's operation takes ~100-250), at
	// most 4096: a job-manager commit carries thousands, and growing the
	// slice one doubling at a time copied them over and over; a commit
	// of a few large values must not get a large slice.
	ops = make([]op, 0, min((len(s.b)-s.i)/128+1, 4096))
	for {
		var o op
		haveKey, haveDirent := false, false
		err := s.object(func(key string) error {
			var err error
			switch key {
			case "key":
				o.key, err = s.str()
				haveKey = true
			case "flags":
				o.flags, err = s.int()
			case "dirent":
				var n int
				o.dirent, n, err = treeobj.DecodePrefix(s.b[s.i:])
				s.i += n
				haveDirent = true
			default:
				err = s.skip(0)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		i := len(ops)
		if !haveKey || !haveDirent {
			return nil, fmt.Errorf("op %d: key and dirent are required: %w", i, syscall.EPROTO)
		}
		if err := checkOp(i, &o, guest); err != nil {
			return nil, err
		}
		ops = append(ops, o)
		more, err := s.more(']')
		if err != nil {
			return nil, err
		}
		if !more {
			return ops, nil
		}
	}
}

// checkOp validates one operation and fills in its path components
// unless the caller has.
func checkOp(i int, o *op, guest bool) error {
	if o.flags&^flagAppend != 0 {
		return fmt.Errorf("op %d (%s): invalid op flags 0x%x: %w", i, o.key, o.flags, syscall.EINVAL)
	}
	if o.comps == nil {
		o.comps = treeobj.SplitKey(o.key)
	}
	if len(o.comps) == 0 {
		return fmt.Errorf("op %d: key %q names the root directory: %w", i, o.key, syscall.EINVAL)
	}
	d := o.dirent
	if guest && d != nil && d.Type != treeobj.Val && !(d.Type == treeobj.Dir && d.Len() == 0) {
		what := d.Type.String()
		if d.Type == treeobj.Dir {
			what = "non-empty dir"
		}
		return fmt.Errorf("guests may not commit %s objects: %w", what, syscall.EPERM)
	}
	return nil
}
