// Command realloc measures RFC 51 growth of a nested instance: on one
// instance of nodes+1 brokers, a child started with `flux alloc --bg -N1`
// grows by N nodes (`flux resource grow --nodes=N`, which returns once the
// new brokers have joined and their resources are up), runs its first
// N+1-node job (`flux run -N(N+1) true`) and shrinks back (`flux resource
// shrink --nodes=N`). Alternating with those runs, the floor to compare
// with: a fresh `flux alloc -N(N+1) --bg` until `flux run -N(N+1) true`
// inside it has completed (an instance of that size started from nothing).
// It prints the median and max of each and the grow/fresh ratio; it
// asserts no time limit.
//
//	go run ./bench/realloc -flux bin/flux [-runs 10] [-nodes 3]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/bench/internal/benchkit"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	runs := flag.Int("runs", 10, "growth runs (and as many fresh allocations, alternating)")
	nodes := flag.Int("nodes", 3, "nodes each growth adds to the one-node child")
	flag.Parse()
	if *runs < 1 || *nodes < 1 {
		fatal(fmt.Errorf("want -runs >= 1, -nodes >= 1"))
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	// the child's brokers and job shells find the same binary first
	os.Setenv("PATH", filepath.Dir(abs)+string(os.PathListSeparator)+os.Getenv("PATH"))

	size := *nodes + 1
	inst, err := benchkit.Start(abs, size)
	if err != nil {
		fatal(err)
	}
	defer inst.Stop()
	b := &bench{bin: abs, parent: inst.URI, n: *nodes}

	// warm up: one of each, unmeasured, to page in the binary and
	// settle the parent's modules
	if _, err := b.grow(); err != nil {
		fatal(fmt.Errorf("warm-up: %w", err))
	}
	if _, err := b.fresh(); err != nil {
		fatal(fmt.Errorf("warm-up: %w", err))
	}

	var child, grow, growJob, again, shrink, fresh []time.Duration
	for i := 1; i <= *runs; i++ {
		g, err := b.grow()
		if err != nil {
			fatal(fmt.Errorf("run %d: %w", i, err))
		}
		child = append(child, g.child)
		grow = append(grow, g.grow)
		growJob = append(growJob, g.grow+g.job)
		again = append(again, g.again)
		shrink = append(shrink, g.shrink)
		f, err := b.fresh()
		if err != nil {
			fatal(fmt.Errorf("run %d: %w", i, err))
		}
		fresh = append(fresh, f)
	}

	fmt.Printf("realloc: 1 -> %d nodes in a %d-broker instance, %d runs each, alternating\n", size, size, *runs)
	line := func(name string, d []time.Duration) lat {
		s := summarize(d)
		fmt.Printf("%-46s median %7.1f ms  max %7.1f ms\n", name, ms(s.median), ms(s.max))
		return s
	}
	line("child: flux alloc --bg -N1 until ready", child)
	g := line(fmt.Sprintf("grow --nodes=%d (joined and up)", *nodes), grow)
	gj := line(fmt.Sprintf("grow + first %d-node job", size), growJob)
	line(fmt.Sprintf("  the next %d-node job (settled)", size), again)
	line(fmt.Sprintf("shrink --nodes=%d", *nodes), shrink)
	f := line(fmt.Sprintf("fresh: flux alloc -N%d --bg + first %d-node job", size, size), fresh)
	fmt.Printf("%-46s %7.2f          (grow alone %.2f)\n", "ratio grow+job / fresh (medians)", float64(gj.median)/float64(f.median), float64(g.median)/float64(f.median))
	fmt.Printf("target: 1 -> 4 nodes joined and usable in under 1 s\n")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/realloc:", err)
	os.Exit(1)
}

type lat struct{ median, max time.Duration }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func summarize(d []time.Duration) lat {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return lat{s[len(s)/2], s[len(s)-1]}
}

type bench struct {
	bin    string
	parent string // the enclosing instance's URI
	n      int    // nodes a growth adds
}

// flux runs the binary against the instance at uri and returns its
// trimmed output; an error carries the command line and its output.
func (b *bench) flux(uri string, args ...string) (string, error) {
	cmd := exec.Command(b.bin, args...)
	cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("flux %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// alloc starts `flux alloc --bg -N nodes` in the parent and returns the
// job's id and its instance's local URI.
func (b *bench) alloc(nodes int) (id, uri string, err error) {
	id, err = b.flux(b.parent, "alloc", "--bg", "-N"+strconv.Itoa(nodes))
	if err != nil {
		return "", "", err
	}
	uri, err = b.flux(b.parent, "uri", "--local", id)
	if err != nil {
		b.end(id)
		return "", "", err
	}
	return id, uri, nil
}

// end cancels job id in the parent and waits until it is inactive.
func (b *bench) end(id string) error {
	if _, err := b.flux(b.parent, "cancel", id); err != nil {
		return err
	}
	_, err := b.flux(b.parent, "job", "wait-event", id, "clean")
	return err
}

type growRun struct{ child, grow, job, again, shrink time.Duration }

// grow starts a one-node child (timed until it is ready), runs steps in
// it and ends it.
func (b *bench) grow() (growRun, error) {
	var r growRun
	t := time.Now()
	id, uri, err := b.alloc(1)
	if err != nil {
		return r, err
	}
	r.child = time.Since(t)
	if err := b.steps(uri, &r); err != nil {
		b.end(id)
		return r, err
	}
	return r, b.end(id)
}

// steps times, inside the child at uri, the growth by n nodes, the first
// job on all of them after it, a second one (what such a job costs once
// the nodes are settled) and the shrink back.
func (b *bench) steps(uri string, r *growRun) error {
	all := "-N" + strconv.Itoa(b.n+1)
	t := time.Now()
	if _, err := b.flux(uri, "resource", "grow", "--nodes="+strconv.Itoa(b.n)); err != nil {
		return err
	}
	r.grow = time.Since(t)
	t = time.Now()
	if _, err := b.flux(uri, "run", all, "true"); err != nil {
		return err
	}
	r.job = time.Since(t)
	t = time.Now()
	if _, err := b.flux(uri, "run", all, "true"); err != nil {
		return err
	}
	r.again = time.Since(t)
	t = time.Now()
	if _, err := b.flux(uri, "resource", "shrink", "--nodes="+strconv.Itoa(b.n)); err != nil {
		return err
	}
	r.shrink = time.Since(t)
	return nil
}

// fresh times a new (n+1)-node allocation until its first job on every
// node has completed.
func (b *bench) fresh() (time.Duration, error) {
	t := time.Now()
	id, uri, err := b.alloc(b.n + 1)
	if err != nil {
		return 0, err
	}
	if _, err := b.flux(uri, "run", "-N"+strconv.Itoa(b.n+1), "true"); err != nil {
		b.end(id)
		return 0, err
	}
	d := time.Since(t)
	return d, b.end(id)
}
