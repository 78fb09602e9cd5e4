package cli

import (
	"encoding/json"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The fields flux jobs (and flux pgrep) format, with flux-core's
// headings and the job-list attributes each needs.

// jobRow is one job being formatted.
type jobRow struct {
	*job.Info
	now  float64
	inst *instanceInfo // what the instance the job runs says (jobs_instance.go)
	fs   *float64      // its association's fair-share (account_jobs.go)
}

var jobHeadings = map[string]string{
	"id": "JOBID", "id.dec": "JOBID", "id.hex": "JOBID", "id.f58": "JOBID",
	"id.f58plain": "JOBID", "id.emoji": "JOBID", "id.kvs": "JOBID", "id.words": "JOBID",
	"id.dothex": "JOBID", "userid": "UID", "username": "USER", "urgency": "URG",
	"priority": "PRI", "state": "STATE", "state_single": "S", "state_emoji": "STATE",
	"name": "NAME", "cwd": "CWD", "queue": "QUEUE", "project": "PROJECT", "bank": "BANK",
	"ntasks": "NTASKS", "ncores": "NCORES", "duration": "DURATION", "nnodes": "NNODES",
	"expiration": "EXPIRATION", "t_remaining": "T_REMAINING", "ranks": "RANKS",
	"nodelist": "NODELIST", "success": "SUCCESS", "result": "RESULT", "result_abbrev": "RS",
	"result_emoji": "RESULT", "t_submit": "T_SUBMIT", "t_depend": "T_DEPEND", "t_run": "T_RUN",
	"t_priority": "T_PRIORITY", "t_sched": "T_SCHED",
	"t_cleanup": "T_CLEANUP", "t_inactive": "T_INACTIVE", "runtime": "RUNTIME",
	"status": "STATUS", "status_abbrev": "ST", "status_emoji": "STATUS", "waitstatus": "WSTATUS",
	"returncode": "RC", "exception.occurred": "EXCEPTION-OCCURRED",
	"exception.severity": "EXCEPTION-SEVERITY", "exception.type": "EXCEPTION-TYPE",
	"exception.note": "EXCEPTION-NOTE", "annotations": "ANNOTATIONS",
	"dependencies": "DEPENDENCIES", "contextual_info": "INFO", "contextual_time": "TIME",
	"inactive_reason":              "INACTIVE-REASON",
	"annotations.sched.t_estimate": "T_ESTIMATE", "annotations.sched.reason_pending": "REASON",
	"annotations.sched.resource_summary": "RESOURCES", "sched": "SCHED",
	"sched.t_estimate": "T_ESTIMATE", "sched.reason_pending": "REASON",
	"sched.resource_summary": "RESOURCES", "user": "USER", "fairshare": "FAIRSHARE",
}

var jobFieldAttrs = map[string][]string{
	"userid": {"userid"}, "username": {"userid"}, "urgency": {"urgency"},
	"priority": {"priority"}, "state": {"state"}, "state_single": {"state"},
	"state_emoji": {"state"}, "name": {"name"}, "cwd": {"cwd"}, "queue": {"queue"},
	"project": {"project"}, "bank": {"bank"}, "ntasks": {"ntasks"}, "ncores": {"ncores"},
	"duration": {"duration"}, "nnodes": {"nnodes"}, "ranks": {"ranks"},
	"nodelist": {"nodelist"}, "success": {"success"}, "waitstatus": {"waitstatus"},
	"returncode":         {"waitstatus", "result"},
	"exception.occurred": {"exception_occurred"}, "exception.severity": {"exception_severity"},
	"exception.type": {"exception_type"}, "exception.note": {"exception_note"},
	"result": {"result"}, "result_abbrev": {"result"}, "result_emoji": {"result"},
	"t_submit": {"t_submit"}, "t_depend": {"t_depend"}, "t_run": {"t_run"},
	"t_priority": {"t_priority"}, "t_sched": {"t_sched"},
	"t_cleanup": {"t_cleanup"}, "t_inactive": {"t_inactive"},
	"runtime": {"t_run", "t_cleanup"}, "status": {"state", "result"},
	"status_abbrev": {"state", "result"}, "status_emoji": {"state", "result"},
	"expiration": {"expiration", "state", "result"}, "t_remaining": {"expiration", "state", "result"},
	"annotations": {"annotations"}, "dependencies": {"dependencies"},
	"contextual_info": {"state", "dependencies", "annotations", "nodelist", "priority", "urgency"},
	"contextual_time": {"state", "t_run", "t_cleanup", "duration"},
	"inactive_reason": {"state", "result", "waitstatus", "exception_occurred", "exception_severity", "exception_type", "exception_note"},
	"sched":           {"annotations"}, "user": {"annotations"},
	"fairshare": {"userid", "bank"},
}

// jobFieldsAttrs returns the job-list attributes the fields need, in
// first-use order.
func jobFieldsAttrs(fields []fmtField) []string {
	var out []string
	seen := map[string]bool{}
	add := func(as []string) {
		for _, a := range as {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	for _, f := range fields {
		if f.name == "" {
			continue
		}
		n := f.name
		switch {
		case strings.HasPrefix(n, "annotations.") || strings.HasPrefix(n, "sched.") || strings.HasPrefix(n, "user."):
			add([]string{"annotations"})
		case isInstanceField(n):
			add([]string{"annotations", "state"}) // where the instance's URI is
		default:
			add(jobFieldAttrs[n])
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func jobHeading(name string) string {
	if h, ok := jobHeadings[name]; ok {
		return h
	}
	if isInstanceField(name) {
		return instanceHeading(name)
	}
	switch {
	case strings.HasPrefix(name, "annotations."):
		return strings.ToUpper(strings.TrimPrefix(name, "annotations."))
	case strings.HasPrefix(name, "sched."), strings.HasPrefix(name, "user."):
		return strings.ToUpper(name)
	}
	return strings.ToUpper(name)
}

var usernames = map[uint32]string{}

func usernameOf(uid uint32) string {
	if n, ok := usernames[uid]; ok {
		return n
	}
	n := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(n); err == nil {
		n = u.Username
	}
	usernames[uid] = n
	return n
}

func (r jobRow) runtime() float64 {
	switch {
	case r.TCleanup > 0 && r.TRun > 0:
		return r.TCleanup - r.TRun
	case r.TRun > 0:
		return r.now - r.TRun
	}
	return 0
}

func (r jobRow) stateStr(short bool) string {
	if !r.Has.Has(job.AttrState) {
		return ""
	}
	if short {
		return r.State.Abbrev()
	}
	return r.State.String()
}

func (r jobRow) resultStr(short bool) string {
	if !r.Has.Has(job.AttrResult) {
		return ""
	}
	if short {
		return r.Result.Abbrev()
	}
	return r.Result.String()
}

// stateEmoji is flux-core's picture of a job state (flux jobs writes
// UTF-8 whatever the locale, as flux-core's does).
func stateEmoji(abbrev string) string {
	switch abbrev {
	case "N":
		return "\U0001f381" // wrapped gift
	case "D":
		return "\U0001f6d1" // stop sign
	case "P":
		return "\U0001f6a6" // vertical traffic light
	case "S":
		return "\U0001f4c5" // calendar
	case "R":
		return "\U0001f3c3" // person running
	case "C":
		return "\U0001f5d1" // wastebasket
	case "I":
		return "\U0001f480" // skull
	}
	return abbrev
}

// resultEmoji is flux-core's picture of a job result; an ideographic
// space for a job without one.
func resultEmoji(abbrev string) string {
	switch abbrev {
	case "CD":
		return "\U0001f600" // grinning face
	case "F":
		return "\U0001f4a9" // pile of poo
	case "CA":
		return "\U0001f4a5" // collision
	case "TO":
		return "\u231b" // hourglass done
	case "":
		return "\u3000"
	}
	return abbrev
}

func (r jobRow) status(short bool) string {
	if r.State&(job.StateActive) != 0 {
		return r.stateStr(short)
	}
	return r.resultStr(short)
}

func (r jobRow) returncode() fmtVal {
	if !r.Has.Has(job.AttrWaitstatus) {
		switch {
		case r.Has.Has(job.AttrResult) && r.Result == job.ResultCanceled:
			return vInt(-128)
		case r.Has.Has(job.AttrResult) && r.Result == job.ResultFailed:
			return vInt(1)
		}
		return vEmpty()
	}
	ws := syscall.WaitStatus(r.Waitstatus)
	if ws.Signaled() {
		return vInt(-int64(ws.Signal()))
	}
	return vInt(int64(ws.ExitStatus()))
}

func (r jobRow) deps() string {
	var out []string
	for _, d := range r.Dependencies {
		if ts, ok := strings.CutPrefix(d, "begin-time="); ok {
			if f, err := strconv.ParseFloat(ts, 64); err == nil {
				t := time.Unix(0, int64(f*1e9))
				now := time.Now()
				if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
					d = "begin@" + t.Format("15:04")
				} else {
					d = "begin@" + t.Format("Jan02-15:04")
				}
				if t.Second() > 0 {
					d += t.Format(":05")
				}
			}
		}
		out = append(out, d)
	}
	return strings.Join(out, ",")
}

// annotation returns the value at a dotted path in the annotations.
func (r jobRow) annotation(path []string) fmtVal {
	raw := json.RawMessage(r.Annotations)
	if len(raw) == 0 {
		return vEmpty()
	}
	for _, p := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return vEmpty()
		}
		v, ok := m[p]
		if !ok {
			return vEmpty()
		}
		raw = v
	}
	return jsonValue(raw)
}

func (r jobRow) contextualInfo() fmtVal {
	switch r.State {
	case job.StatePriority:
		return vStr("priority-wait")
	case job.StateDepend:
		return vStr("depends:" + r.deps())
	case job.StateSched:
		if v := r.annotation([]string{"sched", "t_estimate"}); v.kind == fmtFloat || v.kind == fmtInt {
			t := v.f
			if v.kind == fmtInt {
				t = float64(v.i)
			}
			eta := t - r.now
			if eta < 0 {
				return vStr("eta:now")
			}
			return vStr("eta:" + pyFSD(eta))
		}
		if r.Urgency == 0 {
			return vStr("held")
		}
		if r.Has.Has(job.AttrPriority) && r.Priority == 0 {
			return vStr("priority-hold")
		}
		return vStr("")
	}
	return vStr(r.Nodelist)
}

func (r jobRow) inactiveReason() string {
	if r.State != job.StateInactive {
		return ""
	}
	rc := r.returncode()
	switch r.Result {
	case job.ResultCanceled:
		if r.ExceptionOccurred && r.ExceptionType == "cancel" && r.ExceptionNote != "" {
			return "Canceled: " + r.ExceptionNote
		}
		return "Canceled"
	case job.ResultFailed:
		if r.ExceptionOccurred && r.ExceptionType != "exec" && r.ExceptionSeverity == 0 {
			note := ""
			if r.ExceptionNote != "" {
				note = " note=" + r.ExceptionNote
			}
			return "Exception: type=" + r.ExceptionType + note
		}
		code := rc.i
		switch {
		case code > 128:
			return signalDesc(int(code - 128))
		case code == 126:
			return "Command invoked cannot execute"
		case code == 127:
			return "command not found"
		case code == 128:
			return "Invalid argument to exit"
		}
		return fmt.Sprintf("Exit %d", code)
	case job.ResultTimeout:
		return "Timeout"
	}
	return "Exit " + rc.String()
}

func signalDesc(sig int) string {
	s := syscall.Signal(sig).String()
	if strings.HasPrefix(s, "signal ") {
		return fmt.Sprintf("Signaled %d", sig)
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func optInt(has bool, n int64) fmtVal {
	if !has {
		return vEmpty()
	}
	return vInt(n)
}

// jobField returns the getter of a flux jobs field.
func jobField(name string) (func(jobRow) fmtVal, error) {
	if isInstanceField(name) {
		return instanceField(name)
	}
	if strings.HasPrefix(name, "annotations.") || strings.HasPrefix(name, "sched.") || strings.HasPrefix(name, "user.") {
		path := strings.Split(strings.TrimPrefix(name, "annotations."), ".")
		return func(r jobRow) fmtVal { return r.annotation(path) }, nil
	}
	if name == "fairshare" {
		return func(r jobRow) fmtVal {
			if r.fs == nil {
				return vEmpty()
			}
			return vFloat(*r.fs)
		}, nil
	}
	if enc, ok := strings.CutPrefix(name, "id."); ok {
		if enc == "f58plain" || enc == "f58" || enc == "dec" || enc == "hex" || enc == "dothex" || enc == "words" || enc == "emoji" || enc == "kvs" {
			return func(r jobRow) fmtVal {
				s, _ := r.ID.Encode(enc)
				if enc == "dec" {
					return vInt(int64(r.ID))
				}
				return vStr(s)
			}, nil
		}
	}
	ts := func(a job.Attr, get func(r jobRow) float64) func(jobRow) fmtVal {
		return func(r jobRow) fmtVal {
			if !r.Has.Has(a) {
				return vFloat(0)
			}
			return vFloat(get(r))
		}
	}
	switch name {
	case "id":
		return func(r jobRow) fmtVal { return vStr(r.ID.String()) }, nil
	case "userid":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrUserid), int64(r.Userid)) }, nil
	case "username":
		return func(r jobRow) fmtVal {
			if !r.Has.Has(job.AttrUserid) {
				return vEmpty()
			}
			return vStr(usernameOf(r.Userid))
		}, nil
	case "urgency":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrUrgency), int64(r.Urgency)) }, nil
	case "priority":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrPriority), r.Priority) }, nil
	case "state":
		return func(r jobRow) fmtVal { return vStr(r.stateStr(false)) }, nil
	case "state_single":
		return func(r jobRow) fmtVal { return vStr(r.stateStr(true)) }, nil
	case "state_emoji":
		return func(r jobRow) fmtVal { return vStr(stateEmoji(r.stateStr(true))) }, nil
	case "result":
		return func(r jobRow) fmtVal { return vStr(r.resultStr(false)) }, nil
	case "result_abbrev":
		return func(r jobRow) fmtVal { return vStr(r.resultStr(true)) }, nil
	case "result_emoji":
		return func(r jobRow) fmtVal { return vStr(resultEmoji(r.resultStr(true))) }, nil
	case "status":
		return func(r jobRow) fmtVal { return vStr(r.status(false)) }, nil
	case "status_abbrev":
		return func(r jobRow) fmtVal { return vStr(r.status(true)) }, nil
	case "status_emoji":
		return func(r jobRow) fmtVal {
			if r.State&job.StateActive != 0 {
				return vStr(stateEmoji(r.stateStr(true)))
			}
			return vStr(resultEmoji(r.resultStr(true)))
		}, nil
	case "name":
		return func(r jobRow) fmtVal { return vStr(r.Name) }, nil
	case "cwd":
		return func(r jobRow) fmtVal { return vStr(r.Cwd) }, nil
	case "queue":
		return func(r jobRow) fmtVal { return vStr(r.Queue) }, nil
	case "project":
		return func(r jobRow) fmtVal { return vStr(r.Project) }, nil
	case "bank":
		return func(r jobRow) fmtVal { return vStr(r.Bank) }, nil
	case "ntasks":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrNtasks), int64(r.Ntasks)) }, nil
	case "ncores":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrNcores), int64(r.Ncores)) }, nil
	case "nnodes":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrNnodes), int64(r.Nnodes)) }, nil
	case "duration":
		return ts(job.AttrDuration, func(r jobRow) float64 { return r.Duration }), nil
	case "ranks":
		return func(r jobRow) fmtVal { return vStr(r.Ranks) }, nil
	case "nodelist":
		return func(r jobRow) fmtVal { return vStr(r.Nodelist) }, nil
	case "success":
		return func(r jobRow) fmtVal {
			if !r.Has.Has(job.AttrSuccess) {
				return vEmpty()
			}
			return vBool(r.Success)
		}, nil
	case "waitstatus":
		return func(r jobRow) fmtVal { return optInt(r.Has.Has(job.AttrWaitstatus), int64(r.Waitstatus)) }, nil
	case "returncode":
		return func(r jobRow) fmtVal { return r.returncode() }, nil
	case "exception.occurred":
		return func(r jobRow) fmtVal {
			if !r.Has.Has(job.AttrExceptionOccurred) {
				return vEmpty()
			}
			return vBool(r.ExceptionOccurred)
		}, nil
	case "exception.severity":
		return func(r jobRow) fmtVal {
			return optInt(r.Has.Has(job.AttrExceptionSeverity), int64(r.ExceptionSeverity))
		}, nil
	case "exception.type":
		return func(r jobRow) fmtVal { return vStr(r.ExceptionType) }, nil
	case "exception.note":
		return func(r jobRow) fmtVal { return vStr(r.ExceptionNote) }, nil
	case "t_submit":
		return ts(job.AttrTSubmit, func(r jobRow) float64 { return r.TSubmit }), nil
	case "t_depend":
		return ts(job.AttrTDepend, func(r jobRow) float64 { return r.TDepend }), nil
	case "t_priority":
		return ts(job.AttrTPriority, func(r jobRow) float64 { return r.TPriority }), nil
	case "t_sched":
		return ts(job.AttrTSched, func(r jobRow) float64 { return r.TSched }), nil
	case "t_run":
		return ts(job.AttrTRun, func(r jobRow) float64 { return r.TRun }), nil
	case "t_cleanup":
		return ts(job.AttrTCleanup, func(r jobRow) float64 { return r.TCleanup }), nil
	case "t_inactive":
		return ts(job.AttrTInactive, func(r jobRow) float64 { return r.TInactive }), nil
	case "expiration":
		return ts(job.AttrExpiration, func(r jobRow) float64 { return r.Expiration }), nil
	case "runtime":
		return func(r jobRow) fmtVal { return vFloat(r.runtime()) }, nil
	case "t_remaining":
		return func(r jobRow) fmtVal {
			if r.status(false) != "RUN" || !r.Has.Has(job.AttrExpiration) {
				return vFloat(0)
			}
			left := r.Expiration - r.now
			if left < 0 {
				left = 0
			}
			return vFloat(left)
		}, nil
	case "annotations":
		return func(r jobRow) fmtVal {
			if len(r.Annotations) == 0 {
				return vEmpty()
			}
			return vStr(pyJSONDumps(r.Annotations))
		}, nil
	case "sched", "user":
		return func(r jobRow) fmtVal { return r.annotation([]string{name}) }, nil
	case "dependencies":
		return func(r jobRow) fmtVal { return vStr(r.deps()) }, nil
	case "contextual_info":
		return func(r jobRow) fmtVal { return r.contextualInfo() }, nil
	case "contextual_time":
		return func(r jobRow) fmtVal {
			if r.State&job.StatePending != 0 {
				return vFloat(r.Duration)
			}
			return vFloat(r.runtime())
		}, nil
	case "inactive_reason":
		return func(r jobRow) fmtVal { return vStr(r.inactiveReason()) }, nil
	}
	return nil, fmt.Errorf("Unknown format field: %s", name)
}

var jobFieldSource = fieldSource[jobRow]{get: jobField, heading: jobHeading, printable: true}

// jobJSON is a job as flux jobs --json prints it (flux-core's
// JobInfo.to_dict(): unset and empty values left out).
func jobJSON(r jobRow) map[string]any {
	out := map[string]any{"id": uint64(r.ID), "jobid": r.ID.String()}
	set := func(k string, v fmtVal) {
		switch v.kind {
		case fmtStr:
			if v.s != "" {
				out[k] = v.s
			}
		case fmtInt:
			out[k] = v.i
		case fmtFloat:
			if v.f != 0 || !(strings.HasPrefix(k, "t_") || k == "runtime" || k == "expiration") {
				out[k] = v.f
			}
		case fmtBool:
			out[k] = v.b
		}
	}
	for _, k := range []string{"t_depend", "t_priority", "t_sched", "t_run", "t_cleanup", "t_inactive", "duration", "expiration",
		"name", "cwd", "queue", "project", "bank", "ntasks", "ncores", "nnodes", "priority", "ranks",
		"nodelist", "success", "result", "waitstatus", "t_submit", "t_remaining", "state", "username",
		"userid", "urgency", "runtime", "status", "returncode", "dependencies"} {
		g, _ := jobField(k)
		set(k, g(r))
	}
	if len(r.Dependencies) > 0 {
		out["dependencies"] = r.Dependencies
	}
	var ann any = map[string]any{}
	if len(r.Annotations) > 0 {
		json.Unmarshal(r.Annotations, &ann)
	}
	out["annotations"] = ann
	exc := map[string]any{"occurred": r.ExceptionOccurred}
	if r.ExceptionOccurred {
		exc["severity"] = r.ExceptionSeverity
		exc["type"] = r.ExceptionType
		exc["note"] = r.ExceptionNote
	}
	out["exception"] = exc
	return out
}

// parseJobIDArg reads a job ID in any encoding.
func parseJobIDArg(s string) (jobid.ID, error) {
	return jobid.Parse(s) // its error says: invalid jobid "S": why
}
