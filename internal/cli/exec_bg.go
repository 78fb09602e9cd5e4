package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// This file holds flux exec's background, attach and option-checking
// paths (flux-exec(1)) and its end-of-run summary.

// check validates option combinations before anything is contacted.
func (o *execOptions) check(args []string) error {
	switch {
	case o.attach && len(args) == 0:
		return usageError{errors.New("--attach requires a pid or label argument")}
	case o.attach && len(args) > 1:
		return usageError{errors.New("--attach takes a single pid or label argument")}
	case o.attach && (o.bg || o.waitable):
		return usageError{errors.New("--attach cannot be used with --bg or --waitable")}
	case !o.attach && len(args) == 0:
		return usageError{errors.New("COMMAND is required")}
	case o.labelSet && o.label == "":
		return usageError{errors.New("--label: LABEL must not be empty")}
	case o.waitable && !o.bg:
		return usageError{errors.New("--waitable can only be used with --bg")}
	case o.stdinFlow != "" && o.stdinFlow != "on" && o.stdinFlow != "off":
		return usageError{errors.New("Set --stdin-flow to on or off")}
	case o.service == "":
		return usageError{errors.New("--service: NAME must not be empty")}
	}
	return nil
}

// maxSetopts bounds --setopt.
const maxSetopts = 64

// execSetopts parses --setopt NAME=VALUE items into command options.
func execSetopts(items []string) (map[string]string, error) {
	if len(items) > maxSetopts {
		return nil, fmt.Errorf("--setopt: at most %d options", maxSetopts)
	}
	opts := map[string]string{}
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("error handling '%s' option: want NAME=VALUE", it)
		}
		opts[k] = v
	}
	return opts, nil
}

// execImpPath returns exec.imp from the instance's configuration.
func execImpPath(ctx context.Context, h *flux.Handle) (string, error) {
	var conf struct {
		Exec struct {
			Imp string `json:"imp"`
		} `json:"exec"`
	}
	if err := h.Call(ctx, "config.get", flux.NodeidAny, nil, &conf); err != nil {
		return "", fmt.Errorf("fetching the configuration: %s", flux.ErrorText(err))
	}
	if conf.Exec.Imp == "" {
		return "", errors.New("exec.imp path not found in config")
	}
	return conf.Exec.Imp, nil
}

// runBackground starts cmd on every target in the background and
// prints "RANK: PID" for each, in rank order.
func runBackground(ctx context.Context, h *flux.Handle, cmd subprocess.Command, waitable bool, targets idset.Set, eio execIO) int {
	type result struct {
		rank uint
		pid  int
		err  error
	}
	var results []*result
	var wg sync.WaitGroup
	for r := range targets.All() {
		res := &result{rank: r}
		results = append(results, res)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.pid, res.err = subprocess.Background(ctx, h, uint32(r), cmd, waitable)
		}()
	}
	wg.Wait()
	code := 0
	for _, res := range results {
		if res.err != nil {
			fmt.Fprintf(eio.stderr, "flux-exec: Error: rank %d: %s: %s\n", res.rank, cmd.Args[0], flux.ErrorText(res.err))
			code = 1
			continue
		}
		fmt.Fprintf(eio.stdout, "%d: %d\n", res.rank, res.pid)
	}
	return code
}

// attachTarget reads --attach's argument: a pid when it is a positive
// number that fits a pid_t, otherwise a label.
func attachTarget(arg, service string) subprocess.Target {
	if n, err := strconv.ParseInt(arg, 10, 32); err == nil && n > 0 {
		return subprocess.Target{Service: service, Pid: int(n)}
	}
	return subprocess.Target{Service: service, Label: arg}
}

// runAttach attaches to a background process on every target and copies
// its output until it ends; the exit code is its own. SIGINT detaches
// (the process keeps running); SIGTERM is forwarded.
func runAttach(h *flux.Handle, o execOptions, arg string, targets idset.Set, eio execIO) int {
	t := attachTarget(arg, o.service)
	if t.Label == "" && targets.Count() > 1 {
		fmt.Fprintf(eio.stderr, "flux-exec: --attach by pid requires a single target rank (use --rank)\n")
		return 1
	}
	stdout := &syncWriter{w: eio.stdout}
	stderr := &syncWriter{w: eio.stderr}
	remotes := newExecRemotes(targets, stdout, stderr, o.labelIO)
	var wg sync.WaitGroup
	ctx := context.Background()
	for _, rm := range remotes {
		r := rm.rank
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := subprocess.Attach(ctx, h, uint32(r), t, rm.out, rm.err)
			if err != nil {
				rm.code = 1
				if errors.Is(err, syscall.ENOENT) {
					rm.code = exNotFound
				}
				fmt.Fprintf(stderr, "flux-exec: Error: rank %d: %s: %s\n", r, t, flux.ErrorText(err))
				return
			}
			rm.p = p
		}()
	}
	wg.Wait()
	allDone := waitRemotes(remotes, func(rm *execRemote, _ subprocess.Status, err error) {
		if err != nil {
			fmt.Fprintf(stderr, "flux-exec: Error: rank %d: %v\n", rm.rank, err)
		}
	})
	running := runningRemotes(remotes)
	for done := false; !done; {
		select {
		case <-allDone:
			done = true
		case sig := <-eio.sigs:
			s, _ := sig.(syscall.Signal)
			if s == syscall.SIGINT {
				fmt.Fprintf(stderr, "detached; use 'flux sproc kill %s' to signal it\n", arg)
				return 0
			}
			if s != 0 {
				signalAll(running, s)
			}
		}
	}
	return finishRemotes(remotes, o.quiet, eio.stderr)
}

// execRemote is one rank's process of flux exec (run or attached).
type execRemote struct {
	rank     uint
	p        *subprocess.Process // nil: it could not be started
	out, err *lineWriter
	code     int
	status   subprocess.Status
}

func newExecRemotes(targets idset.Set, stdout, stderr io.Writer, label bool) []*execRemote {
	var remotes []*execRemote
	for r := range targets.All() {
		remotes = append(remotes, &execRemote{rank: r, out: newLineWriter(stdout, r, label), err: newLineWriter(stderr, r, label)})
	}
	return remotes
}

func runningRemotes(remotes []*execRemote) []*subprocess.Process {
	var running []*subprocess.Process
	for _, rm := range remotes {
		if rm.p != nil {
			running = append(running, rm.p)
		}
	}
	return running
}

// waitRemotes waits for every started process in turn (flushing its
// output), records its code and status, tells ended about it, and closes
// the returned channel once all have ended.
func waitRemotes(remotes []*execRemote, ended func(rm *execRemote, st subprocess.Status, err error)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, rm := range remotes {
			if rm.p == nil {
				continue
			}
			st, err := rm.p.Wait(context.Background())
			rm.out.flush()
			rm.err.flush()
			if err != nil {
				rm.code = 1
			} else {
				rm.code, rm.status = st.Code(), st
			}
			ended(rm, st, err)
		}
	}()
	return done
}

// finishRemotes returns flux exec's exit code (the largest) after the
// end-of-run summary (unless quiet).
func finishRemotes(remotes []*execRemote, quiet bool, stderr io.Writer) int {
	code := 0
	var ended []exitRecord
	for _, rm := range remotes {
		code = max(code, rm.code)
		if rm.p != nil && rm.status.Code() > 0 {
			ended = append(ended, exitRecord{rank: rm.rank, status: rm.status})
		}
	}
	if !quiet {
		writeExitSets(stderr, ended)
	}
	return code
}

// exitRecord is a remote process that ended with a non-zero code.
type exitRecord struct {
	rank   uint
	status subprocess.Status
}

// writeExitSets prints flux-core's end-of-run summary: one line per
// distinct outcome with the ranks that had it, "[0-3]: Exit 2" or
// "1: Segmentation fault".
func writeExitSets(w io.Writer, ended []exitRecord) {
	sets := map[string]*idset.Set{}
	var keys []string
	for _, e := range ended {
		key := fmt.Sprintf("Exit %d", e.status.ExitStatus())
		if e.status.Signaled() {
			key = job.SignalText(int(e.status.Signal()))
		}
		if sets[key] == nil {
			sets[key] = &idset.Set{}
			keys = append(keys, key)
		}
		sets[key].Add(e.rank)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, _ := sets[keys[i]].First()
		b, _ := sets[keys[j]].First()
		return a < b
	})
	for _, k := range keys {
		fmt.Fprintf(w, "%s: %s\n", sets[k].Encode(true), k)
	}
}
