package builtin

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Perilog runs the job-manager prolog and epilog that
// flux-config-job-manager(5) describes, configured by the
// [job-manager.prolog], [job-manager.epilog] and [job-manager.perilog]
// tables (or, when loaded with a configuration, by its prolog, epilog
// and perilog keys):
//
//   - The prolog starts when a job enters RUN, before its shells, on
//     rank 0 (or with per-rank on every rank of the job). If it fails or
//     times out, a fatal "prolog" exception is raised and the job never
//     starts; with per-rank, the ranks where it failed are drained.
//   - A fatal exception while the prolog runs (cancel-on-exception,
//     default true) sends it SIGTERM; ranks where it is still running
//     kill-timeout seconds later are drained.
//   - The epilog starts at the job's finish event, or after a prolog
//     that failed or was canceled. Its failure raises no exception (the
//     job is already over); with per-rank, failed ranks are drained.
//
// Events: prolog-start / prolog-finish and epilog-start / epilog-finish
// (RFC 21) with description "job-manager.prolog" / "job-manager.epilog";
// the job manager holds the start back until prolog-finish and the free
// until epilog-finish.
type Perilog struct {
	h jobtap.Host
	// explicit is set when the plugin was loaded with a configuration of
	// its own: the instance's [job-manager] tables are then ignored.
	explicit bool
	cfg      perilogConfig
	procs    map[jobid.ID]*perilogRun
}

var (
	_ jobtap.Loader        = (*Perilog)(nil)
	_ jobtap.Unloader      = (*Perilog)(nil)
	_ jobtap.ConfigUpdater = (*Perilog)(nil)
	_ jobtap.StateHook     = (*Perilog)(nil)
	_ jobtap.EventHook     = (*Perilog)(nil)
	_ jobtap.Querier       = (*Perilog)(nil)
)

// perilogConfig is the parsed configuration.
type perilogConfig struct {
	prolog, epilog *perilogDesc // nil: none configured
	logIgnore      []*regexp.Regexp
}

// perilogDesc is one of [job-manager.prolog] and [job-manager.epilog].
type perilogDesc struct {
	prolog            bool
	Command           []string `json:"command"`
	PerRank           bool     `json:"per_rank"`
	CancelOnException bool     `json:"cancel_on_exception"`
	Timeout           float64  `json:"timeout"` // seconds, 0: none
	KillTimeout       float64  `json:"kill-timeout"`
}

func (d *perilogDesc) name() string {
	if d.prolog {
		return "prolog"
	}
	return "epilog"
}

// Defaults of flux-config-job-manager(5).
const (
	prologDefaultTimeout = 30 * 60
	perilogKillTimeout   = 10
)

// Name implements jobtap.Plugin.
func (*Perilog) Name() string { return "perilog" }

// Load implements jobtap.Loader: a configuration given with the load
// (flux jobtap load perilog.so prolog={...}) replaces the instance's.
func (p *Perilog) Load(h jobtap.Host, conf json.RawMessage) error {
	p.h = h
	p.procs = make(map[jobid.ID]*perilogRun)
	if len(conf) == 0 || string(conf) == "null" {
		return nil
	}
	var tables map[string]json.RawMessage
	if err := json.Unmarshal(conf, &tables); err != nil {
		return fmt.Errorf("config: want an object of prolog, epilog and perilog tables: %w", syscall.EINVAL)
	}
	for k := range tables {
		if k != "prolog" && k != "epilog" && k != "perilog" {
			return fmt.Errorf("config: unknown key %q (prolog, epilog or perilog): %w", k, syscall.EINVAL)
		}
	}
	cfg, err := parsePerilog(tables, "")
	if err != nil {
		return err
	}
	p.explicit, p.cfg = true, cfg
	return nil
}

// ConfigUpdate implements jobtap.ConfigUpdater: the [job-manager]
// prolog, epilog and perilog tables, and exec.imp.
func (p *Perilog) ConfigUpdate(conf json.RawMessage) (func(), error) {
	if p.explicit {
		return func() {}, nil
	}
	var top struct {
		Exec struct {
			IMP string `json:"imp"`
		} `json:"exec"`
		JM map[string]json.RawMessage `json:"job-manager"`
	}
	if len(conf) > 0 {
		if err := json.Unmarshal(conf, &top); err != nil {
			return nil, fmt.Errorf("perilog: error unpacking config: %v: %w", err, syscall.EINVAL)
		}
	}
	cfg, err := parsePerilog(top.JM, top.Exec.IMP)
	if err != nil {
		return nil, err
	}
	return func() { p.cfg = cfg }, nil
}

// parsePerilog reads the prolog, epilog and perilog tables of tables
// (any may be absent); imp is exec.imp ("" if unset).
func parsePerilog(tables map[string]json.RawMessage, imp string) (perilogConfig, error) {
	var cfg perilogConfig
	for _, prolog := range []bool{true, false} {
		name := "epilog"
		if prolog {
			name = "prolog"
		}
		raw, ok := tables[name]
		if !ok || string(raw) == "null" {
			continue
		}
		d, err := parsePerilogDesc(raw, prolog, imp)
		if err != nil {
			return cfg, fmt.Errorf("[job-manager.%s]: %v: %w", name, err, syscall.EINVAL)
		}
		if prolog {
			cfg.prolog = d
		} else {
			cfg.epilog = d
		}
	}
	if raw, ok := tables["perilog"]; ok && string(raw) != "null" {
		var common map[string]json.RawMessage
		if err := json.Unmarshal(raw, &common); err != nil {
			return cfg, fmt.Errorf("[job-manager.perilog]: must be a table: %w", syscall.EINVAL)
		}
		for k, v := range common {
			if k != "log-ignore" {
				return cfg, fmt.Errorf("[job-manager.perilog]: unknown key %q: %w", k, syscall.EINVAL)
			}
			var pats []string
			if err := json.Unmarshal(v, &pats); err != nil {
				return cfg, fmt.Errorf("[job-manager.perilog]: error parsing log-ignore: must be an array of strings: %w", syscall.EINVAL)
			}
			for _, pat := range pats {
				re, err := regexp.Compile(pat)
				if err != nil {
					return cfg, fmt.Errorf("[job-manager.perilog]: error parsing log-ignore: failed to compile regex: %s: %w", pat, syscall.EINVAL)
				}
				cfg.logIgnore = append(cfg.logIgnore, re)
			}
		}
	}
	return cfg, nil
}

// parsePerilogDesc reads one of the prolog and epilog tables.
func parsePerilogDesc(raw json.RawMessage, prolog bool, imp string) (*perilogDesc, error) {
	var t map[string]json.RawMessage
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("must be a table")
	}
	d := &perilogDesc{prolog: prolog, CancelOnException: prolog, KillTimeout: perilogKillTimeout}
	if prolog {
		d.Timeout = prologDefaultTimeout
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := t[k]
		var err error
		switch k {
		case "command":
			if err = json.Unmarshal(v, &d.Command); err != nil {
				return nil, fmt.Errorf("command must be an array of strings")
			}
			if len(d.Command) == 0 || d.Command[0] == "" {
				return nil, fmt.Errorf("command must not be empty")
			}
		case "per-rank":
			err = json.Unmarshal(v, &d.PerRank)
		case "cancel-on-exception":
			err = json.Unmarshal(v, &d.CancelOnException)
		case "timeout":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, fmt.Errorf("timeout must be a string (an FSD such as \"30m\"), not %s", v)
			}
			if d.Timeout, err = fsd.Parse(s); err != nil {
				return nil, fmt.Errorf("invalid %s timeout %q", d.name(), s)
			}
			if math.IsInf(d.Timeout, 1) {
				d.Timeout = 0
			}
		case "kill-timeout":
			if !prolog {
				return nil, fmt.Errorf("kill-timeout not allowed for epilog")
			}
			if err = json.Unmarshal(v, &d.KillTimeout); err == nil && d.KillTimeout <= 0 {
				return nil, fmt.Errorf("kill-timeout must be a number of seconds > 0, not %s", v)
			}
		default:
			return nil, fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: wrong type %s", k, v)
		}
	}
	if d.Command == nil {
		if imp == "" {
			return nil, fmt.Errorf("no command specified and exec.imp not defined")
		}
		d.Command = []string{imp, "run", d.name()}
	}
	return d, nil
}

// Query implements jobtap.Querier: the configuration and the prologs
// and epilogs in progress.
func (p *Perilog) Query() any {
	desc := func(d *perilogDesc) any {
		if d == nil {
			return map[string]any{}
		}
		return d
	}
	procs := map[string]any{}
	for id, r := range p.procs {
		state := "running"
		switch {
		case r.canceled:
			state = "canceled"
		case r.timedout:
			state = "timeout"
		}
		procs[id.String()] = map[string]any{
			"name": r.desc.name(), "state": state, "total": len(r.ranks),
			"active": len(r.active), "active_ranks": rankString(r.active),
		}
	}
	return map[string]any{
		"conf":  map[string]any{"prolog": desc(p.cfg.prolog), "epilog": desc(p.cfg.epilog)},
		"procs": procs,
	}
}

// Unload implements jobtap.Unloader: processes still running are
// killed, and their jobs get their finish event so they do not hang.
func (p *Perilog) Unload() {
	for _, r := range p.procs {
		r.stopTimers()
		for _, pr := range r.active {
			pr.Signal(syscall.SIGKILL)
		}
		p.h.PostEvent(r.id, r.desc.name()+"-finish", map[string]any{"description": "job-manager." + r.desc.name(), "status": 1 << 8})
	}
	p.procs = map[jobid.ID]*perilogRun{}
}

// perilogRun is a prolog or epilog running for one job.
type perilogRun struct {
	p      *Perilog
	desc   *perilogDesc
	id     jobid.ID
	userid uint32
	ranks  []uint
	active map[uint]jobtap.Proc
	failed map[uint]int // rank: wait status (or 1<<8 when it could not run)
	// canceled: stopped by a fatal exception; timedout: by its timeout
	canceled, timedout bool
	stopTimeout        func() bool
	stopKill           func() bool
	done               bool
	starting           bool // start is still starting the ranks
}

// JobState implements jobtap.StateHook: the prolog starts on entering
// RUN.
func (p *Perilog) JobState(j *jobtap.Job, _ jobtap.State) {
	if j.State != jobtap.StateRun || p.cfg.prolog == nil {
		return
	}
	if _, busy := p.procs[j.ID]; busy {
		return
	}
	p.h.PostEvent(j.ID, "prolog-start", map[string]any{"description": "job-manager.prolog"})
	p.start(p.cfg.prolog, j.ID, j.Userid)
}

// JobEvent implements jobtap.EventHook: the epilog starts at the finish
// event; a fatal exception cancels a prolog (and an epilog with
// cancel-on-exception).
func (p *Perilog) JobEvent(j *jobtap.Job, name string, ctx map[string]any) {
	switch name {
	case "finish":
		if p.cfg.epilog == nil {
			return
		}
		if _, busy := p.procs[j.ID]; busy {
			return
		}
		p.h.PostEvent(j.ID, "epilog-start", map[string]any{"description": "job-manager.epilog"})
		p.start(p.cfg.epilog, j.ID, j.Userid)
	case "exception":
		r, ok := p.procs[j.ID]
		if !ok || ctxSeverity(ctx) != 0 {
			return
		}
		if !r.desc.CancelOnException || r.canceled || len(r.active) == 0 {
			return
		}
		r.canceled = true
		r.kill()
	}
}

// ctxSeverity reads an exception's severity whatever its Go type.
func ctxSeverity(ctx map[string]any) int {
	switch v := ctx["severity"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case int64:
		return int(v)
	}
	return -1
}

// start runs d for job id on its ranks; an error starting the command
// on a rank counts as its failure there.
func (p *Perilog) start(d *perilogDesc, id jobid.ID, userid uint32) {
	r := &perilogRun{p: p, desc: d, id: id, userid: userid, active: map[uint]jobtap.Proc{}, failed: map[uint]int{}}
	r.ranks = []uint{0}
	if d.PerRank {
		ranks, err := jobRanks(p.h.R(id))
		if err != nil {
			p.h.Log().Error(fmt.Sprintf("%s: %s: failed to decode ranks from R: %v", id, d.name(), err))
		} else {
			r.ranks = ranks
		}
	}
	p.procs[id] = r
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	env["FLUX_JOB_ID"] = id.String()
	env["FLUX_JOB_USERID"] = strconv.FormatUint(uint64(userid), 10)
	// a rank that fails to start counts as done; the run ends when
	// every rank has, not before the others are started
	r.starting = true
	for _, rank := range r.ranks {
		rank := rank
		pr, err := p.h.Exec(rank, d.Command, env, jobtap.ExecEvents{
			Output: func(stream, line string) { r.output(rank, stream, line) },
			Done:   func(status int, err error) { r.exited(rank, status, err) },
		})
		if err != nil {
			r.exited(rank, 0, err)
			continue
		}
		r.active[rank] = pr
	}
	r.starting = false
	if len(r.active) == 0 {
		r.allExited()
		return
	}
	if d.Timeout > 0 && !r.done {
		r.stopTimeout = p.h.AfterFunc(time.Duration(d.Timeout*float64(time.Second)), func() {
			if r.done || len(r.active) == 0 {
				return
			}
			r.timedout = true
			r.kill()
		})
	}
}

// jobRanks lists the broker ranks of an R.
func jobRanks(R json.RawMessage) ([]uint, error) {
	if len(R) == 0 {
		return nil, fmt.Errorf("the job has no R")
	}
	r, err := rset.Parse(R)
	if err != nil {
		return nil, err
	}
	var out []uint
	for rank := range r.Ranks().All() {
		out = append(out, rank)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("R has no ranks")
	}
	return out, nil
}

// output logs a line of output (stderr at error level) unless a
// log-ignore pattern (or blankness) says not to.
func (r *perilogRun) output(rank uint, stream, line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	for _, re := range r.p.cfg.logIgnore {
		if re.MatchString(line) {
			return
		}
	}
	msg := fmt.Sprintf("%s: %s: %s (rank %d): %s: %s", r.id, r.desc.name(), r.p.h.Hostname(rank), rank, stream, line)
	if stream == "stderr" {
		r.p.h.Log().Error(msg)
	} else {
		r.p.h.Log().Info(msg)
	}
}

// kill sends SIGTERM to the ranks still running and drains those still
// running kill-timeout later.
func (r *perilogRun) kill() {
	for _, pr := range r.active {
		pr.Signal(syscall.SIGTERM)
	}
	if r.stopKill != nil {
		return
	}
	r.stopKill = r.p.h.AfterFunc(time.Duration(r.desc.KillTimeout*float64(time.Second)), func() {
		if r.done || len(r.active) == 0 {
			return
		}
		r.p.h.Log().Error(fmt.Sprintf("%s: timed out waiting for SIGTERM to terminate %s", r.id, r.desc.name()))
		ranks := make([]uint, 0, len(r.active))
		for rank, pr := range r.active {
			ranks = append(ranks, rank)
			pr.Signal(syscall.SIGKILL)
		}
		r.active = map[uint]jobtap.Proc{}
		r.drainThenFinish(ranks)
	})
}

// exited records the end of the process on rank.
func (r *perilogRun) exited(rank uint, status int, err error) {
	if r.done {
		return
	}
	if err != nil {
		r.p.h.Log().Error(fmt.Sprintf("%s: %s: %s (rank %d): %v", r.id, r.desc.name(), r.p.h.Hostname(rank), rank, err))
		// a shell's codes for a command it could not run
		switch {
		case errors.Is(err, syscall.ENOENT):
			status = 127 << 8
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			status = 126 << 8
		default:
			status = 1 << 8
		}
	}
	delete(r.active, rank)
	if status != 0 {
		r.failed[rank] = status
	}
	if len(r.active) > 0 || r.starting {
		return
	}
	r.allExited()
}

// allExited ends the run once no rank's process runs: the failed ranks
// are drained (per-rank), then the finish event.
func (r *perilogRun) allExited() {
	var drain []uint
	if r.desc.PerRank && !r.canceled {
		for rank := range r.failed {
			drain = append(drain, rank)
		}
	}
	r.drainThenFinish(drain)
}

// drainThenFinish drains ranks (if any) and then posts the finish
// event, so that the ranks are drained before the job's resources are
// freed.
func (r *perilogRun) drainThenFinish(ranks []uint) {
	if r.done {
		return
	}
	r.done = true
	r.stopTimers()
	if len(ranks) == 0 {
		r.finish()
		return
	}
	for _, rank := range ranks {
		if _, ok := r.failed[rank]; !ok {
			r.failed[rank] = int(syscall.SIGKILL)
		}
	}
	what := "failed"
	switch {
	case r.canceled:
		what = "canceled then timed out"
	case r.timedout:
		what = "timed out"
	}
	set := idset.New(ranks...)
	reason := fmt.Sprintf("%s %s for job %s", r.desc.name(), what, r.id)
	r.p.h.Drain(set.String(), reason, func(err error) {
		if err != nil {
			r.p.h.Log().Error(fmt.Sprintf("Failed to drain ranks with failed %s for %s: %v", r.desc.name(), r.id, err))
		}
		r.finish()
	})
}

func (r *perilogRun) stopTimers() {
	for _, stop := range []func() bool{r.stopTimeout, r.stopKill} {
		if stop != nil {
			stop()
		}
	}
}

// status is the run's overall wait status: the largest of its ranks'
// (as flux-core's: an exit code above 0 outranks a signal).
func (r *perilogRun) status() int {
	worst := 0
	for _, st := range r.failed {
		worst = max(worst, st)
	}
	if worst == 0 && (r.canceled || r.timedout) {
		worst = int(syscall.SIGTERM)
	}
	return worst
}

// failedRanks returns the hosts and ranks where the run failed.
func (r *perilogRun) failedRanks() (hosts, ranks string) {
	list := make([]uint, 0, len(r.failed))
	for rank := range r.failed {
		list = append(list, rank)
	}
	if len(list) == 0 {
		list = r.ranks
	}
	sort.Slice(list, func(a, b int) bool { return list[a] < list[b] })
	names := make([]string, 0, len(list))
	for _, rank := range list {
		names = append(names, r.p.h.Hostname(rank))
	}
	return strings.Join(names, ","), idset.New(list...).String()
}

// finish posts the finish event: for a prolog that failed, the fatal
// exception first (the job must not start), and the epilog (which may
// undo what the prolog did) before prolog-finish.
func (r *perilogRun) finish() {
	p := r.p
	delete(p.procs, r.id)
	status := r.status()
	name := r.desc.name()
	failed := status != 0 || r.canceled || r.timedout
	if r.desc.prolog && failed && !r.canceled {
		hosts, ranks := r.failedRanks()
		ws := syscall.WaitStatus(status)
		var note string
		switch {
		case r.timedout:
			note = fmt.Sprintf("prolog timed out on %s (rank %s)", hosts, ranks)
		case ws.Signaled() || ws.ExitStatus() > 128:
			sig := int(ws.Signal())
			if !ws.Signaled() {
				sig = ws.ExitStatus() - 128
			}
			note = fmt.Sprintf("prolog killed by signal %d on %s (rank %s)", sig, hosts, ranks)
		default:
			note = fmt.Sprintf("prolog exited with code=%d on %s (rank %s)", ws.ExitStatus(), hosts, ranks)
		}
		p.h.RaiseException(r.id, "prolog", 0, note)
	}
	if !r.desc.prolog && failed {
		p.h.Log().Error(fmt.Sprintf("%s: epilog failed with status %d", r.id, status))
	}
	epilog := r.desc.prolog && failed && p.cfg.epilog != nil
	if epilog {
		p.h.PostEvent(r.id, "epilog-start", map[string]any{"description": "job-manager.epilog"})
	}
	p.h.PostEvent(r.id, name+"-finish", map[string]any{"description": "job-manager." + name, "status": status})
	if epilog {
		p.start(p.cfg.epilog, r.id, r.userid)
	}
}

// rankString encodes the ranks of m as an idset.
func rankString(m map[uint]jobtap.Proc) string {
	ranks := make([]uint, 0, len(m))
	for rank := range m {
		ranks = append(ranks, rank)
	}
	return idset.New(ranks...).String()
}
