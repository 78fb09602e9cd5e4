package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
	"github.com/fluxgo/fluxgo/pkg/taskmap"
)

// flux job taskmap and flux job timeleft.

type jobTaskmapOptions struct {
	taskids, ntasks, nodeid, hostname int
	to                                string
}

func newJobTaskmapCmd() *cobra.Command {
	o := jobTaskmapOptions{taskids: -1, ntasks: -1, nodeid: -1, hostname: -1}
	cmd := &cobra.Command{
		Use:   "taskmap [OPTIONS] ID|TASKMAP",
		Short: "Print or query a job's task map (RFC 34)",
		Long: `Print the task map of job ID (from the shell.start event of its exec
eventlog, waiting for it), or of a TASKMAP given in RFC 34 JSON, raw or
PMI form, or answer one question about it:

  --taskids=NODEID   the tasks that ran on node NODEID (an idset)
  --ntasks=NODEID    how many tasks ran on node NODEID
  --nodeid=TASKID    the node that ran task TASKID
  --hostname=TASKID  the host that ran task TASKID (a job ID only)
  --to=raw|pmi|multiline|hosts
                     the map in another form (multiline: the node of
                     each task, one per line; hosts: each node's host
                     and tasks, a job ID only)

At most one of these may be given.`,
		Args: cobra.ExactArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return jobTaskmap(cmd, args[0], o)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&o.taskids, "taskids", -1, "Print the idset of tasks on node `NODEID`")
	f.IntVar(&o.ntasks, "ntasks", -1, "Print the number of tasks on node `NODEID`")
	f.IntVar(&o.nodeid, "nodeid", -1, "Print the node ID that ran task `TASKID`")
	f.IntVar(&o.hostname, "hostname", -1, "Print the host that ran task `TASKID`")
	f.StringVar(&o.to, "to", "", "Convert the task map to `FORMAT` (raw, pmi, multiline or hosts)")
	return cmd
}

func jobTaskmap(cmd *cobra.Command, arg string, o jobTaskmapOptions) error {
	asked := 0
	for _, set := range []bool{o.taskids >= 0, o.ntasks >= 0, o.nodeid >= 0, o.hostname >= 0, o.to != ""} {
		if set {
			asked++
		}
	}
	if asked > 1 {
		return fmt.Errorf("only one of --taskids, --ntasks, --nodeid, --hostname and --to may be given")
	}
	switch o.to {
	case "", "raw", "pmi", "multiline", "hosts":
	default:
		return fmt.Errorf("--to=%s: invalid value (want raw, pmi, multiline or hosts)", o.to)
	}
	for name, v := range map[string]int{"taskids": o.taskids, "ntasks": o.ntasks, "nodeid": o.nodeid, "hostname": o.hostname} {
		if v < -1 || cmd.Flags().Changed(name) && v < 0 {
			return fmt.Errorf("--%s=%d: must not be negative", name, v)
		}
	}
	id, err := jobid.Parse(arg)
	if err != nil {
		m, perr := parseTaskmapArg(arg)
		if perr != nil {
			return fmt.Errorf("%q is neither a job ID nor a task map: %v", arg, perr)
		}
		if o.hostname >= 0 || o.to == "hosts" {
			return fmt.Errorf("host names are not known without a jobid, from a task map alone")
		}
		return printTaskmap(cmd.OutOrStdout(), m, o, nil)
	}
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		m, err := jobTaskmapOf(ctx, h, id)
		if err != nil {
			return err
		}
		var hosts func(node int) (string, error)
		if o.hostname >= 0 || o.to == "hosts" {
			hosts = func(node int) (string, error) { return jobNodeHost(ctx, h, id, node) }
		}
		return printTaskmap(cmd.OutOrStdout(), m, o, hosts)
	})
}

// parseTaskmapArg reads a task map in RFC 34 JSON, raw or PMI form.
func parseTaskmapArg(s string) (*taskmap.Map, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "["), strings.HasPrefix(s, "{"):
		return taskmap.Decode([]byte(s))
	case strings.HasPrefix(s, "("):
		return taskmap.DecodePMI(s)
	}
	return taskmap.DecodeRaw(s)
}

// jobTaskmapOf waits for the shell.start event of job id's exec eventlog
// and returns the task map it carries.
func jobTaskmapOf(ctx context.Context, h *flux.Handle, id jobid.ID) (*taskmap.Map, error) {
	var m *taskmap.Map
	var bad error
	err := watchEventlogPath(ctx, h, id, "guest.exec.eventlog", func(ev eventlog.Event) bool {
		if ev.Name != "shell.start" {
			return false
		}
		var c struct {
			Taskmap json.RawMessage `json:"taskmap"`
		}
		if err := json.Unmarshal(ev.Context, &c); err != nil || len(c.Taskmap) == 0 {
			bad = fmt.Errorf("job %s: shell.start has no taskmap", id.String())
			return true
		}
		m, bad = taskmap.Decode(c.Taskmap)
		return true
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("job %s: %s", id.String(), flux.ErrorText(err))
	case bad != nil:
		return nil, bad
	case m == nil:
		return nil, fmt.Errorf("job %s ended before its shells started: it has no task map", id.String())
	}
	return m, nil
}

// jobNodeHost returns the host of node index node of job id (its R's
// nodes in rank order).
func jobNodeHost(ctx context.Context, h *flux.Handle, id jobid.ID, node int) (string, error) {
	R, err := jobR(ctx, h, id)
	if err != nil {
		return "", err
	}
	hosts := R.Nodelist().Hosts()
	if node >= len(hosts) {
		return "", fmt.Errorf("job %s has no hostname for node %d", id.String(), node)
	}
	return hosts[node], nil
}

// jobR looks up job id's R.
func jobR(ctx context.Context, h *flux.Handle, id jobid.ID) (*rset.R, error) {
	var resp struct {
		R string `json:"R"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"R"}, "flags": 0}, &resp); err != nil {
		return nil, fmt.Errorf("job %s R: %s", id.String(), flux.ErrorText(err))
	}
	R, err := rset.Parse([]byte(resp.R))
	if err != nil {
		return nil, fmt.Errorf("job %s R: %w", id.String(), err)
	}
	return R, nil
}

func printTaskmap(out io.Writer, m *taskmap.Map, o jobTaskmapOptions, host func(node int) (string, error)) error {
	switch {
	case o.taskids >= 0:
		s, err := m.TasksOnNodeIDSet(o.taskids)
		if err != nil {
			return fmt.Errorf("no taskids for node %d: %w", o.taskids, err)
		}
		fmt.Fprintln(out, s)
	case o.ntasks >= 0:
		n, err := m.NTasksOnNode(o.ntasks)
		if err != nil {
			return fmt.Errorf("no task count for node %d: %w", o.ntasks, err)
		}
		fmt.Fprintln(out, n)
	case o.nodeid >= 0, o.hostname >= 0:
		task := max(o.nodeid, o.hostname)
		node, err := m.NodeOfTask(task)
		if err != nil {
			return fmt.Errorf("no nodeid for task %d: %w", task, err)
		}
		if o.nodeid >= 0 {
			fmt.Fprintln(out, node)
			return nil
		}
		name, err := host(node)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, name)
	case o.to == "raw":
		fmt.Fprintln(out, m.EncodeRaw())
	case o.to == "pmi":
		fmt.Fprintln(out, m.EncodePMI())
	case o.to == "hosts":
		for node := 0; node < m.NNodes(); node++ {
			name, err := host(node)
			if err != nil {
				return err
			}
			tasks, err := m.TasksOnNodeIDSet(node)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: %s\n", name, tasks)
		}
	case o.to == "multiline":
		for t := 0; t < m.NTasks(); t++ {
			node, err := m.NodeOfTask(t)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, node)
		}
	default:
		fmt.Fprintln(out, m.EncodeArray()) // the map's blocks, as flux-core prints it
	}
	return nil
}

// noTimeLimit is what flux job timeleft prints for a job without a time
// limit (UINT_MAX, as flux-core).
const noTimeLimit = math.MaxUint32

func newJobTimeleftCmd() *cobra.Command {
	var human bool
	cmd := &cobra.Command{
		Use:   "timeleft [-H] [ID]",
		Short: "Print the whole seconds left in a job's time limit",
		Long: `Print the whole seconds left before job ID, or the job this command
runs in (FLUX_JOB_ID, or the instance's own allocation when run inside
a nested instance), reaches its time limit: 0 once it has expired or
ended, 4294967295 without a limit. A pending job is an error.`,
		Args: cobra.MaximumNArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				left, err := jobTimeleft(ctx, h, args)
				if err != nil {
					return err
				}
				switch {
				case !human:
					fmt.Fprintln(cmd.OutOrStdout(), uint64(left))
				case left == noTimeLimit:
					fmt.Fprintln(cmd.OutOrStdout(), "infinity")
				default:
					fmt.Fprintln(cmd.OutOrStdout(), fsd.Format(left))
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVarP(&human, "human", "H", false, "Print the time left as a Flux Standard Duration")
	return cmd
}

// jobTimeleft returns the whole seconds left, or noTimeLimit.
func jobTimeleft(ctx context.Context, h *flux.Handle, args []string) (float64, error) {
	arg := ""
	if len(args) > 0 {
		arg = args[0]
	} else if env := os.Getenv("FLUX_JOB_ID"); env != "" {
		arg = env
	}
	if arg == "" {
		// the instance's own time left: its resources' expiration (the
		// allocation a nested instance runs in; none for a root one)
		var raw json.RawMessage
		if err := kvs.GetJSON(ctx, h, "", "resource.R", &raw); err != nil {
			return 0, fmt.Errorf("this instance's resource.R: %s", flux.ErrorText(err))
		}
		R, err := rset.Parse(raw)
		if err != nil {
			return 0, fmt.Errorf("this instance's resource.R: %w", err)
		}
		return secondsLeft(R.Expiration()), nil
	}
	id, err := parseJobIDArg(arg)
	if err != nil {
		return 0, err
	}
	j, err := job.ListID(ctx, h, id, []string{"state", "expiration", "userid"}, 0)
	if err != nil {
		return 0, fmt.Errorf("job %s: %s", id.String(), flux.ErrorText(err))
	}
	if j.State&job.StatePending != 0 {
		return 0, fmt.Errorf("job %s has not started", id.String())
	}
	// a job's time left is its owner's to read, as its R is (job-info
	// refuses anyone else; job-list's fields are public), ended or not
	if j.State&job.StateRunning != 0 || j.Userid != uint32(os.Getuid()) {
		if _, err := jobR(ctx, h, id); err != nil {
			return 0, err
		}
	}
	if j.State&job.StateRunning == 0 {
		return 0, nil
	}
	return secondsLeft(j.Expiration), nil
}

// secondsLeft returns the whole seconds before expiration (0: none).
func secondsLeft(expiration float64) float64 {
	if expiration <= 0 {
		return noTimeLimit
	}
	left := math.Floor(expiration - float64(time.Now().UnixNano())/1e9)
	if left < 0 {
		return 0
	}
	return left
}
