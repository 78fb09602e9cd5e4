package cli

// flux capacitor: a stream of jobs, each with its own options, one per
// line of input ("-n 1 tar -cf a.tgz ./a", "-N 4 my_mpi_app" ...), as
// the flux-capacitor of the Flux papers did. Jobs are submitted while
// the input is still being read, so a pipe that stays open keeps feeding
// the instance (an initial program of a nested instance can be
// "something | flux capacitor"), with a bounded number of submissions in
// flight. flux bulksubmit is the tool for many jobs that share options.
//
// mini: flux-core's old "flux mini submit|run|batch|alloc|bulksubmit",
// still in scripts (seed 001's example), runs the commands of today.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

type capacitorOptions struct {
	file   string
	quiet  bool
	wait   bool
	dryRun bool
	window int
	active int // at most this many submitted jobs unfinished (0: no bound)
}

func newCapacitorCmd() *cobra.Command {
	var o capacitorOptions
	cmd := &cobra.Command{
		Use:   "capacitor [--command-file FILE] [--wait] [--quiet] [--dry-run]",
		Short: "Submit a stream of jobs, one per input line, each with its own options",
		Long: `Read job lines from standard input (or --command-file FILE) and submit
each as its own job: a line is the options of flux submit followed by the
command and its arguments, split into words as a shell would ("#" starts
a comment; blank lines are skipped), e.g.

  -n 1 tar -cf dir.A.tgz ./dirA
  -n 32 make -j 32
  -N 4 --time-limit=1h my_mpi_app

Jobs are submitted as lines arrive (a pipe left open keeps them coming),
at most --window at a time in flight, and their IDs printed in input
order. A line that is not a valid job is reported with its number and
skipped; the exit code is then 1. With --wait, wait for every job to end
and exit with the largest exit code. With --active=N at most N of the
jobs submitted are unfinished at a time (the capacitor's constant output
stream: the instance never holds more of them, however long the input);
the next is submitted as one ends. Jobs that share their options are
better submitted with flux bulksubmit.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if o.file != "" && o.file != "-" {
				f, err := os.Open(o.file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			if o.window < 1 {
				return fmt.Errorf("--window=%d: must be at least 1", o.window)
			}
			if o.active < 0 {
				return fmt.Errorf("--active=%d: must be at least 1 (or 0: no bound)", o.active)
			}
			return runCapacitor(o, in, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "command-file", "f", "", "Read job lines from `FILE` (- for standard input, the default)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "Do not print the IDs of the jobs submitted")
	f.BoolVar(&o.wait, "wait", false, "Wait for all jobs to complete; exit with the largest exit code")
	f.BoolVar(&o.dryRun, "dry-run", false, "Print each line's jobspec instead of submitting it")
	f.IntVar(&o.window, "window", 1024, "Keep at most `N` submissions in flight")
	f.IntVar(&o.active, "active", 0, "Keep at most `N` of the jobs submitted unfinished (0: no bound)")
	// the flux-capacitor of old spelled it --command_file
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	// seed 004 writes --command_file: flux-capacitor's 2018 spelling
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	return cmd
}

// capacitorJob is one input line made into a job (or why it could not be).
type capacitorJob struct {
	line int
	*capacitorLine
	fut *flux.Future
}

// capacitorLine is what one line's text makes: identical lines (a
// stream of many of the same job) share one, parsed and encoded once.
type capacitorLine struct {
	spec           *jobspec.Jobspec
	urgency, flags int
	err            error
	payload        []byte // the job-ingest.submit request, made when first sent
}

// capacitorCache bounds how many distinct lines' jobs are remembered;
// past it the cache starts again.
const capacitorCache = 256

// parseCapacitorLine makes a job of the words of one line, with the
// options flux submit takes for a single job.
func parseCapacitorLine(words []string) (*jobspec.Jobspec, int, int, error) {
	o := &submitOptions{cmdName: "capacitor", proc: defaultProcessEnv()}
	fs := pflag.NewFlagSet("capacitor", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(io.Discard)
	addSubmitFlags(fs, o, submitFlagSets{perTask: true})
	if err := fs.Parse(words); err != nil {
		return nil, 0, 0, err
	}
	if o.dryRun {
		return nil, 0, 0, errors.New("--dry-run applies to the whole stream: give it to flux capacitor")
	}
	specs, err := buildJobspecs(o, fs.Args())
	if err != nil {
		return nil, 0, 0, err
	}
	urgency, err := urgencyValue(o.urgency)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("--urgency: %w", err)
	}
	flags, err := flagsValue(o.flags)
	if err != nil {
		return nil, 0, 0, err
	}
	return specs[0], urgency, flags, nil
}

// readCapacitorLines sends the jobs of in's lines to out, then closes it.
func readCapacitorLines(in io.Reader, out chan<- *capacitorJob) {
	defer close(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	seen := map[string]*capacitorLine{}
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if l := seen[text]; l != nil {
			out <- &capacitorJob{line: n, capacitorLine: l}
			continue
		}
		words, err := splitDirective(text)
		if err == nil && len(words) == 0 {
			continue // blank or a comment
		}
		l := &capacitorLine{err: err}
		if err == nil {
			l.spec, l.urgency, l.flags, l.err = parseCapacitorLine(words)
		}
		if len(seen) == capacitorCache {
			clear(seen)
		}
		seen[text] = l
		out <- &capacitorJob{line: n, capacitorLine: l}
	}
	if err := sc.Err(); err != nil {
		out <- &capacitorJob{line: n + 1, capacitorLine: &capacitorLine{err: fmt.Errorf("reading input: %w", err)}}
	}
}

// submitPayload is the job-ingest.submit request of l's job.
func (l *capacitorLine) submitPayload(uid uint32) ([]byte, error) {
	if l.payload != nil {
		return l.payload, nil
	}
	b, err := json.Marshal(l.spec)
	if err != nil {
		return nil, fmt.Errorf("jobspec: %w", err)
	}
	req := struct {
		J       string `json:"J"`
		Urgency int    `json:"urgency"`
		Flags   int    `json:"flags"`
	}{sign.Wrap(b, uid), l.urgency, l.flags}
	if l.payload, err = json.Marshal(req); err != nil {
		return nil, err
	}
	return l.payload, nil
}

func runCapacitor(o capacitorOptions, in io.Reader, out, errw io.Writer) error {
	jobs := make(chan *capacitorJob, o.window)
	go readCapacitorLines(in, jobs)
	failed := false
	report := func(j *capacitorJob, err error) {
		failed = true
		fmt.Fprintf(errw, "flux-capacitor: line %d: %v\n", j.line, err)
	}
	if o.dryRun {
		for j := range jobs {
			if j.err != nil {
				report(j, j.err)
				continue
			}
			b, err := j.spec.MarshalJSON()
			if err != nil {
				report(j, err)
				continue
			}
			fmt.Fprintf(out, "%s\n", b)
		}
		if failed {
			return exitCode(1)
		}
		return nil
	}
	if err := noInstance(os.Environ()); err != nil {
		return err
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		uid := uint32(os.Getuid())
		// --wait: how the jobs end, from the job manager's journal (one
		// stream for them all), or for a user not the instance owner
		// from each job's eventlog once all are submitted
		var waiter *capacitorWaiter
		if o.wait || o.active > 0 {
			pj, err := startPullJournal(ctx, h)
			switch {
			case errors.Is(err, errJournalRefused):
			case err != nil:
				return err
			default:
				defer pj.close()
				waiter = newCapacitorWaiter(pj, errw)
			}
			if waiter == nil && o.active > 0 {
				return fmt.Errorf("--active: follows the jobs on the job manager's journal, which is the instance owner's")
			}
		}
		var pending []*capacitorJob // submitted, in input order
		var ids []jobid.ID          // to wait for, without the journal
		finish := func(j *capacitorJob) {
			var resp struct {
				ID jobid.ID `json:"id"`
			}
			err := j.fut.Decode(ctx, &resp)
			if waiter != nil {
				waiter.submitted(resp.ID, err)
			}
			if err != nil {
				report(j, err)
				return
			}
			if o.wait && waiter == nil {
				ids = append(ids, resp.ID)
			}
			if !o.quiet {
				fmt.Fprintln(out, resp.ID.String())
			}
		}
		send := func(j *capacitorJob) error {
			if j.err != nil {
				report(j, j.err)
				return nil
			}
			payload, err := j.submitPayload(uid)
			if err != nil {
				report(j, err)
				return nil
			}
			if waiter != nil {
				waiter.pj.submit()
			}
			if j.fut, err = h.RPC("job-ingest.submit", flux.NodeidAny, json.RawMessage(payload), 0); err != nil {
				return err
			}
			pending = append(pending, j)
			return nil
		}
		for open := true; open || len(pending) > 0; {
			if open && o.active > 0 && len(pending)+waiter.unfinished() >= o.active {
				// as many unfinished as --active: collect an answer, or
				// wait for a job to end
				if len(pending) > 0 {
					finish(pending[0])
					pending[0] = nil
					pending = pending[1:]
				} else if err := waiter.waitBelow(o.active); err != nil {
					return err
				}
				continue
			}
			var j *capacitorJob
			switch {
			case !open:
			case len(pending) == 0:
				j, open = <-jobs // nothing in flight: wait for input
			case len(pending) < o.window:
				select {
				case j, open = <-jobs:
				default: // no input ready: collect an answer meanwhile
				}
			}
			if j != nil {
				if err := send(j); err != nil {
					return err
				}
				continue
			}
			if len(pending) > 0 {
				finish(pending[0])
				pending[0] = nil
				pending = pending[1:]
			}
		}
		code := 0
		switch {
		case waiter != nil && o.wait:
			var err error
			if code, err = waiter.wait(); err != nil {
				return err
			}
		case o.wait && len(ids) > 0:
			var err error
			if code, err = followJobs(ctx, h, &submitOptions{cmdName: "capacitor", wait: true}, ids, out); err != nil {
				return err
			}
		}
		if code != 0 {
			return exitCode(code)
		}
		if failed {
			return exitCode(1)
		}
		return nil
	})
}

// newMiniCmd is flux-core's deprecated "flux mini": its subcommands are
// today's flux submit, run, batch, alloc and bulksubmit.
func newMiniCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mini",
		Short: "Deprecated: flux mini submit|run|batch|alloc|bulksubmit are flux submit|run|batch|alloc|bulksubmit",
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			fmt.Fprintf(cmd.ErrOrStderr(), "flux-mini: warning: 'flux mini %s' is deprecated: use 'flux %s'\n", cmd.Name(), cmd.Name())
		},
	}
	for _, sub := range []func() *cobra.Command{newSubmitCmd, newRunCmd, newBatchCmd, newAllocCmd, newBulksubmitCmd} {
		cmd.AddCommand(sub())
	}
	return cmd
}
