package kvs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unicode/utf8"

	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"

	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// The commit and fence payloads carry many tree objects (the job manager
// commits a thousand appends at a time); they are read here with
// jsonwire, without reflection, and each dirent is decoded by treeobj.
// The format is flux-core's:
//
//	{"namespace":S, "flags":N, "ops":[{"key":S,"flags":N,"dirent":T|null}...],
//	 "name":S, "nprocs":N}
//
// Members may come in any order (the last of duplicates counts); unknown
// members are skipped. Malformed JSON and values of the wrong type are
// EPROTO; invalid tree objects and operations EINVAL, a guest's forbidden
// ones EPERM.
//
// jsonwire checks the whole of a value before it reports it, so decoding
// the payload member by member, then the ops array element by element,
// then each op member by member and its dirent scans a dirent four times.
// A payload in the canonical form (compact, "ops" last, each op's
// "dirent" last, as fluxkvs and flux-core write it) is therefore read in
// one pass: the scan of the payload is stopped at a member followed by
// exactly `,"ops":[`, each op is scanned by jsonwire.Object from its '{'
// and stopped at the member followed by exactly `,"dirent":` (the dirent
// is then decoded by treeobj.DecodePrefix, which reports its length) or
// by exactly '}', and the bytes between ops and after the array must be
// exactly ',' or ']' and '}'. Everything is thus checked, by jsonwire,
// treeobj or a comparison with those fixed bytes. Anything else (white
// space between the tokens looked at, another order, a member of an op
// other than key, flags and dirent, any error) falls back to decoding
// member by member (decodePayload unframed), which alone decides errors.

// errUnframed reports a payload not in the canonical form (or an error
// in one): it is then decoded member by member.
var errUnframed = errors.New("payload not in the canonical form")

// errStop stops a jsonwire scan of the framed decoding where it has
// taken over.
var errStop = errors.New("stop")

var (
	opsHead    = []byte(`,"ops":[`)
	direntHead = []byte(`,"dirent":`)
)

// parseCommit parses a commit/fence payload. The ops are decoded (with
// the guest rule applied) and also returned raw, for relaying.
//
// A request from a module of this broker may carry its operations
// attached instead (fluxkvs.AttachedOps, given as attached) and no "ops"
// in the payload.
func parseCommit(b []byte, guest bool, attached fluxkvs.AttachedOps) (*commitPayload, []op, error) {
	req, ops, haveOps, err := decodePayload(b, guest, true)
	if err == errUnframed {
		req, ops, haveOps, err = decodePayload(b, guest, false)
	}
	if err != nil {
		return nil, nil, err
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

// decodePayload decodes the payload b. With framed, it takes over from
// the scan at `,"ops":[` if it finds it (see above) and returns
// errUnframed if the rest is not in the canonical form or has an error.
func decodePayload(b []byte, guest, framed bool) (req *commitPayload, ops []op, haveOps bool, err error) {
	req = &commitPayload{}
	// failed: the error the scan returns is the callback's (already
	// classified), not one of jsonwire's own
	failed := false
	opsAt := -1
	err = jsonwire.Object(b, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "namespace":
			req.Namespace, err = text(val)
		case "name":
			req.Name, err = text(val)
		case "flags":
			var n int
			n, err = integer(val)
			req.Flags = &n
		case "nprocs":
			req.Nprocs, err = integer(val)
		case "ops":
			ops, err = parseOps(val, guest)
			req.Ops = json.RawMessage(val)
			haveOps = true
		}
		if err != nil {
			failed = true
			return fmt.Errorf("%q: %w", key, err)
		}
		if framed {
			if off := offsetIn(b, val); off >= 0 && bytes.HasPrefix(b[off+len(val):], opsHead) {
				opsAt = off + len(val) + len(opsHead) - 1 // at '['
				return errStop
			}
		}
		return nil
	})
	if opsAt >= 0 {
		fops, n, ok := parseOpsFramed(b[opsAt:], guest)
		if !ok || opsAt+n != len(b)-1 || b[len(b)-1] != '}' {
			return nil, nil, false, errUnframed
		}
		req.Ops = json.RawMessage(b[opsAt : opsAt+n])
		return req, fops, true, nil
	}
	if err != nil {
		if !failed {
			err = malformed(err)
		}
		return nil, nil, false, err
	}
	return req, ops, haveOps, nil
}

// offsetIn returns the offset in p of val, a value jsonwire reported
// from a scan of p (a subslice of it), or -1 if it is not a subslice.
func offsetIn(p, val []byte) int {
	off := cap(p) - cap(val)
	if len(val) == 0 || off < 0 || off+len(val) > len(p) || &p[off] != &val[0] {
		return -1
	}
	return off
}

// malformed marks an error of jsonwire's (malformed JSON or a value of
// the wrong type) as a protocol error.
func malformed(err error) error {
	return fmt.Errorf("payload: %w: %w", err, syscall.EPROTO)
}

// text decodes a JSON string the KVS keeps (a key, a namespace, a fence
// name). Its bytes must be UTF-8, as treeobj requires of the names of a
// directory: a key is not silently changed to U+FFFD.
func text(val []byte) (string, error) {
	b, err := jsonwire.StringBytes(val)
	if err != nil {
		return "", malformed(err)
	}
	// A subslice of val is plain ASCII (the common case: nothing more
	// to check); a decoded copy may have had bytes replaced.
	plain := len(b) == len(val)-2 && (len(b) == 0 || &b[0] == &val[1])
	if !plain && !utf8.Valid(val) {
		return "", fmt.Errorf("string is not UTF-8: %w", syscall.EPROTO)
	}
	return string(b), nil
}

// integer decodes a JSON integer that fits an int.
func integer(val []byte) (int, error) {
	n, err := jsonwire.Int(val)
	if err != nil {
		return 0, malformed(err)
	}
	if int64(int(n)) != n {
		return 0, fmt.Errorf("integer %s is out of range: %w", val, syscall.EPROTO)
	}
	return int(n), nil
}

// attachedOps turns the operations a module attached to its commit into
// the KVS's own, checked as those of a payload are.
func attachedOps(att fluxkvs.AttachedOps, guest bool) ([]op, error) {
	ops := make([]op, len(att))
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
		} else if len(a.Dirent) > 0 && !jsonwire.IsNull(a.Dirent) {
			d, err := treeobj.Decode(a.Dirent)
			if err != nil {
				return nil, fmt.Errorf("op %d (%s): %v: %w", i, a.Key, err, syscall.EPROTO)
			}
			o.dirent = d
		}
		if err := checkOp(i, o, guest); err != nil {
			return nil, err
		}
	}
	splitKeys(ops)
	return ops, nil
}

// splitKeys sets the path components of every op, in one allocation
// (the KVS splits the key of every operation of every commit).
func splitKeys(ops []op) {
	n := 0
	for i := range ops {
		n += strings.Count(ops[i].key, ".") + 1
	}
	arena := make([]string, 0, n)
	for i := range ops {
		o := &ops[i]
		start := len(arena)
		arena = treeobj.AppendSplitKey(arena, o.key)
		o.comps = arena[start:len(arena):len(arena)]
	}
}

// emptyVal stands for an attached append's data (op.raw) where an op
// needs a dirent; it is never stored.
var emptyVal = treeobj.NewVal(nil)

// parseOps decodes and checks the "ops" array p (already checked as JSON
// by the scan of the payload).
func parseOps(p []byte, guest bool) ([]op, error) {
	var ops []op
	failed := false
	err := jsonwire.Array(p, func(val []byte) error {
		if ops == nil {
			ops = makeOps(len(p))
		}
		ops = append(ops, op{})
		i := len(ops) - 1
		if err := parseOp(val, i, &ops[i], guest); err != nil {
			failed = true
			return err
		}
		return nil
	})
	if err != nil {
		if !failed {
			err = malformed(err)
		}
		return nil, err
	}
	splitKeys(ops)
	return ops, nil
}

// makeOps returns a slice for the ops of an array of n bytes: sized from
// them (a job's operation takes ~100-250), at most 4096. A job-manager
// commit carries thousands, and growing the slice one doubling at a time
// copied them over and over; a commit of a few large values must not get
// a large slice.
func makeOps(n int) []op {
	return make([]op, 0, min(n/128+1, 4096))
}

// parseOp decodes and checks operation i, the object p, into o.
func parseOp(p []byte, i int, o *op, guest bool) error {
	var have opFields
	failed := false
	err := jsonwire.Object(p, func(key, val []byte) error {
		if err := have.member(i, o, key, val); err != nil {
			failed = true
			return err
		}
		return nil
	})
	if err != nil {
		if !failed {
			err = fmt.Errorf("op %d: %w", i, malformed(err))
		}
		return err
	}
	return have.check(i, o, guest)
}

// opFields records which members of an op were found.
type opFields struct{ key, dirent bool }

// member decodes one member of op i into o.
func (f *opFields) member(i int, o *op, key, val []byte) error {
	var err error
	switch string(key) {
	case "key":
		o.key, err = text(val)
		f.key = true
	case "flags":
		o.flags, err = integer(val)
	case "dirent":
		// treeobj's errors are EINVAL
		o.dirent, err = treeobj.DecodeNullable(val)
		f.dirent = true
	}
	if err != nil {
		return fmt.Errorf("op %d: %q: %w", i, key, err)
	}
	return nil
}

// check checks op i once all its members are decoded.
func (f *opFields) check(i int, o *op, guest bool) error {
	if !f.key || !f.dirent {
		return fmt.Errorf("op %d: key and dirent are required: %w", i, syscall.EPROTO)
	}
	return checkOp(i, o, guest)
}

// parseOpsFramed decodes the ops array at the start of p (which goes on
// past it) in the canonical form and returns the ops and the array's
// length; ok is false if it is not in that form or has an error.
func parseOpsFramed(p []byte, guest bool) (ops []op, n int, ok bool) {
	if len(p) < 2 || p[0] != '[' {
		return nil, 0, false
	}
	if p[1] == ']' {
		return nil, 2, true
	}
	ops = makeOps(len(p))
	for i := 1; ; {
		if i >= len(p) || p[i] != '{' {
			return nil, 0, false
		}
		ops = append(ops, op{})
		k := len(ops) - 1
		n, ok := parseOpFramed(p[i:], k, &ops[k], guest)
		if !ok {
			return nil, 0, false
		}
		i += n
		if i >= len(p) {
			return nil, 0, false
		}
		switch p[i] {
		case ',':
			i++
		case ']':
			splitKeys(ops)
			return ops, i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// parseOpFramed decodes op i, the object at the start of p (which goes
// on past it), in the canonical form into o and returns the object's
// length; ok is false if it is not in that form or has an error.
func parseOpFramed(p []byte, i int, o *op, guest bool) (n int, ok bool) {
	var have opFields
	end := -1
	err := jsonwire.Object(p, func(key, val []byte) error {
		switch string(key) {
		case "key", "flags", "dirent":
		default:
			// scanned here from depth 1, it could be nested deeper than
			// jsonwire allows in the payload
			return errUnframed
		}
		if err := have.member(i, o, key, val); err != nil {
			return err
		}
		e := offsetIn(p, val)
		if e < 0 {
			return errUnframed
		}
		e += len(val)
		if bytes.HasPrefix(p[e:], direntHead) {
			// the dirent is decoded by treeobj alone, and the scan
			// stopped before it (treeobj bounds its nesting to far
			// less than jsonwire's bound on the payload's)
			e += len(direntHead)
			d, n, err := treeobj.DecodePrefix(p[e:])
			if err != nil || e+n >= len(p) || p[e+n] != '}' {
				return errUnframed
			}
			o.dirent, have.dirent = d, true
			end = e + n + 1
			return errStop
		}
		if e < len(p) && p[e] == '}' {
			end = e + 1
			return errStop
		}
		return nil
	})
	if err != errStop || end < 0 || have.check(i, o, guest) != nil {
		return 0, false
	}
	return end, true
}

// checkOp validates one operation (its key, flags and dirent; its path
// components are set by splitKeys once all are checked).
func checkOp(i int, o *op, guest bool) error {
	if o.flags&^flagAppend != 0 {
		return fmt.Errorf("op %d (%s): invalid op flags 0x%x: %w", i, o.key, o.flags, syscall.EINVAL)
	}
	if strings.Trim(o.key, ".") == "" {
		// no path components (as splitKeys finds them)
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
