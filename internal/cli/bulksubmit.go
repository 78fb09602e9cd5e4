package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

func newBulksubmitCmd() *cobra.Command {
	o := &submitOptions{cmdName: "bulksubmit", proc: defaultProcessEnv()}
	var sep string
	cmd := &cobra.Command{
		Use:   "bulksubmit [OPTIONS...] COMMAND [ARGS...] [::: INPUTS...]",
		Short: "Submit many jobs: COMMAND once per input, like GNU parallel",
		Long: `Submit one job per input: COMMAND with each "{}" replaced by the input
(and "{0}", "{1}" ... by the fields of an input split on --sep). Inputs are
the words after ":::" (several ":::" groups combine as a cartesian
product; "::::" FILE reads lines of FILE), or the lines of standard input
when none are given. Jobs are submitted in one stream, as fast as the
instance accepts them, and their ids printed in input order.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBulksubmit(o, sep, args, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().SetInterspersed(false)
	addSubmitFlags(cmd.Flags(), o, submitFlagSets{perTask: true, bulk: true})
	cmd.Flags().StringVar(&sep, "sep", " ", "split each input into fields {0}, {1}... on `SEP`")
	return cmd
}

// bulkInputs splits args into the command template and its inputs.
func bulkInputs(args []string, stdin io.Reader) (tmpl []string, inputs [][]string, err error) {
	var groups [][]string
	i := 0
	for i < len(args) && args[i] != ":::" && args[i] != "::::" {
		i++
	}
	tmpl = args[:i]
	for i < len(args) {
		switch args[i] {
		case ":::":
			var g []string
			i++
			for i < len(args) && args[i] != ":::" && args[i] != "::::" {
				g = append(g, args[i])
				i++
			}
			groups = append(groups, g)
		case "::::":
			i++
			if i >= len(args) {
				return nil, nil, fmt.Errorf(":::: needs a file name")
			}
			lines, err := readLines(args[i])
			if err != nil {
				return nil, nil, err
			}
			groups = append(groups, lines)
			i++
		}
	}
	if len(tmpl) == 0 {
		return nil, nil, fmt.Errorf("job command is missing")
	}
	if len(groups) == 0 {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		var g []string
		for sc.Scan() {
			if line := sc.Text(); line != "" {
				g = append(g, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, nil, err
		}
		groups = append(groups, g)
	}
	inputs = [][]string{{}}
	for _, g := range groups {
		var next [][]string
		for _, prefix := range inputs {
			for _, v := range g {
				next = append(next, append(append([]string(nil), prefix...), v))
			}
		}
		inputs = next
	}
	return tmpl, inputs, nil
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// substituteBulk replaces {} and {N} in each template word.
func substituteBulk(tmpl []string, input []string, sep string) []string {
	all := strings.Join(input, " ")
	var fields []string
	for _, in := range input {
		fields = append(fields, strings.Split(in, sep)...)
	}
	out := make([]string, len(tmpl))
	for i, w := range tmpl {
		w = strings.ReplaceAll(w, "{}", all)
		for k := len(fields) - 1; k >= 0; k-- {
			w = strings.ReplaceAll(w, "{"+strconv.Itoa(k)+"}", fields[k])
		}
		out[i] = w
	}
	return out
}

func runBulksubmit(o *submitOptions, sep string, args []string, stdin io.Reader, out, errw io.Writer) error {
	tmpl, inputs, err := bulkInputs(args, stdin)
	if err != nil {
		return err
	}
	specs := make([]*jobspec.Jobspec, 0, len(inputs))
	for _, in := range inputs {
		js, err := o.buildOne(substituteBulk(tmpl, in, sep))
		if err != nil {
			return fmt.Errorf("input %q: %w", strings.Join(in, " "), err)
		}
		specs = append(specs, js)
	}
	if o.dryRun {
		for _, js := range specs {
			b, _ := json.Marshal(js)
			fmt.Fprintf(out, "%s\n", b)
		}
		return nil
	}
	urgency, err := urgencyValue(o.urgency)
	if err != nil {
		return err
	}
	flags, err := flagsValue(o.flags)
	if err != nil {
		return err
	}
	h, err := openHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := cmdContext()
	defer cancel()
	started := time.Now()
	var bar *progressBar
	if o.progress {
		bar = &progressBar{w: errw, total: len(specs), start: started}
	}
	var ids []jobid.ID
	failed := 0
	err = submitJobs(ctx, h, specs, urgency, flags, func(i int, r submitResult) {
		if r.err != nil {
			failed++
			fmt.Fprintf(errw, "flux-bulksubmit: %v\n", r.err)
			return
		}
		ids = append(ids, r.id)
		if !o.quiet {
			fmt.Fprintln(out, r.id.String())
		}
		if bar != nil {
			bar.update(len(ids), false)
		}
	})
	if bar != nil {
		bar.update(len(ids), true)
	}
	if o.jps {
		fmt.Fprintf(errw, "%.1f jps\n", float64(len(ids))/time.Since(started).Seconds())
	}
	if err != nil {
		return err
	}
	if o.wait || o.watch || o.waitEvent != "" {
		code, err := followJobs(ctx, h, o, ids, out)
		if err != nil {
			return err
		}
		if code != 0 {
			return exitCode(code)
		}
	}
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}

func newJobSubmitCmd() *cobra.Command {
	var urgencyStr string
	var flagList []string
	cmd := &cobra.Command{
		Use:   "submit [--urgency=N] [--flags=F] [JOBSPEC-FILE]",
		Short: "Submit a jobspec (JSON or YAML) from a file or standard input",
		Args:  cobra.MaximumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if len(args) == 0 || args[0] == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			js, err := jobspec.Parse(data)
			if err != nil {
				return err
			}
			urg, err := urgencyValue(urgencyStr)
			if err != nil {
				return err
			}
			flags, err := flagsValue(flagList)
			if err != nil {
				return err
			}
			h, err := openHandle()
			if err != nil {
				return err
			}
			defer h.Close()
			ctx, cancel := cmdContext()
			defer cancel()
			b, _ := json.Marshal(js)
			var resp struct {
				ID jobid.ID `json:"id"`
			}
			req := map[string]any{"J": sign.Wrap(b, uint32(os.Getuid())), "urgency": urg, "flags": flags}
			if err := h.Call(ctx, "job-ingest.submit", 0xffffffff, req, &resp); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.ID.String())
			return nil
		}),
	}
	cmd.Flags().StringVarP(&urgencyStr, "urgency", "u", "16", "job urgency 0-31")
	cmd.Flags().StringSliceVarP(&flagList, "flags", "f", nil, "submit flags: debug, waitable, novalidate")
	return cmd
}
