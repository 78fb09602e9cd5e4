// Command storage measures the statedir a job leaves behind: N one-core
// test jobs (each with its own command line, so no two jobspecs are the
// same blob) through an instance with a statedir, then the statedir's
// bytes per job as the instance left it and after a restart that runs
// flux shutdown --gc. With -base, the same runs alternate with another
// flux binary and the ratios are printed.
//
//	go run ./bench/storage -flux bin/flux [-n 10000] [-runs 2] [-base OLD/flux]
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

type result struct {
	secs          float64
	before, after int64 // statedir bytes
}

func main() {
	bin := flag.String("flux", "bin/flux", "flux binary")
	base := flag.String("base", "", "another flux binary to alternate with (ratios printed)")
	n := flag.Int("n", 10000, "test jobs")
	runs := flag.Int("runs", 1, "runs of each binary")
	flag.Parse()
	if *n < 1 || *runs < 1 {
		fatal(fmt.Errorf("-n and -runs must be 1 or more"))
	}
	bins := []string{*bin}
	if *base != "" {
		bins = append([]string{*base}, *bin)
	}
	res := make(map[string][]result)
	for i := 0; i < *runs; i++ {
		for _, b := range bins {
			r, err := run(b, *n)
			if err != nil {
				fatal(fmt.Errorf("%s: %w", b, err))
			}
			res[b] = append(res[b], r)
			fmt.Printf("%s run %d: %d jobs in %.1f s; statedir %.1f MB (%d B/job), after flux shutdown --gc %.1f MB (%d B/job)\n",
				b, i+1, *n, r.secs, float64(r.before)/1e6, r.before/int64(*n), float64(r.after)/1e6, r.after/int64(*n))
		}
	}
	if *base != "" {
		for i := 0; i < *runs; i++ {
			o, c := res[*base][i], res[*bin][i]
			fmt.Printf("pair %d: bytes per job %s / %s: %.2f before gc, %.2f after\n", i+1, *bin, *base,
				float64(c.before)/float64(o.before), float64(c.after)/float64(o.after))
		}
	}
}

func run(bin string, n int) (result, error) {
	dir, err := os.MkdirTemp("", "bench-storage-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		return result{}, err
	}
	t0 := time.Now()
	jobs := fmt.Sprintf("flux submit --cc=1-%d --quiet --setattr=system.exec.test.run_duration=0.001 true {cc} >/dev/null && flux queue drain", n)
	if out, err := exec.Command(bin, "start", "-s1", "-Sstatedir="+state, "sh", "-c", jobs).CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("jobs: %v: %s", err, out)
	}
	r := result{secs: time.Since(t0).Seconds(), before: du(state)}
	if out, err := exec.Command(bin, "start", "-s1", "-Sstatedir="+state, "flux", "shutdown", "--gc", "--quiet").CombinedOutput(); err != nil {
		// the initial program is ended by the shutdown it asked for
		if _, ok := err.(*exec.ExitError); !ok {
			return result{}, fmt.Errorf("gc: %v: %s", err, out)
		}
	}
	r.after = du(state)
	return r, nil
}

// du returns the bytes of the files under dir.
func du(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "storage:", err)
	os.Exit(1)
}
