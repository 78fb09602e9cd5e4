// Command restart measures a planned restart of an instance that holds
// running jobs: on flux start -s 4 with a statedir, it makes N inactive
// jobs (test executor), P pending (held) jobs and R running real jobs
// (sleep), stops the instance with flux shutdown (or, with -crash, kills
// every broker with SIGKILL; either way the running jobs' shells go on
// without a broker), starts it again from the statedir and
// prints how long until (1) the instance answers, (2) a new real job has
// run, and (3) every running job is reattached (reattach-finish in its
// exec eventlog), beside the time of a start of the same instance
// empty.
//
//	go run ./bench/restart [-flux bin/flux] [-inactive 65536] [-pending 1024] [-running 100] [-log FILE] [-crash]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	inactive := flag.Int("inactive", 65536, "inactive jobs in the instance")
	pending := flag.Int("pending", 1024, "pending (held) jobs")
	running := flag.Int("running", 100, "running real jobs (sleep) across the restart")
	logFile := flag.String("log", "", "write the restarted instance's log (flux dmesg) to this file")
	crash := flag.Bool("crash", false, "kill -9 every broker instead of flux shutdown")
	flag.Parse()
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	dir, err := os.MkdirTemp("", "bench-restart-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := []string{"--test-hosts=n[0-3]", "-Sstatedir=" + filepath.Join(dir, "state"),
		`-Sresource.config=[{"hosts":"n[0-3]","cores":"0-63"}]`, "-Sresource.noverify=1"}

	// the floor: the same instance, started empty
	t := time.Now()
	inst, err := benchkit.Start(abs, 4, "--test-hosts=n[0-3]", `-Sresource.config=[{"hosts":"n[0-3]","cores":"0-63"}]`, "-Sresource.noverify=1")
	if err != nil {
		fatal(err)
	}
	emptyUp := time.Since(t)
	emptyJob := runJob(abs, inst.URI)
	inst.Stop()

	inst, err = benchkit.Start(abs, 4, opts...)
	if err != nil {
		fatal(err)
	}
	step := time.Now()
	cli(abs, inst.URI, "submit", "--quiet", fmt.Sprintf("--cc=1-%d", *inactive), "--setattr=system.exec.test.run_duration=0", "true")
	cli(abs, inst.URI, "queue", "idle")
	fmt.Printf("setup: %d inactive jobs in %.1f s\n", *inactive, time.Since(step).Seconds())
	cli(abs, inst.URI, "submit", "--quiet", fmt.Sprintf("--cc=1-%d", *pending), "--urgency=hold", "true")
	ids := strings.Fields(cli(abs, inst.URI, "submit", fmt.Sprintf("--cc=1-%d", *running), "sleep", "600"))
	for _, id := range ids {
		cli(abs, inst.URI, "job", "wait-event", "-t", "60", id, "start")
	}
	t = time.Now()
	how := "flux shutdown (jobs keep running)"
	if *crash {
		how = "kill -9 of every broker         "
		var pids []int
		for r := 0; r < 4; r++ {
			pid, err := strconv.Atoi(strings.TrimSpace(cli(abs, inst.RankURI(r), "getattr", "broker.pid")))
			if err != nil {
				fatal(err)
			}
			pids = append(pids, pid)
		}
		t = time.Now()
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	} else {
		cli(abs, inst.URI, "shutdown", "--quiet")
	}
	inst.Wait()
	down := time.Since(t)

	t = time.Now()
	inst, err = benchkit.Start(abs, 4, opts...)
	if err != nil {
		fatal(err)
	}
	up := time.Since(t)
	// the first full listing, asked at once (job-list answers it when it
	// holds every job: it is complete or not at all)
	type listing struct {
		n  int
		at time.Duration
	}
	listed := make(chan listing, 1)
	go func() {
		out := cli(abs, inst.URI, "jobs", "-a", "-n", "-c", "0", "-o", "{id}")
		listed <- listing{strings.Count(out, "\n"), time.Since(t)}
	}()
	newJob := runJob(abs, inst.URI)
	ready := time.Since(t)
	h, err := flux.Open(inst.URI)
	if err != nil {
		fatal(err)
	}
	for _, s := range ids {
		id, err := jobid.Parse(s)
		if err != nil {
			fatal(err)
		}
		dir, _ := id.Encode(jobid.KVS)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			log, err := kvs.GetRaw(ctx, h, "", dir+".guest.exec.eventlog")
			cancel()
			if err == nil && strings.Contains(string(log), "reattach-finish") {
				break
			}
			if time.Since(t) > 2*time.Minute {
				fatal(fmt.Errorf("job %s not reattached 2 minutes after the restart", s))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	reattached := time.Since(t)
	// the job manager reads the inactive jobs while it serves; job-list
	// reads them too, for flux jobs -a
	var jmRead, listRead time.Duration
	for jmRead == 0 || listRead == 0 {
		log := cli(abs, inst.URI, "dmesg")
		if jmRead == 0 && strings.Contains(log, "more jobs from the KVS while serving") {
			jmRead = time.Since(t)
		}
		if listRead == 0 && strings.Contains(log, "restored inactive jobs from the KVS") {
			listRead = time.Since(t)
		}
		if time.Since(t) > 3*time.Minute {
			fatal(fmt.Errorf("the inactive jobs were not read 3 minutes after the restart"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	first := <-listed
	running1 := strings.Count(cli(abs, inst.URI, "jobs", "-n", "-f", "running", "-o", "{id}"), "\n")
	pending1 := strings.Count(cli(abs, inst.URI, "jobs", "-n", "-f", "pending", "-o", "{id}"), "\n")
	h.Close()
	if *logFile != "" {
		if err := os.WriteFile(*logFile, []byte(cli(abs, inst.URI, "dmesg")), 0o644); err != nil {
			fatal(err)
		}
	}

	fmt.Printf("restart of 4 brokers holding %d inactive, %d pending, %d running real jobs:\n", *inactive, *pending, *running)
	fmt.Printf("  %s            %6.2f s\n", how, down.Seconds())
	fmt.Printf("  flux start until the instance answers        %6.2f s   (empty instance: %.2f s)\n", up.Seconds(), emptyUp.Seconds())
	fmt.Printf("  ... until a new real job has run             %6.2f s   (that job alone: %.3f s; empty instance: %.3f s)\n", ready.Seconds(), newJob.Seconds(), emptyJob.Seconds())
	fmt.Printf("  ... until every running job is reattached    %6.2f s   (target < 3 s)\n", reattached.Seconds())
	fmt.Printf("  ... until a flux jobs -a asked at once has listed every job %6.2f s (%d jobs; target < 3 s)\n", first.at.Seconds(), first.n)
	fmt.Printf("  ... until the job manager has read every inactive job %6.2f s, job-list %.2f s (flux jobs -a waits for it)\n", jmRead.Seconds(), listRead.Seconds())
	fmt.Printf("  after: %d running, %d pending\n", running1, pending1)

	cli(abs, inst.URI, "cancel", "--all")
	cli(abs, inst.URI, "queue", "idle")
	inst.Stop()
}

// runJob runs a real job (flux run true) and returns how long it took.
func runJob(bin, uri string) time.Duration {
	t := time.Now()
	cli(bin, uri, "run", "true")
	return time.Since(t)
}

// cli runs a flux command against uri and returns its output.
func cli(bin, uri string, args ...string) string {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fatal(fmt.Errorf("flux %s: %v", strings.Join(args, " "), err))
	}
	return string(out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "restart:", err)
	os.Exit(1)
}
