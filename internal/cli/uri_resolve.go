package cli

// Finding the URI of a Flux instance that runs as a job. Rank 0 of a
// nested instance posts its URI to its job as a memo, {"uri":
// "ssh://HOST/PATH"}; the memo ends up in the job's eventlog and in
// job-list's annotations.user.uri. fluxgo clients connect to local://
// sockets only, so an ssh:// URI is used through its path when that
// socket is on this host.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Errors of URI resolution.
var (
	errNotInstance = errors.New("job is not a Flux instance")
	errNotRunning  = errors.New("job is not running")
	errRemoteURI   = errors.New("instance is on another host (fluxgo connects to local:// URIs only)")
)

// localURI turns a URI published by an instance into one this host can
// connect to.
func localURI(uri string) (string, error) {
	switch {
	case strings.HasPrefix(uri, "local://"):
		return uri, nil
	case strings.HasPrefix(uri, "ssh://"):
		rest := strings.TrimPrefix(uri, "ssh://")
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "", fmt.Errorf("URI %q has no path", uri)
		}
		path := rest[i:]
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s: %w", uri, errRemoteURI)
		}
		return "local://" + path, nil
	case strings.HasPrefix(uri, "/"):
		return "local://" + uri, nil
	}
	return "", fmt.Errorf("URI %q: unsupported scheme (want local:// or ssh://)", uri)
}

// isInstanceJobspec reports whether a jobspec runs a Flux instance
// (its command is flux broker or flux start).
func isInstanceJobspec(raw string) bool {
	js, err := jobspec.Parse([]byte(raw))
	if err != nil || len(js.Tasks) == 0 {
		return false
	}
	cmd := js.Tasks[0].Command
	return len(cmd) >= 2 && filepath.Base(cmd[0]) == "flux" && (cmd[1] == "broker" || cmd[1] == "start")
}

// memoURI returns the uri of a memo event, if it has one.
func memoURI(ev eventlog.Event) string {
	if ev.Name != "memo" {
		return ""
	}
	var c struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(ev.Context, &c)
	return c.URI
}

// jobURI returns the local URI of the instance job id runs, waiting for
// the instance to publish it if the job is still starting.
func jobURI(ctx context.Context, h *flux.Handle, id jobid.ID) (string, error) {
	vals, err := job.Lookup(ctx, h, id, []string{"jobspec", "eventlog"}, 0)
	if err != nil {
		return "", err
	}
	var spec, log string
	json.Unmarshal(vals["jobspec"], &spec)
	json.Unmarshal(vals["eventlog"], &log)
	if !isInstanceJobspec(spec) {
		return "", errNotInstance
	}
	evs, err := eventlog.Parse([]byte(log))
	if err != nil {
		return "", fmt.Errorf("job %s eventlog: %w", id.String(), err)
	}
	uri := ""
	for _, ev := range evs {
		if u := memoURI(ev); u != "" {
			uri = u
		}
		if ev.Name == "finish" || ev.Name == "clean" {
			return "", errNotRunning
		}
	}
	if uri == "" {
		ended := false
		err := watchEventlog(ctx, h, id, func(ev eventlog.Event) bool {
			if u := memoURI(ev); u != "" {
				uri = u
				return true
			}
			if ev.Name == "finish" || ev.Name == "clean" {
				ended = true
				return true
			}
			return false
		})
		if err != nil {
			return "", err
		}
		if ended || uri == "" {
			return "", errNotRunning
		}
	}
	return localURI(uri)
}

// resolveTarget turns a flux proxy target into a local URI: a URI, a
// socket path, or a job id path ("ID", "jobid:ID", "ID/ID..." or
// "jobid:ID/ID"), each id a job of the instance the previous one names,
// starting from $FLUX_URI.
func resolveTarget(ctx context.Context, target string) (string, error) {
	if strings.Contains(target, "://") {
		return localURI(target)
	}
	if strings.HasPrefix(target, "/") {
		if _, err := os.Stat(target); err == nil {
			return localURI(target)
		}
	}
	path := strings.TrimPrefix(target, "jobid:")
	var ids []jobid.ID
	for _, s := range strings.Split(strings.Trim(path, "/"), "/") {
		id, err := jobid.Parse(s)
		if err != nil {
			return "", fmt.Errorf("%q is neither a URI nor a job id: %w", target, err)
		}
		ids = append(ids, id)
	}
	uri, err := enclosingURI()
	if err != nil {
		return "", fmt.Errorf("a job id is resolved inside a Flux instance: %w", err)
	}
	for _, id := range ids {
		h, err := flux.Open(uri)
		if err != nil {
			return "", err
		}
		next, err := jobURI(ctx, h, id)
		h.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", id.String(), err)
		}
		uri = next
	}
	return uri, nil
}
