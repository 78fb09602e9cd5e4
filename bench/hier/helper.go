package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// entry is one instance as the scripts describe it: registered when it
// starts (reg) and reported when its work is done (report).
type entry struct {
	Level string  `json:"level"` // parent, child, leaf, flat
	Name  string  `json:"name"`
	URI   string  `json:"uri"`
	PID   string  `json:"pid"` // its rank 0 broker
	T     float64 `json:"t"`   // when written (Unix seconds)
	// report only
	Jobs      int     `json:"jobs"`   // inactive jobs it holds (job-list)
	Failed    int     `json:"failed"` // ... of which did not complete
	HWMKB     int     `json:"hwm_kb"`
	RSSKB     int     `json:"rss_kb"`
	CPU       float64 `json:"cpu"`        // the broker's user+system seconds
	FeederCPU float64 `json:"feeder_cpu"` // the script's finished commands (capacitor, pool pull, batch ...)
}

// helper is "hier register LEVEL NAME" or "hier report LEVEL NAME",
// run by the scripts inside an instance ($FLUX_URI) with $HIER_DIR set:
// it appends the instance's entry to $HIER_DIR/reg or .../report.
func helper(what string, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("%s: want LEVEL NAME, got %q", what, args)
	}
	dir := os.Getenv("HIER_DIR")
	if dir == "" {
		return fmt.Errorf("%s: HIER_DIR is not set", what)
	}
	uri := os.Getenv("FLUX_URI")
	h, err := flux.Open(uri)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pid, err := h.Attr(ctx, "broker.pid")
	if err != nil {
		return err
	}
	e := entry{Level: args[0], Name: args[1], URI: uri, PID: pid}
	if what == "report" {
		if dir := os.Getenv("HIER_PROFILE"); dir != "" {
			// the live heap of the broker as its work ends (-profile)
			path := filepath.Join(dir, args[1]+".heap")
			if err := h.Call(ctx, "broker.profile", flux.NodeidAny, map[string]any{"name": "heap", "path": path}, nil); err != nil {
				return fmt.Errorf("heap profile: %w", err)
			}
		}
		var st jobStats
		if err := h.Call(ctx, "job-list.job-stats", flux.NodeidAny, map[string]any{}, &st); err != nil {
			return fmt.Errorf("job-list.job-stats: %w", err)
		}
		e.Jobs = st.States.Inactive + st.Purged
		e.Failed = st.Failed + st.Canceled + st.Timeout
		e.RSSKB, e.HWMKB = benchkit.ProcRSS(pid)
		e.CPU = benchkit.ProcCPU(false, pid).Seconds()
		// the script (our parent) has reaped the commands it ran
		e.FeederCPU = childCPU(strconv.Itoa(os.Getppid()))
	}
	e.T = float64(time.Now().UnixNano()) / 1e9
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	name := "reg"
	if what == "report" {
		name = "report"
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(b, '\n')) // one write: lines of concurrent writers do not mix
	return err
}

// jobStats is what job-list.job-stats says.
type jobStats struct {
	States struct {
		Inactive int `json:"inactive"`
		Total    int `json:"total"`
	} `json:"job_states"`
	Failed   int `json:"failed"`
	Canceled int `json:"canceled"`
	Timeout  int `json:"timeout"`
	Purged   int `json:"inactive_purged"`
}

// childCPU is the CPU seconds of pid's reaped children.
func childCPU(pid string) float64 {
	return (benchkit.ProcCPU(true, pid) - benchkit.ProcCPU(false, pid)).Seconds()
}

// readEntries reads a reg or report file (missing: none).
func readEntries(path string) []entry {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []entry
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		var e entry
		if len(line) > 0 && json.Unmarshal(line, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}
