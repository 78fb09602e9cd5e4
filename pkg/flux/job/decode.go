package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// DecodeJobs decodes a job-list.list response payload ({"jobs":[...]})
// and calls fn with each job in order. The JSON is scanned by jsonwire
// (strict RFC 8259 grammar) and the flat job objects RFC 43 defines are
// decoded without reflection, several times faster than encoding/json:
// a listing of every job of a busy instance is large. Unknown keys are
// skipped and a null attribute is taken as absent; the attributes are
// decoded as encoding/json decodes them into fields of Info's types.
// Errors wrap ErrInvalid (and jsonwire.ErrSyntax when the JSON is
// malformed or a value has the wrong type); fn may have seen the jobs
// before the one in error.
func DecodeJobs(payload []byte, fn func(*Info)) error {
	var shared [sharedSlots]string
	d := decoder{strs: &shared}
	if err := d.response(payload, fn); err != nil {
		return d.wrap(err)
	}
	return nil
}

// DecodeJob decodes one job object, as DecodeJobs decodes each (a
// job-list.list-id response's "job").
func DecodeJob(b []byte) (*Info, error) {
	d := decoder{n: -1}
	j := &Info{}
	if err := d.job(j, b); err != nil {
		return nil, d.wrap(err)
	}
	return j, nil
}

// jobsPrefix is how job-list starts every response.
const jobsPrefix = `{"jobs":[`

// deepJob is the length from which a job object can hold values nested
// deeply enough for the depth of the jobs array in the response to
// matter (jsonwire and encoding/json allow 10000 levels, and each level
// takes two bytes).
const deepJob = 2 * (10000 - 2)

// response decodes a response object.
//
// jsonwire.Object checks each member's value before it reports it, and
// jsonwire.Array each element: decoding {"jobs":[...]} as objects in an
// array in an object scans every job three times. A response that starts
// as job-list writes them, with jobsPrefix, is decoded as the jobs array
// that follows the prefix instead (payload[8:] without the final '}'),
// which saves the outer scan. When that array turns out to be followed
// by more members (the first response of a stream has "version"), the
// rest of the response after the last job decoded is decoded behind a
// copy of the prefix and a placeholder element: the copy continues as
// the response does.
func (d *decoder) response(payload []byte, fn func(*Info)) error {
	n := len(payload)
	if n <= len(jobsPrefix) || string(payload[:len(jobsPrefix)]) != jobsPrefix || payload[n-1] != '}' {
		return d.members(payload, fn, false)
	}
	err := d.list(payload[len(jobsPrefix)-1:n-1], fn, true)
	if err == nil {
		return nil
	}
	if _, ok := err.(*fieldError); ok {
		return err
	}
	if d.n == 0 {
		return d.members(payload, fn, false) // no job decoded yet: start again
	}
	end := cap(payload) - cap(d.last) + len(d.last)
	if end <= 0 || end > n || &payload[end-1] != &d.last[len(d.last)-1] {
		return err // not a subslice of payload: cannot happen
	}
	rest := append([]byte(jobsPrefix+"0"), payload[end:]...)
	if err := d.members(rest, fn, true); err != nil {
		if _, ok := err.(*fieldError); ok {
			return err
		}
		// The response is malformed after the last job decoded:
		// report the error as a scan of the whole response finds it.
		if perr := jsonwire.Object(payload, func(_, _ []byte) error { return nil }); perr != nil {
			return perr
		}
		return err
	}
	return nil
}

// members decodes the members of the response object p: the jobs of its
// "jobs" arrays, but for the first one if skipFirst.
func (d *decoder) members(p []byte, fn func(*Info), skipFirst bool) error {
	return jsonwire.Object(p, func(key, val []byte) error {
		if string(key) != "jobs" {
			return nil
		}
		if skipFirst {
			skipFirst = false
			return nil
		}
		return d.list(val, fn, false)
	})
}

// list decodes the jobs of the JSON array arr. outer tells that arr is
// not the value of a response's member but the response without its
// first 8 bytes, so that jsonwire counts the nesting of the jobs two
// levels short: a job long enough for that to matter is checked again
// at its depth in the response. The errors about a job are fieldErrors.
func (d *decoder) list(arr []byte, fn func(*Info), outer bool) error {
	return jsonwire.Array(arr, func(obj []byte) error {
		if outer && len(obj) >= deepJob {
			nested := append(append([]byte(jobsPrefix), obj...), "]}"...)
			if err := jsonwire.Object(nested, func(_, _ []byte) error { return nil }); err != nil {
				return &fieldError{job: d.n, err: err}
			}
		}
		j := &Info{}
		if err := d.job(j, obj); err != nil {
			if _, ok := err.(*fieldError); !ok {
				err = &fieldError{job: d.n, err: err}
			}
			return err
		}
		d.n++
		d.last = obj
		fn(j)
		return nil
	})
}

// decoder holds the state of one DecodeJobs or DecodeJob call.
type decoder struct {
	// n counts the jobs decoded, so it is the index of the one being
	// decoded in the response (-1 for DecodeJob).
	n int
	// last is the last job decoded.
	last []byte
	// strs shares the text of repeated short strings (names, working
	// directories, queues, nodes ...) across the jobs of one listing: a
	// direct-mapped cache indexed by a hash of the text, where a string
	// replaces the one it collides with. Unlike a map it does not grow
	// with the strings that never repeat (the ranks of every job of a
	// large listing ...). nil: no sharing.
	strs *[sharedSlots]string
}

// sharedSlots is the size of the cache of shared strings, sharedMaxLen
// the length of the longest string shared.
const (
	sharedSlots  = 512
	sharedMaxLen = 64
)

var sharedSeed = maphash.MakeSeed()

// fieldError is the error about a job object or one of its members.
type fieldError struct {
	job int    // index in the response, -1 for DecodeJob
	key string // the member's key, "" for the whole object
	err error
}

func (e *fieldError) Error() string {
	where := "job object"
	if e.job >= 0 {
		where = fmt.Sprintf("jobs[%d]", e.job)
	}
	if e.key != "" {
		where += ": " + e.key
	}
	return fmt.Sprintf("%v: %s: %v", ErrInvalid, where, e.err)
}

func (e *fieldError) Unwrap() []error { return []error{ErrInvalid, e.err} }

// errRange is the cause of the errors about integers a field's type
// cannot hold (encoding/json rejects them too).
var errRange = errors.New("integer out of range")

// wrap makes an error of jsonwire's (or fieldError) one of the package's.
func (d *decoder) wrap(err error) error {
	if _, ok := err.(*fieldError); ok {
		return err
	}
	if d.n < 0 {
		return fmt.Errorf("%w: job object: %w", ErrInvalid, err)
	}
	return fmt.Errorf("%w: job-list response (%d jobs decoded): %w", ErrInvalid, d.n, err)
}

// job decodes the job object obj into j.
func (d *decoder) job(j *Info, obj []byte) error {
	return jsonwire.Object(obj, func(key, val []byte) error {
		return d.field(j, key, val)
	})
}

// attrID is the pseudo attribute lookupAttr returns for "id".
const attrID = numAttrs

// lookupAttr returns the attribute called key (attrID for "id"). It is
// attrByName without hashing, for the members of every job.
func lookupAttr(key []byte) (Attr, bool) {
	switch string(key) {
	case "id":
		return attrID, true
	case "userid":
		return AttrUserid, true
	case "urgency":
		return AttrUrgency, true
	case "priority":
		return AttrPriority, true
	case "t_submit":
		return AttrTSubmit, true
	case "t_depend":
		return AttrTDepend, true
	case "t_priority":
		return AttrTPriority, true
	case "t_sched":
		return AttrTSched, true
	case "t_run":
		return AttrTRun, true
	case "t_cleanup":
		return AttrTCleanup, true
	case "t_inactive":
		return AttrTInactive, true
	case "state":
		return AttrState, true
	case "name":
		return AttrName, true
	case "cwd":
		return AttrCwd, true
	case "queue":
		return AttrQueue, true
	case "project":
		return AttrProject, true
	case "bank":
		return AttrBank, true
	case "ntasks":
		return AttrNtasks, true
	case "ncores":
		return AttrNcores, true
	case "duration":
		return AttrDuration, true
	case "nnodes":
		return AttrNnodes, true
	case "ranks":
		return AttrRanks, true
	case "nodelist":
		return AttrNodelist, true
	case "success":
		return AttrSuccess, true
	case "exception_occurred":
		return AttrExceptionOccurred, true
	case "exception_type":
		return AttrExceptionType, true
	case "exception_severity":
		return AttrExceptionSeverity, true
	case "exception_note":
		return AttrExceptionNote, true
	case "result":
		return AttrResult, true
	case "expiration":
		return AttrExpiration, true
	case "annotations":
		return AttrAnnotations, true
	case "waitstatus":
		return AttrWaitstatus, true
	case "dependencies":
		return AttrDependencies, true
	}
	return 0, false
}

// field decodes the member key: val of a job object into j.
func (d *decoder) field(j *Info, key, val []byte) error {
	a, ok := lookupAttr(key)
	if !ok {
		return nil
	}
	var err error
	if a == attrID {
		var n uint64
		if n, err = jsonwire.Uint(val); err == nil {
			j.ID = jobid.ID(n)
			return nil
		}
		return &fieldError{job: d.n, key: "id", err: err}
	}
	if jsonwire.IsNull(val) { // null: treat as absent
		return nil
	}
	switch a {
	case AttrUserid:
		j.Userid, err = uint32Value(val)
	case AttrUrgency:
		j.Urgency, err = intValue(val)
	case AttrPriority:
		j.Priority, err = jsonwire.Int(val)
	case AttrTSubmit:
		j.TSubmit, err = jsonwire.Float(val)
	case AttrTDepend:
		j.TDepend, err = jsonwire.Float(val)
	case AttrTPriority:
		j.TPriority, err = jsonwire.Float(val)
	case AttrTSched:
		j.TSched, err = jsonwire.Float(val)
	case AttrTRun:
		j.TRun, err = jsonwire.Float(val)
	case AttrTCleanup:
		j.TCleanup, err = jsonwire.Float(val)
	case AttrTInactive:
		j.TInactive, err = jsonwire.Float(val)
	case AttrState:
		var n uint32
		n, err = uint32Value(val)
		j.State = State(n)
	case AttrName:
		j.Name, err = d.str(val)
	case AttrCwd:
		j.Cwd, err = d.str(val)
	case AttrQueue:
		j.Queue, err = d.str(val)
	case AttrProject:
		j.Project, err = d.str(val)
	case AttrBank:
		j.Bank, err = d.str(val)
	case AttrNtasks:
		j.Ntasks, err = intValue(val)
	case AttrNcores:
		j.Ncores, err = intValue(val)
	case AttrDuration:
		j.Duration, err = jsonwire.Float(val)
	case AttrNnodes:
		j.Nnodes, err = intValue(val)
	case AttrRanks:
		j.Ranks, err = d.str(val)
	case AttrNodelist:
		j.Nodelist, err = d.str(val)
	case AttrSuccess:
		j.Success, err = jsonwire.Bool(val)
	case AttrExceptionOccurred:
		j.ExceptionOccurred, err = jsonwire.Bool(val)
	case AttrExceptionType:
		j.ExceptionType, err = d.str(val)
	case AttrExceptionSeverity:
		j.ExceptionSeverity, err = intValue(val)
	case AttrExceptionNote:
		j.ExceptionNote, err = d.str(val)
	case AttrResult:
		var n uint32
		n, err = uint32Value(val)
		j.Result = Result(n)
	case AttrExpiration:
		j.Expiration, err = jsonwire.Float(val)
	case AttrAnnotations:
		j.Annotations = append(json.RawMessage(nil), val...)
	case AttrWaitstatus:
		j.Waitstatus, err = intValue(val)
	case AttrDependencies:
		j.Dependencies, err = d.strList(val)
	}
	if err != nil {
		return &fieldError{job: d.n, key: a.String(), err: err}
	}
	j.Has.Add(a)
	return nil
}

// intValue decodes an integer an int holds.
func intValue(val []byte) (int, error) {
	n, err := jsonwire.Int(val)
	if err != nil {
		return 0, err
	}
	if int64(int(n)) != n {
		return 0, fmt.Errorf("%w: %s", errRange, val)
	}
	return int(n), nil
}

// uint32Value decodes an integer a uint32 holds.
func uint32Value(val []byte) (uint32, error) {
	n, err := jsonwire.Uint(val)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint32 {
		return 0, fmt.Errorf("%w: %s", errRange, val)
	}
	return uint32(n), nil
}

// str decodes a string value, sharing its text with an equal string
// decoded before when it is short.
func (d *decoder) str(val []byte) (string, error) {
	if d.strs == nil || len(val) > sharedMaxLen+len(`""`) {
		return jsonwire.String(val) // no copy of a string it decodes
	}
	b, err := jsonwire.StringBytes(val)
	if err != nil {
		return "", err
	}
	return d.share(b), nil
}

// share returns b as a string, reusing an equal string seen before.
func (d *decoder) share(b []byte) string {
	if d.strs == nil || len(b) > sharedMaxLen {
		return string(b)
	}
	slot := &d.strs[maphash.Bytes(sharedSeed, b)%sharedSlots]
	if *slot != string(b) {
		*slot = string(b)
	}
	return *slot
}

// strList decodes an array of strings as encoding/json decodes it into
// a []string: empty but not nil for [], "" for a null element.
func (d *decoder) strList(val []byte) ([]string, error) {
	out := []string{}
	err := jsonwire.Array(val, func(e []byte) error {
		if jsonwire.IsNull(e) {
			out = append(out, "")
			return nil
		}
		s, err := d.str(e)
		if err != nil {
			return err
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
