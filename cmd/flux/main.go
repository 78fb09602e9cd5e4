// Command flux is the single fluxgo binary: the command-line tool, the
// broker (flux broker) and the job shell (flux shell).
//
// For developers: FLUXGO_CPUPROFILE=FILE writes a CPU profile of the
// command to FILE (go tool pprof reads it); %p in FILE stands for the
// process id.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/internal/cli"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "broker" {
		// Only the broker is ever heap-profiled (broker.profile); for a
		// short command the sampler's stack walks cost start-up time.
		runtime.MemProfileRate = 0
	}
	if path := os.Getenv("FLUXGO_CPUPROFILE"); path != "" {
		os.Exit(profiled(path))
	}
	args := os.Args[1:]
	if name, ok := strings.CutPrefix(filepath.Base(os.Args[0]), "flux-"); ok && name != "" {
		// flux-capacitor (a link to flux): flux capacitor, as seed
		// 004 spells it
		args = append([]string{name}, args...)
	}
	os.Exit(cli.Main(args, os.Stdin, os.Stdout, os.Stderr))
}

// profiled runs the command with the CPU profiler on.
func profiled(path string) int {
	// %p: the process id, for commands that start more of themselves
	// (the broker's job shells)
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err != nil {
		fmt.Fprintf(os.Stderr, "flux: FLUXGO_CPUPROFILE: %v\n", err)
		return 1
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "flux: FLUXGO_CPUPROFILE: %v\n", err)
		return 1
	}
	defer pprof.StopCPUProfile()
	return cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}
