// Command pool compares the two ways seed 004 and seed 002 give work to
// child instances: N real jobs (/bin/true) split between C child
// instances (flux batch -N1 jobs of a C-broker instance), pulled from a
// pool of the parent (flux pool submit, then flux pool pull as each
// child's initial program) or pushed as a command file per child (flux
// capacitor --wait). Runs alternate; the time from the first child's
// submission until every child has ended is printed for each, and the
// pool/capacitor ratio of each pair.
//
//	go run ./bench/pool -flux bin/flux [-n 10000] [-children 2] [-runs 2] [-window 0]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	n := flag.Int("n", 10000, "jobs in all")
	children := flag.Int("children", 2, "child instances (one broker each)")
	runs := flag.Int("runs", 2, "alternating pairs")
	window := flag.Int("window", 0, "flux pool pull --window (0: its default)")
	flag.Parse()
	if *n < *children || *children < 1 || *runs < 1 || *window < 0 {
		fatal(fmt.Errorf("want -n >= -children >= 1, -runs >= 1, -window >= 0"))
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	dir, err := os.MkdirTemp("", "bench-pool-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := writeScripts(dir, *n, *children, *window); err != nil {
		fatal(err)
	}
	fmt.Printf("pool: %d /bin/true jobs through %d child instances of a %d-broker instance\n", *n, *children, *children)
	var ratios []float64
	for i := 1; i <= *runs; i++ {
		p, err := run(abs, *children, filepath.Join(dir, "pool.sh"))
		if err != nil {
			fatal(fmt.Errorf("pool run %d: %w", i, err))
		}
		c, err := run(abs, *children, filepath.Join(dir, "capacitor.sh"))
		if err != nil {
			fatal(fmt.Errorf("capacitor run %d: %w", i, err))
		}
		ratios = append(ratios, p/c)
		fmt.Printf("pair %d: flux pool %.2f s (%.0f jobs/s), flux capacitor %.2f s (%.0f jobs/s): pool/capacitor %.2f\n",
			i, p, float64(*n)/p, c, float64(*n)/c, p/c)
	}
	sort.Float64s(ratios)
	fmt.Printf("median pool/capacitor time: %.2f (target <= 1.20)\n", ratios[len(ratios)/2])
}

// writeScripts writes the two initial programs: each prints "secs T0 T1",
// when the first child was submitted and when the last one had ended.
func writeScripts(dir string, n, children, window int) error {
	per := make([]int, children)
	for i := range n {
		per[i%children]++
	}
	var capa strings.Builder
	capa.WriteString("set -e\nt0=$(date +%s.%N)\nids=\n")
	for i, k := range per {
		f := filepath.Join(dir, "part"+strconv.Itoa(i)+".cmds")
		if err := os.WriteFile(f, []byte(strings.Repeat("true\n", k)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&capa, "ids=\"$ids $(flux batch --flags=waitable -N1 --wrap flux capacitor --wait --quiet --command-file %s)\"\n", f)
	}
	capa.WriteString(waitAll)
	pullOpt := ""
	if window > 0 {
		pullOpt = " --window=" + strconv.Itoa(window)
	}
	var pool strings.Builder
	fmt.Fprintf(&pool, "set -e\nflux pool submit -p bench --cc=1-%d --quiet true\nflux pool close -p bench\nt0=$(date +%%s.%%N)\nids=\n", n)
	for range children {
		fmt.Fprintf(&pool, "ids=\"$ids $(flux batch --flags=waitable -N1 --wrap flux pool pull%s -p bench)\"\n", pullOpt)
	}
	pool.WriteString(waitAll)
	// every item must have been run and reported once
	fmt.Fprintf(&pool, "test \"$(flux pool list -p bench | grep -c ' done ')\" -eq %d || { echo 'not every pool item is done' >&2; exit 1; }\n", n)
	if err := os.WriteFile(filepath.Join(dir, "capacitor.sh"), []byte(capa.String()), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "pool.sh"), []byte(pool.String()), 0o755)
}

const waitAll = `for id in $ids; do flux job wait $id; done
echo secs $t0 $(date +%s.%N)
`

func run(bin string, size int, script string) (float64, error) {
	cmd := exec.Command(bin, "start", "-s", strconv.Itoa(size), "sh", script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "secs" {
			t0, err0 := strconv.ParseFloat(f[1], 64)
			t1, err1 := strconv.ParseFloat(f[2], 64)
			if err0 != nil || err1 != nil {
				break
			}
			return t1 - t0, nil
		}
	}
	return 0, fmt.Errorf("no time in the output: %s", out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "pool:", err)
	os.Exit(1)
}
