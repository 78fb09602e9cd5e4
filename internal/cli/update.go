package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// updateAliases maps flux update's short keys that are not simply
// attributes.system.KEY to their jobspec keys.
var updateAliases = map[string]string{
	"name": "attributes.system.job.name",
}

// updateDurationKey is the key whose values are [+-]FSD.
const updateDurationKey = "attributes.system.duration"

// updateKey returns the jobspec key a command-line key names: an alias,
// a key under one of RFC 14's top-level sections as given, and anything
// else under attributes.system.
func updateKey(k string) string {
	if full, ok := updateAliases[k]; ok {
		return full
	}
	for _, top := range []string{"attributes.", "resources.", "tasks."} {
		if strings.HasPrefix(k, top) {
			return k
		}
	}
	return "attributes.system." + k
}

type updateOptions struct {
	dryRun, verbose, wait bool
}

func newUpdateCmd() *cobra.Command {
	var o updateOptions
	cmd := &cobra.Command{
		Use:   "update [OPTIONS] JOBID KEY=VALUE [KEY=VALUE...]",
		Short: "Update attributes of a pending or running job",
		Long: `Change attributes of an active job after submission. KEY is a jobspec key
(attributes.system.duration, ...); a key that does not start with
attributes., resources. or tasks. is taken to be under attributes.system
(duration, queue, ...), and name is short for attributes.system.job.name.
VALUE is read as JSON when it is JSON, as a string otherwise.

duration takes an FSD (inf: unlimited), or +FSD / -FSD to adjust the
current value. Users may change their own pending jobs within configured
limits; the instance owner may change anything, after which the job's
owner may no longer change it. Of a running job, only the name and (by the
instance owner) the duration can change: the new time limit counts from
the job's start. Either all the updates apply or none does.

Exit status: 0 when all updates were applied, 1 when one was refused or
the job is unknown or inactive, 2 on a command-line error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				fmt.Fprintln(cmd.ErrOrStderr(), "flux-update: a JOBID and at least one KEY=VALUE are required")
				return exitCode(2)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUpdate(o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "flux-update: %v\n", err)
		return exitCode(2)
	})
	f := cmd.Flags()
	f.BoolVarP(&o.dryRun, "dry-run", "n", false, "Print the updates as JSON instead of sending them")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "Report each updated key and its new value on success")
	// The job manager answers an update only once its events are in the
	// job's eventlog, so there is nothing more to wait for.
	f.BoolVar(&o.wait, "wait", false, "Exit only once the updates are in the job's eventlog")
	return cmd
}

func runUpdate(o updateOptions, args []string, stdout, stderr io.Writer) error {
	id, err := jobid.Parse(args[0])
	if err != nil {
		return fmt.Errorf("invalid jobid %q", args[0])
	}
	var u jobUpdates
	for _, kv := range args[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(stderr, "flux-update: %q: want KEY=VALUE\n", kv)
			return exitCode(2)
		}
		if err := u.add(updateKey(k), v); err != nil {
			return err
		}
	}
	if o.dryRun && !u.relative() {
		fmt.Fprintln(stdout, u.JSON())
		return nil
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		if err := u.resolve(ctx, h, id); err != nil {
			return err
		}
		if o.dryRun {
			fmt.Fprintln(stdout, u.JSON())
			return nil
		}
		if err := h.Call(ctx, "job-manager.update", flux.NodeidAny, map[string]any{"id": id, "updates": u.payload()}, nil); err != nil {
			return err
		}
		if o.verbose {
			for _, e := range u.list {
				fmt.Fprintf(stderr, "flux-update: INFO: updated %s to %s\n", e.key, e.val.Str())
			}
		}
		return nil
	})
}

// jobUpdates is the updates of one flux update, in command-line order (a
// key given again keeps its place and takes the last value).
type jobUpdates struct {
	list []jobUpdate
}

type jobUpdate struct {
	key  string
	val  pyValue // as shown by --dry-run and --verbose
	wire any     // as sent to the job manager
	// relative marks a duration adjustment (+/- seconds) still to be
	// applied to the job's current duration; arg is how it was given.
	relative bool
	adjust   float64
	arg      string
}

func (u *jobUpdates) add(key, value string) error {
	e := jobUpdate{key: key}
	switch {
	case key == updateDurationKey:
		if err := e.setDuration(value); err != nil {
			return err
		}
	default:
		if v, ok := parsePyJSON(value); ok {
			e.val, e.wire = v, json.RawMessage(value)
		} else {
			e.val, e.wire = pyStrValue(value), value
		}
	}
	for i := range u.list {
		if u.list[i].key == key {
			u.list[i] = e
			return nil
		}
	}
	u.list = append(u.list, e)
	return nil
}

// setDuration reads [+-]FSD. An infinite duration is stored as 0, which
// jobspec uses for "unlimited".
func (e *jobUpdate) setDuration(value string) error {
	sign := 0.0
	text := value
	switch {
	case strings.HasPrefix(text, "+"):
		sign, text = 1, text[1:]
	case strings.HasPrefix(text, "-"):
		sign, text = -1, text[1:]
	}
	d, err := fsd.Parse(text)
	if err != nil {
		return fmt.Errorf("%s=%s: %w", e.key, value, err)
	}
	if sign != 0 {
		e.relative, e.adjust, e.arg = true, sign*d, value
		return nil
	}
	e.setSeconds(d)
	return nil
}

func (e *jobUpdate) setSeconds(d float64) {
	if math.IsInf(d, 1) {
		d = 0
	}
	e.val, e.wire, e.relative = pyFloatValue(d), d, false
}

// relative reports whether an update needs the job's current duration.
func (u *jobUpdates) relative() bool {
	for _, e := range u.list {
		if e.relative {
			return true
		}
	}
	return false
}

// resolve applies duration adjustments to the job's current duration.
func (u *jobUpdates) resolve(ctx context.Context, h *flux.Handle, id jobid.ID) error {
	if !u.relative() {
		return nil
	}
	cur, err := currentDuration(ctx, h, id)
	if err != nil {
		return err
	}
	for i := range u.list {
		e := &u.list[i]
		if !e.relative {
			continue
		}
		if cur == 0 {
			return fmt.Errorf("%s=%s: job %s has no time limit to adjust (its duration is unlimited): give a duration instead", e.key, e.arg, id.String())
		}
		nd := cur + e.adjust
		if nd <= 0 {
			return fmt.Errorf("%s=%s: the current duration of job %s (%s) less %s is not positive", e.key, e.arg, id.String(), fsd.Format(cur), e.arg[1:])
		}
		e.setSeconds(nd)
	}
	return nil
}

// JSON returns the updates as flux-core's --dry-run prints them.
func (u *jobUpdates) JSON() string {
	d := pyValue{kind: pyDict}
	for _, e := range u.list {
		d.set(e.key, e.val)
	}
	return d.JSON()
}

// payload returns the updates object of a job-manager.update request.
func (u *jobUpdates) payload() map[string]any {
	m := make(map[string]any, len(u.list))
	for _, e := range u.list {
		m[e.key] = e.wire
	}
	return m
}

// currentDuration reads a job's duration from its jobspec (job-info).
func currentDuration(ctx context.Context, h *flux.Handle, id jobid.ID) (float64, error) {
	var resp struct {
		Jobspec string `json:"jobspec"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"jobspec"}, "flags": fluxjob.LookupCurrent}, &resp); err != nil {
		return 0, fmt.Errorf("reading jobspec of %s: %w", id.String(), err)
	}
	js, err := jobspec.Parse([]byte(resp.Jobspec))
	if err != nil {
		return 0, err
	}
	return js.Duration()
}
