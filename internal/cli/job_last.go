package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux job last [N|SLICE]: print the most recently submitted job IDs of
// the current user, newest first.

func newJobLastCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "last [N|SLICE]",
		Short: "Print the most recently submitted jobid for the current user",
		Long: `Print the most recently submitted jobid of the current user. With N, print
the N most recent ones, newest first. A Python-style slice [start:stop:step]
selects from the job history, index 0 being the most recent job.`,
		Args: cobra.MaximumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				arg := ""
				if len(args) > 0 {
					arg = args[0]
				}
				return jobLast(ctx, h, arg, cmd.OutOrStdout())
			})
		}),
	}
}

// pySlice is a parsed [start:stop:step].
type pySlice struct {
	start, stop, step *int
}

func parseSliceArg(arg string) (pySlice, error) {
	var s pySlice
	inner := strings.TrimSuffix(strings.TrimPrefix(arg, "["), "]")
	parts := strings.Split(inner, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return s, fmt.Errorf("invalid slice %q", arg)
	}
	ptrs := []**int{&s.start, &s.stop, &s.step}
	for i, p := range parts {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return s, fmt.Errorf("invalid slice %q", arg)
		}
		*ptrs[i] = &n
	}
	if s.step != nil && *s.step == 0 {
		return s, fmt.Errorf("invalid slice %q: step cannot be zero", arg)
	}
	return s, nil
}

// apply returns the indices Python's list slicing selects.
func (s pySlice) apply(n int) []int {
	step := 1
	if s.step != nil {
		step = *s.step
	}
	norm := func(p *int, def int, lo, hi int) int {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
		}
		if v < lo {
			v = lo
		}
		if v > hi {
			v = hi
		}
		return v
	}
	var out []int
	if step > 0 {
		start, stop := norm(s.start, 0, 0, n), norm(s.stop, n, 0, n)
		for i := start; i < stop; i += step {
			out = append(out, i)
		}
	} else {
		start, stop := norm(s.start, n-1, -1, n-1), norm(s.stop, -1, -1, n-1)
		if s.stop != nil && *s.stop < 0 && *s.stop+n < 0 {
			stop = -1
		}
		for i := start; i > stop; i += step {
			out = append(out, i)
		}
	}
	return out
}

// jobHistory returns the current user's job IDs, newest first, from the
// job manager's history (or, without it, from job-list).
func jobHistory(ctx context.Context, h *flux.Handle, max int) ([]jobid.ID, error) {
	var resp struct {
		Jobs []jobid.ID `json:"jobs"`
	}
	err := h.Call(ctx, "job-manager.history.get", flux.NodeidAny, map[string]any{"max": max}, &resp)
	if err == nil {
		return resp.Jobs, nil
	}
	if !errors.Is(err, syscall.ENOSYS) {
		return nil, err
	}
	jobs, err := job.List(ctx, h, job.ListRequest{Attrs: []string{}, Constraint: map[string]any{"userid": []int{os.Getuid()}}})
	if err != nil {
		return nil, err
	}
	ids := make([]jobid.ID, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	sortJobIDs(ids)
	if max > 0 && len(ids) > max {
		ids = ids[:max]
	}
	return ids, nil
}

func jobLast(ctx context.Context, h *flux.Handle, arg string, out io.Writer) error {
	n, max := 1, 1
	var slice *pySlice
	switch {
	case arg == "":
	case strings.HasPrefix(arg, "["):
		s, err := parseSliceArg(arg)
		if err != nil {
			return err
		}
		slice, max = &s, 0
	default:
		v, err := strconv.Atoi(arg)
		if err != nil || v <= 0 {
			return fmt.Errorf("invalid argument %q: expected a positive count or [start:stop:step]", arg)
		}
		n, max = v, v
	}
	ids, err := jobHistory(ctx, h, max)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("job history is empty")
	}
	var sel []int
	if slice != nil {
		sel = slice.apply(len(ids))
	} else {
		for i := 0; i < n && i < len(ids); i++ {
			sel = append(sel, i)
		}
	}
	var b strings.Builder
	for _, i := range sel {
		b.WriteString(ids[i].String() + "\n")
	}
	_, err = io.WriteString(out, b.String())
	return err
}
