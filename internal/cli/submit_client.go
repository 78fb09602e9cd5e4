package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Submit flag bits (flux-core's FLUX_JOB_* values).
var submitFlagBits = map[string]int{"debug": 0x02, "waitable": 0x04, "novalidate": 0x08}

// urgencyValue parses an urgency: a number 0-31 or hold/default/expedite
// ("" is the default). Callers say where it came from.
func urgencyValue(s string) (int, error) {
	switch s {
	case "", "default":
		return 16, nil
	case "hold":
		return 0, nil
	case "expedite":
		return 31, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 31 {
		return 0, fmt.Errorf("invalid urgency %q (want 0-31, hold, default or expedite)", s)
	}
	return n, nil
}

func flagsValue(list []string) (int, error) {
	f := 0
	for _, item := range list {
		// --flags debug,waitable: a comma-separated list, given once or more
		for _, name := range strings.Split(item, ",") {
			bit, ok := submitFlagBits[name]
			if !ok {
				return 0, fmt.Errorf("--flags: unknown flag %q (want debug, waitable or novalidate)", name)
			}
			f |= bit
		}
	}
	return f, nil
}

// submitResult is one submission's outcome, in submission order.
type submitResult struct {
	id  jobid.ID
	err error
}

// submitJobs sends every jobspec to job-ingest with at most window
// requests in flight, calling done for each result in submission order.
func submitJobs(ctx context.Context, h *flux.Handle, specs []*jobspec.Jobspec, urgency, flags int, done func(i int, r submitResult)) error {
	uid := uint32(os.Getuid())
	const window = 1024
	futs := make([]*flux.Future, len(specs))
	next := 0
	send := func(i int) error {
		f, err := job.SubmitAsync(h, specs[i], uid, urgency, flags)
		if err != nil {
			return err
		}
		futs[i] = f
		return nil
	}
	for ; next < len(specs) && next < window; next++ {
		if err := send(next); err != nil {
			return err
		}
	}
	for i := range specs {
		var resp struct {
			ID jobid.ID `json:"id"`
		}
		err := futs[i].Decode(ctx, &resp)
		futs[i] = nil
		done(i, submitResult{id: resp.ID, err: err})
		if next < len(specs) {
			if err := send(next); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}

// progressBar prints "N/M jobs submitted (R jobs/s)" on one line.
type progressBar struct {
	w     io.Writer
	total int
	start time.Time
	last  time.Time
}

func (p *progressBar) update(n int, final bool) {
	now := time.Now()
	if !final && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	rate := float64(n) / now.Sub(p.start).Seconds()
	width := 30
	filled := width * n / max(p.total, 1)
	bar := make([]byte, width)
	for i := range bar {
		if i < filled {
			bar[i] = '#'
		} else {
			bar[i] = '.'
		}
	}
	fmt.Fprintf(p.w, "\r[%s] %d/%d jobs submitted %.1f jobs/s", bar, n, p.total, rate)
	if final {
		fmt.Fprintln(p.w)
	}
}
