package schedsimple

import (
	"errors"
	"fmt"
	"strconv"
)

// The job manager sends sched.alloc with the whole jobspec inside
// (environment included), thousands of times a second. encoding/json
// spends most of its time validating and copying that jobspec, which the
// scheduler parses (or finds in its cache) anyway, so the RFC 27 payloads
// are read with the small scanner below: it finds the top-level keys and
// the extent of each value, and converts only the scalars it needs.

var errSyntax = errors.New("malformed JSON payload")

// scanObject calls fn with each key and raw value of the JSON object in p.
// Keys must not contain escapes. Values are delimited, not validated
// (strings, brackets and nesting are tracked); the caller converts the
// ones it uses strictly.
func scanObject(p []byte, fn func(key string, val []byte) error) error {
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return fmt.Errorf("%w: not an object", errSyntax)
	}
	i = skipSpace(p, i+1)
	if i < len(p) && p[i] == '}' {
		return trailing(p, i+1)
	}
	for {
		if i >= len(p) || p[i] != '"' {
			return fmt.Errorf("%w: expected a key at offset %d", errSyntax, i)
		}
		j := i + 1
		for j < len(p) && p[j] != '"' {
			if p[j] == '\\' {
				return fmt.Errorf("%w: escaped key at offset %d", errSyntax, i)
			}
			j++
		}
		if j >= len(p) {
			return fmt.Errorf("%w: unterminated key", errSyntax)
		}
		key := p[i+1 : j]
		i = skipSpace(p, j+1)
		if i >= len(p) || p[i] != ':' {
			return fmt.Errorf("%w: expected ':' after key %q", errSyntax, key)
		}
		i = skipSpace(p, i+1)
		end, err := skipValue(p, i)
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		if err := fn(string(key), p[i:end]); err != nil {
			return err
		}
		i = skipSpace(p, end)
		if i >= len(p) {
			return fmt.Errorf("%w: unterminated object", errSyntax)
		}
		switch p[i] {
		case ',':
			i = skipSpace(p, i+1)
		case '}':
			return trailing(p, i+1)
		default:
			return fmt.Errorf("%w: unexpected %q at offset %d", errSyntax, p[i], i)
		}
	}
}

func trailing(p []byte, i int) error {
	if i = skipSpace(p, i); i != len(p) {
		return fmt.Errorf("%w: data after the object", errSyntax)
	}
	return nil
}

func skipSpace(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the offset just past the JSON value starting at i.
func skipValue(p []byte, i int) (int, error) {
	if i >= len(p) {
		return 0, fmt.Errorf("%w: missing value", errSyntax)
	}
	switch p[i] {
	case '"':
		return skipString(p, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(p); j++ {
			switch p[j] {
			case '"':
				end, err := skipString(p, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated value", errSyntax)
	default:
		j := i
		for j < len(p) && p[j] != ',' && p[j] != '}' && p[j] != ']' &&
			p[j] != ' ' && p[j] != '\t' && p[j] != '\n' && p[j] != '\r' {
			j++
		}
		if j == i {
			return 0, fmt.Errorf("%w: missing value at offset %d", errSyntax, i)
		}
		return j, nil
	}
}

func skipString(p []byte, i int) (int, error) {
	for j := i + 1; j < len(p); j++ {
		switch p[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errSyntax)
}

// allocRequest is a sched.alloc request (RFC 27, with the jobspec).
type allocRequest struct {
	ID       uint64
	Priority int64
	Userid   uint32
	TSubmit  float64
	Jobspec  []byte
}

func decodeAllocRequest(p []byte) (allocRequest, error) {
	var req allocRequest
	var seen int
	err := scanObject(p, func(key string, val []byte) error {
		var err error
		switch key {
		case "id":
			req.ID, err = strconv.ParseUint(string(val), 10, 64)
			seen |= 1
		case "priority":
			req.Priority, err = strconv.ParseInt(string(val), 10, 64)
			seen |= 2
		case "userid":
			var u uint64
			u, err = strconv.ParseUint(string(val), 10, 32)
			req.Userid = uint32(u)
			seen |= 4
		case "t_submit":
			req.TSubmit, err = strconv.ParseFloat(string(val), 64)
			seen |= 8
		case "jobspec":
			if val[0] != '{' {
				return fmt.Errorf("%w: jobspec must be an object", errSyntax)
			}
			req.Jobspec = val
			seen |= 16
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errSyntax, key, err)
		}
		return nil
	})
	if err != nil {
		return req, err
	}
	if seen != 31 {
		return req, fmt.Errorf("%w: sched.alloc needs id, priority, userid, t_submit and jobspec", errSyntax)
	}
	return req, nil
}

// freeRequest is a sched.free request.
type freeRequest struct {
	ID    uint64
	R     []byte // nil when absent
	Final bool
}

func decodeFreeRequest(p []byte) (freeRequest, error) {
	req := freeRequest{Final: true}
	hasID := false
	err := scanObject(p, func(key string, val []byte) error {
		var err error
		switch key {
		case "id":
			req.ID, err = strconv.ParseUint(string(val), 10, 64)
			hasID = true
		case "R":
			if string(val) != "null" {
				req.R = val
			}
		case "final":
			req.Final, err = strconv.ParseBool(string(val))
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errSyntax, key, err)
		}
		return nil
	})
	if err == nil && !hasID {
		err = fmt.Errorf("%w: sched.free needs id", errSyntax)
	}
	return req, err
}
