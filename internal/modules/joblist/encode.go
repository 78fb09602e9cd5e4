package joblist

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// attrList is the resolved attrs of a request, in request order (the
// response object keeps that order, as flux-core's does).
type attrList []job.Attr

// parseAttrs resolves requested attribute names ("all" expands to every
// attribute). Unknown names are an EINVAL error naming the attribute.
func parseAttrs(names []string) (attrList, error) {
	out := make(attrList, 0, len(names))
	var seen job.AttrSet
	addOne := func(a job.Attr) {
		if !seen.Has(a) {
			seen.Add(a)
			out = append(out, a)
		}
	}
	for _, n := range names {
		if n == job.AttrAll {
			for _, name := range job.Attrs() {
				a, _ := job.ParseAttr(name)
				addOne(a)
			}
			continue
		}
		if n == "id" {
			continue
		}
		a, ok := job.ParseAttr(n)
		if !ok {
			return nil, flux.NewError(syscall.EINVAL, fmt.Sprintf("%s is not a valid attribute", n))
		}
		addOne(a)
	}
	return out, nil
}

// appendJob appends r as a JSON object with id and the attributes that
// are set (RFC 43: unset attributes are left out).
func appendJob(b []byte, r *record, attrs attrList) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, uint64(r.id), 10)
	for _, a := range attrs {
		b = appendAttr(b, r, a)
	}
	return append(b, '}')
}

func appendKey(b []byte, a job.Attr) []byte {
	b = append(b, ',', '"')
	b = append(b, a.String()...)
	return append(b, '"', ':')
}

func appendAttr(b []byte, r *record, a job.Attr) []byte {
	inactive := r.Entered&job.StateInactive != 0
	switch a {
	case job.AttrUserid:
		if !r.Submitted {
			return b
		}
		return strconv.AppendUint(appendKey(b, a), uint64(r.userid), 10)
	case job.AttrUrgency:
		if r.urgency < 0 {
			return b
		}
		return strconv.AppendInt(appendKey(b, a), int64(r.urgency), 10)
	case job.AttrPriority:
		if r.Entered&job.StateSched == 0 {
			return b
		}
		return strconv.AppendInt(appendKey(b, a), r.priority, 10)
	case job.AttrTSubmit:
		if !r.Submitted {
			return b
		}
		return appendReal(appendKey(b, a), r.TSubmit)
	case job.AttrTDepend:
		if r.Entered&job.StateDepend == 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.TDepend)
	case job.AttrTPriority:
		if r.Entered&job.StatePriority == 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.TPriority)
	case job.AttrTSched:
		if r.Entered&job.StateSched == 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.TSched)
	case job.AttrTRun:
		if r.Entered&job.StateRun == 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.TRun)
	case job.AttrTCleanup:
		if r.Entered&job.StateCleanup == 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.TCleanup)
	case job.AttrTInactive:
		if !inactive {
			return b
		}
		return appendReal(appendKey(b, a), r.TInactive)
	case job.AttrState:
		return strconv.AppendUint(appendKey(b, a), uint64(r.State), 10)
	case job.AttrName:
		return appendOptString(b, a, r.lab().name)
	case job.AttrCwd:
		return appendOptString(b, a, r.lab().cwd)
	case job.AttrQueue:
		return appendOptString(b, a, r.lab().queue)
	case job.AttrProject:
		return appendOptString(b, a, r.lab().project)
	case job.AttrBank:
		return appendOptString(b, a, r.lab().bank)
	case job.AttrNtasks:
		return appendOptInt(b, a, r.ntasks)
	case job.AttrNcores:
		return appendOptInt(b, a, r.ncores)
	case job.AttrNnodes:
		return appendOptInt(b, a, r.nnodes)
	case job.AttrDuration:
		if r.duration < 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.duration)
	case job.AttrRanks:
		if r.Entered&job.StateRun == 0 {
			return b
		}
		return appendOptString(b, a, r.ranks)
	case job.AttrNodelist:
		if r.Entered&job.StateRun == 0 {
			return b
		}
		return appendOptString(b, a, r.nodelist)
	case job.AttrExpiration:
		if r.Entered&job.StateRun == 0 || r.expiration < 0 {
			return b
		}
		return appendReal(appendKey(b, a), r.expiration)
	case job.AttrWaitstatus:
		return appendOptInt(b, a, r.Waitstatus)
	case job.AttrSuccess:
		if !inactive {
			return b
		}
		return strconv.AppendBool(appendKey(b, a), r.Success)
	case job.AttrExceptionOccurred:
		if !inactive {
			return b
		}
		return strconv.AppendBool(appendKey(b, a), r.ExcOccurred)
	case job.AttrExceptionSeverity:
		if !inactive || !r.ExcOccurred {
			return b
		}
		return strconv.AppendInt(appendKey(b, a), int64(r.ExcSeverity), 10)
	case job.AttrExceptionType:
		if !inactive || !r.ExcOccurred {
			return b
		}
		return jsonwire.AppendPlainString(appendKey(b, a), r.excType())
	case job.AttrExceptionNote:
		if !inactive || !r.ExcOccurred {
			return b
		}
		return jsonwire.AppendPlainString(appendKey(b, a), r.rare.excNote)
	case job.AttrResult:
		if !inactive {
			return b
		}
		return strconv.AppendUint(appendKey(b, a), uint64(r.Result), 10)
	case job.AttrAnnotations:
		if r.annotations == "" {
			return b
		}
		return append(appendKey(b, a), r.annotations...)
	case job.AttrDependencies:
		if r.rare == nil || r.rare.deps == nil {
			return b
		}
		b = append(appendKey(b, a), '[')
		for i, d := range r.rare.deps.list {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonwire.AppendPlainString(b, d)
		}
		return append(b, ']')
	}
	return b
}

func appendOptString(b []byte, a job.Attr, s string) []byte {
	if s == "" {
		return b
	}
	return jsonwire.AppendPlainString(appendKey(b, a), s)
}

func appendOptInt(b []byte, a job.Attr, n int32) []byte {
	if n < 0 {
		return b
	}
	return strconv.AppendInt(appendKey(b, a), int64(n), 10)
}

// appendReal writes a JSON real the way flux-core (jansson) does: always
// with a decimal point, so 0 is 0.0.
func appendReal(b []byte, f float64) []byte {
	start := len(b)
	b = strconv.AppendFloat(b, f, 'f', -1, 64)
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, '.', '0')
}
