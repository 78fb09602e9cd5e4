package job

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// DecodeJobs decodes a job-list.list response payload ({"jobs":[...]})
// and calls fn with each job in order. It is a hand-written decoder for
// the flat job objects RFC 43 defines, several times faster than
// encoding/json: a listing of every job of a busy instance is large.
// Unknown keys are skipped.
func DecodeJobs(payload []byte, fn func(*Info)) error {
	d := decoder{b: payload}
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		return nil
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		if string(key) == "jobs" {
			if err := d.expect('['); err != nil {
				return err
			}
			if d.peek() == ']' {
				d.i++
			} else {
				for {
					j := &Info{}
					if err := d.job(j); err != nil {
						return err
					}
					fn(j)
					c, err := d.next()
					if err != nil {
						return err
					}
					if c == ']' {
						break
					}
					if c != ',' {
						return d.errorf("expected , or ] in jobs array")
					}
				}
			}
		} else if _, err := d.skip(); err != nil {
			return err
		}
		c, err := d.next()
		if err != nil {
			return err
		}
		if c == '}' {
			return nil
		}
		if c != ',' {
			return d.errorf("expected , or } in response")
		}
	}
}

// DecodeJob decodes one job object.
func DecodeJob(b []byte) (*Info, error) {
	d := decoder{b: b}
	j := &Info{}
	if err := d.job(j); err != nil {
		return nil, err
	}
	return j, nil
}

type decoder struct {
	b []byte
	i int
	// strs shares the text of repeated short strings (names, working
	// directories, queues ...) across the jobs of one listing.
	strs map[string]string
}

// maxShared bounds the strings (and their length) strs keeps.
const (
	maxShared    = 4096
	maxSharedLen = 64
)

// shared returns b as a string, reusing an equal string seen before.
func (d *decoder) shared(b []byte) string {
	if len(b) > maxSharedLen {
		return string(b)
	}
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if d.strs == nil {
		d.strs = make(map[string]string)
	}
	if len(d.strs) < maxShared {
		d.strs[s] = s
	}
	return s
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: job object at offset %d: %s", ErrInvalid, d.i, fmt.Sprintf(format, args...))
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) next() (byte, error) {
	d.ws()
	if d.i >= len(d.b) {
		return 0, d.errorf("unexpected end")
	}
	c := d.b[d.i]
	d.i++
	return c, nil
}

func (d *decoder) expect(c byte) error {
	got, err := d.next()
	if err != nil {
		return err
	}
	if got != c {
		return d.errorf("expected %q, got %q", c, got)
	}
	return nil
}

// key reads an object key and the colon after it. The key is returned
// as the payload's bytes when it holds no escapes (valid until the next
// call), else decoded.
func (d *decoder) key() ([]byte, error) {
	k, err := d.strBytes()
	if err != nil {
		return nil, err
	}
	return k, d.expect(':')
}

// str reads a JSON string.
func (d *decoder) str() (string, error) {
	b, err := d.strBytes()
	if err != nil {
		return "", err
	}
	return d.shared(b), nil
}

// strBytes reads a JSON string: the bytes of the payload when it holds
// no escapes or non-ASCII, else a decoded copy.
func (d *decoder) strBytes() ([]byte, error) {
	if d.peek() != '"' {
		return nil, d.errorf("expected string")
	}
	start := d.i
	d.i++
	simple := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if simple {
				return d.b[start+1 : d.i-1], nil
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return nil, d.errorf("bad string: %v", err)
			}
			return []byte(s), nil
		case c == '\\':
			simple = false
			d.i += 2
			continue
		case c < 0x20:
			return nil, d.errorf("control character in string")
		case c >= utf8.RuneSelf:
			simple = false
		}
		d.i++
	}
	return nil, d.errorf("unterminated string")
}

// skip skips one value and returns its text.
func (d *decoder) skip() ([]byte, error) {
	d.ws()
	start := d.i
	if d.i >= len(d.b) {
		return nil, d.errorf("unexpected end")
	}
	switch c := d.b[d.i]; c {
	case '"':
		if _, err := d.strBytes(); err != nil {
			return nil, err
		}
	case '{', '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.i++
					return d.b[start:d.i], nil
				}
			case '"':
				if _, err := d.strBytes(); err != nil {
					return nil, err
				}
				continue
			}
			d.i++
		}
		return nil, d.errorf("unterminated %c", c)
	default:
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return d.b[start:d.i], nil
			}
			d.i++
		}
	}
	return d.b[start:d.i], nil
}

func (d *decoder) number() (float64, error) {
	v, err := d.skip()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(view(v), 64)
	if err != nil {
		return 0, d.errorf("bad number %q", v)
	}
	return f, nil
}

// view is b as a string without a copy, for parsing (strconv copies the
// text it puts in errors).
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (d *decoder) integer() (int64, error) {
	v, err := d.skip()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(view(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(view(v), 64)
		if ferr != nil {
			return 0, d.errorf("bad integer %q", v)
		}
		n = int64(f)
	}
	return n, nil
}

func (d *decoder) boolean() (bool, error) {
	v, err := d.skip()
	if err != nil {
		return false, err
	}
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, d.errorf("bad boolean %q", v)
}

// job decodes one job object into j.
func (d *decoder) job(j *Info) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		if err := d.field(j, key); err != nil {
			return err
		}
		c, err := d.next()
		if err != nil {
			return err
		}
		if c == '}' {
			return nil
		}
		if c != ',' {
			return d.errorf("expected , or } in job object")
		}
	}
}

func (d *decoder) field(j *Info, key []byte) error {
	if string(key) == "id" {
		v, err := d.skip()
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(view(v), 10, 64)
		if err != nil {
			return d.errorf("bad job id %q", v)
		}
		j.ID = jobid.ID(n)
		return nil
	}
	a, ok := attrByName[string(key)]
	if !ok {
		_, err := d.skip()
		return err
	}
	if d.peek() == 'n' { // null: treat as absent
		_, err := d.skip()
		return err
	}
	var err error
	var n int64
	switch a {
	case AttrUserid:
		n, err = d.integer()
		j.Userid = uint32(n)
	case AttrUrgency:
		n, err = d.integer()
		j.Urgency = int(n)
	case AttrPriority:
		j.Priority, err = d.integer()
	case AttrTSubmit:
		j.TSubmit, err = d.number()
	case AttrTDepend:
		j.TDepend, err = d.number()
	case AttrTRun:
		j.TRun, err = d.number()
	case AttrTCleanup:
		j.TCleanup, err = d.number()
	case AttrTInactive:
		j.TInactive, err = d.number()
	case AttrState:
		n, err = d.integer()
		j.State = State(n)
	case AttrName:
		j.Name, err = d.str()
	case AttrCwd:
		j.Cwd, err = d.str()
	case AttrQueue:
		j.Queue, err = d.str()
	case AttrProject:
		j.Project, err = d.str()
	case AttrBank:
		j.Bank, err = d.str()
	case AttrNtasks:
		n, err = d.integer()
		j.Ntasks = int(n)
	case AttrNcores:
		n, err = d.integer()
		j.Ncores = int(n)
	case AttrDuration:
		j.Duration, err = d.number()
	case AttrNnodes:
		n, err = d.integer()
		j.Nnodes = int(n)
	case AttrRanks:
		j.Ranks, err = d.str()
	case AttrNodelist:
		j.Nodelist, err = d.str()
	case AttrSuccess:
		j.Success, err = d.boolean()
	case AttrExceptionOccurred:
		j.ExceptionOccurred, err = d.boolean()
	case AttrExceptionType:
		j.ExceptionType, err = d.str()
	case AttrExceptionSeverity:
		n, err = d.integer()
		j.ExceptionSeverity = int(n)
	case AttrExceptionNote:
		j.ExceptionNote, err = d.str()
	case AttrResult:
		n, err = d.integer()
		j.Result = Result(n)
	case AttrExpiration:
		j.Expiration, err = d.number()
	case AttrAnnotations:
		var raw []byte
		raw, err = d.skip()
		j.Annotations = append(json.RawMessage(nil), raw...)
	case AttrWaitstatus:
		n, err = d.integer()
		j.Waitstatus = int(n)
	case AttrDependencies:
		var raw []byte
		if raw, err = d.skip(); err == nil {
			if uerr := json.Unmarshal(raw, &j.Dependencies); uerr != nil {
				err = d.errorf("dependencies: %v", uerr)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	j.Has.Add(a)
	return nil
}
