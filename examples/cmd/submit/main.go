// Command submit is an example of fluxgo's public Go API used from a
// module of its own: it submits a command as a job to the instance of
// $FLUX_URI, prints the job's events as they happen, then its output,
// and exits with the job's exit code.
//
//	go run ./cmd/submit hostname
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

func main() {
	code, err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "submit:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(ctx context.Context, command []string, out io.Writer) (int, error) {
	if len(command) == 0 {
		return 0, errors.New("usage: submit COMMAND [ARGS...]")
	}
	h, err := flux.Open("") // $FLUX_URI
	if err != nil {
		return 0, err
	}
	defer h.Close()
	spec, err := jobspec.FromCommand(command, jobspec.CommandOptions{NTasks: 1})
	if err != nil {
		return 0, err
	}
	id, err := job.Submit(ctx, h, spec)
	if err != nil {
		return 0, err
	}
	fmt.Fprintln(out, "job", id)
	// the main eventlog, until the job is inactive
	w, err := job.WatchEventlog(h, id, "eventlog", 0)
	if err != nil {
		return 0, err
	}
	var result job.JobResult
	for done := false; !done; {
		ev, err := w.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("eventlog: %w", err)
		}
		fmt.Fprintln(out, "event", ev.Name)
		done = result.Accumulate(ev)
	}
	w.Close(ctx)
	// the output eventlog (RFC 24): data events of each stream
	ow, err := job.WatchEventlog(h, id, "guest.output", 0)
	if err != nil {
		return 0, err
	}
	for {
		ev, err := ow.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("output: %w", err)
		}
		if ev.Name != "data" {
			continue
		}
		o, err := job.DecodeOutput(ev.Context)
		if err != nil {
			return 0, err
		}
		data, err := o.Bytes() // base64 when the output was not UTF-8
		if err != nil {
			return 0, err
		}
		if len(data) > 0 { // the stream's end has none
			fmt.Fprintf(out, "%s: %s", o.Stream, data)
		}
	}
	return result.ExitCode(1), nil
}
