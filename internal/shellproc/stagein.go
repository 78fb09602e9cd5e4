package shellproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/filearchive"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// The stage-in shell option (flux-shell-options(7)) copies files kept by
// flux archive (archive.NAME in the primary KVS namespace) into the job's
// FLUX_JOB_TMPDIR, or another directory, before the tasks start:
//
//	stage-in                      archive "main"
//	stage-in.names=A,B            archives A and B (a list or a string)
//	stage-in.pattern=GLOB         only the files whose path matches GLOB
//	stage-in.destination=[local:|global:]DIR
//	                              DIR instead of FLUX_JOB_TMPDIR; global:
//	                              only on the job's first node
//	stage-in.tags=A,B             the old name of stage-in.names
//
// The files are extracted on a goroutine (they may be large) and the tasks
// started when it is done; a bad option or a failed extraction fails the
// shell's start, so the job gets an exception naming the problem.

// stageInSpec is the parsed stage-in option.
type stageInSpec struct {
	names   []string // archive names, in order, without duplicates
	pattern string   // "" for every file
	dir     string   // absolute destination directory
	global  bool     // dir is shared: only the first node extracts
}

// stageInKeys are the stage-in sub-options.
var stageInKeys = []string{"names", "tags", "pattern", "destination"}

// parseStageIn reads the stage-in option v (present is whether the job
// has one). tmpdir is the job's FLUX_JOB_TMPDIR and cwd its working
// directory, against which a relative destination is taken. A nil spec
// with a nil error means no stage-in. deprecated, if set, is told of the
// use of the old stage-in.tags.
func parseStageIn(v any, present bool, tmpdir, cwd string, deprecated func(string)) (*stageInSpec, error) {
	if !present {
		return nil, nil
	}
	var opts map[string]any
	switch v := v.(type) {
	case map[string]any:
		opts = v
	case bool: // -o stage-in=true, or false to turn it off
		if !v {
			return nil, nil
		}
	case float64, json.Number, int, int64: // -o stage-in is 1, 0 turns it off
		if n, _ := number(v); n == 0 {
			return nil, nil
		}
	default:
		return nil, fmt.Errorf("stage-in=%s: expected a switch or an object of %s", jsonText(v), strings.Join(stageInKeys, ", "))
	}
	for k := range opts {
		if !slices.Contains(stageInKeys, k) {
			return nil, fmt.Errorf("stage-in.%s: unknown option (stage-in takes %s)", k, strings.Join(stageInKeys, ", "))
		}
	}
	spec := &stageInSpec{dir: tmpdir}
	names, hasNames := opts["names"]
	if tags, ok := opts["tags"]; ok {
		if hasNames {
			return nil, fmt.Errorf("stage-in.tags and stage-in.names: give only names (tags is its old name)")
		}
		if deprecated != nil {
			deprecated("stage-in.tags is deprecated: use stage-in.names")
		}
		names, hasNames = tags, true
	}
	if hasNames {
		list, err := stageInNames(names)
		if err != nil {
			return nil, err
		}
		spec.names = list
	}
	if len(spec.names) == 0 {
		spec.names = []string{"main"}
	}
	if p, ok := opts["pattern"]; ok {
		s, isString := p.(string)
		if !isString || s == "" {
			return nil, fmt.Errorf("stage-in.pattern=%s: expected a non-empty glob pattern", jsonText(p))
		}
		spec.pattern = s
	}
	if d, ok := opts["destination"]; ok {
		s, isString := d.(string)
		if !isString {
			return nil, fmt.Errorf("stage-in.destination=%s: expected [local:|global:]DIR", jsonText(d))
		}
		dir, global, err := stageInDestination(s, cwd)
		if err != nil {
			return nil, err
		}
		spec.dir, spec.global = dir, global
	}
	return spec, nil
}

// stageInNames parses stage-in.names: a comma-separated string or a list
// of strings. Empty entries are skipped and repeats dropped.
func stageInNames(v any) ([]string, error) {
	var parts []string
	switch v := v.(type) {
	case string:
		parts = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("stage-in.names: %s is not an archive name", jsonText(e))
			}
			parts = append(parts, s)
		}
	default:
		return nil, fmt.Errorf("stage-in.names=%s: expected a comma-separated list of archive names", jsonText(v))
	}
	var names []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p != "" && !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	return names, nil
}

// stageInDestination parses [SCOPE:]PATH, SCOPE local (the default) or
// global. A relative PATH is taken from cwd.
func stageInDestination(s, cwd string) (dir string, global bool, err error) {
	dir = s
	if scope, rest, ok := strings.Cut(s, ":"); ok {
		switch scope {
		case "local":
		case "global":
			global = true
		default:
			return "", false, fmt.Errorf("stage-in.destination=%s: the scope %q is neither local nor global", s, scope)
		}
		dir = rest
	}
	if dir == "" {
		return "", false, fmt.Errorf("stage-in.destination=%s: the directory is missing", s)
	}
	if !filepath.IsAbs(dir) {
		if cwd == "" {
			return "", false, fmt.Errorf("stage-in.destination=%s: a relative directory needs the job's working directory, which it does not have", s)
		}
		dir = filepath.Join(cwd, dir)
	}
	return dir, global, nil
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// stageIn is a stage-in in progress on this node.
type stageIn struct {
	cancel context.CancelFunc
	signal syscall.Signal // the job was signaled while staging
}

// startStageIn extracts spec's archives on a goroutine, then launches
// the tasks (or fails the shell's start) back on the module's goroutine.
// It is not for a job of another user than the instance owner: flux
// archive's archives are the owner's, as in flux-core (a guest cannot
// read the primary KVS namespace).
func (j *job) startStageIn(spec *stageInSpec) error {
	if j.cred != nil || j.x.guest {
		return fmt.Errorf("stage-in: the job runs as userid %d, but flux archive's archives are for the instance owner's jobs: %w", j.userid, syscall.EPERM)
	}
	if spec.global && !j.leader() {
		return j.launch() // the first node extracts for all
	}
	x := j.x
	ctx, cancel := context.WithCancel(j.ctx)
	st := &stageIn{cancel: cancel}
	j.stage = st
	syncRoot := x.rank != 0
	go func() {
		t0 := time.Now()
		n, size, err := extractArchives(ctx, x.h, spec, syncRoot)
		cancel()
		x.h.Post(func() {
			j.stage = nil
			if st.signal != 0 {
				err = fmt.Errorf("stage-in: interrupted: the job was sent signal %d (%v)", int(st.signal), st.signal)
			}
			if err != nil {
				j.abandon()
				j.startFailed(err)
				return
			}
			x.log.Debug("stage-in done", "job", j.id.String(), "archives", strings.Join(spec.names, ","),
				"dir", spec.dir, "files", n, "bytes", size, "elapsed", time.Since(t0).String())
			if err := j.launch(); err != nil {
				j.abandon()
				j.startFailed(err)
			}
		})
	}()
	return nil
}

// interrupt stops a stage-in for a signal that ends a job (SIGTERM, as
// flux cancel and time limits send, SIGKILL, SIGINT, SIGHUP): its tasks
// will not start. Other signals (flux job kill -s SIGUSR1, the signal
// shell option's warning) have no task to go to yet and are dropped.
func (s *stageIn) interrupt(sig syscall.Signal) {
	switch sig {
	case syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT, syscall.SIGHUP:
	default:
		return
	}
	if s.signal == 0 {
		s.signal = sig
	}
	s.cancel()
}

// startFailed answers job-exec's start request with err, after the start
// handler returned: job-exec raises an exception on the job with it.
func (j *job) startFailed(err error) {
	j.x.forget(j)
	if j.req != nil {
		j.req.RespondError(fmt.Errorf("job %s: %w", j.id.String(), err))
	}
}

// extractArchives writes the files of spec's archives into spec.dir and
// returns how many it wrote and their bytes of data. With syncRoot it
// first waits for the local KVS to have caught up with rank 0's primary
// namespace, where an archive created just before the job was committed.
func extractArchives(ctx context.Context, h *flux.Handle, spec *stageInSpec, syncRoot bool) (int, int64, error) {
	if err := checkStageInDir(spec.dir); err != nil {
		return 0, 0, err
	}
	if syncRoot {
		var root kvs.RootInfo
		if err := h.Call(ctx, "kvs.getroot", 0, map[string]any{"namespace": kvs.PrimaryNamespace, "flags": 0}, &root); err != nil {
			return 0, 0, fmt.Errorf("stage-in: KVS version of rank 0: %w", err)
		}
		if err := kvs.WaitVersion(ctx, h, kvs.PrimaryNamespace, root.Rootseq); err != nil {
			return 0, 0, fmt.Errorf("stage-in: waiting for KVS version %d: %w", root.Rootseq, err)
		}
	}
	// every archive is read and checked before anything is written
	lists := make([][]map[string]any, len(spec.names))
	for i, name := range spec.names {
		key := "archive." + name
		b, err := kvs.GetRaw(ctx, h, kvs.PrimaryNamespace, key)
		if errors.Is(err, syscall.ENOENT) {
			return 0, 0, fmt.Errorf("stage-in: archive %q does not exist (no KVS key %s; see flux archive create)", name, key)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("stage-in: archive %q: KVS lookup %s: %w", name, key, err)
		}
		files, err := filearchive.Decode(b)
		if err != nil {
			return 0, 0, fmt.Errorf("stage-in: archive %q: %v", name, err)
		}
		if spec.pattern != "" {
			files = filearchive.Filter(files, spec.pattern)
		}
		lists[i] = files
	}
	var n int
	var size int64
	for i, files := range lists {
		x := filearchive.Extractor{Dir: spec.dir, Overwrite: true, Blobs: &content.Fetcher{Ctx: ctx, H: h}}
		if err := x.Extract(files); err != nil {
			return 0, 0, fmt.Errorf("stage-in: archive %q: %w", spec.names[i], err)
		}
		n += len(files)
		for _, f := range files {
			if s, ok := number(f["size"]); ok {
				size += int64(s)
			}
		}
	}
	return n, size, nil
}

// checkStageInDir fails unless dir is an existing directory.
func checkStageInDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = &os.PathError{Op: "stat", Path: dir, Err: syscall.ENOTDIR}
	}
	if err != nil {
		var en syscall.Errno
		if errors.As(err, &en) {
			return fmt.Errorf("stage-in: destination %s: %s", dir, en.Error())
		}
		return fmt.Errorf("stage-in: destination %s: %v", dir, err)
	}
	return nil
}
