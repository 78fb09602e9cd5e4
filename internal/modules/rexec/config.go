package rexec

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config tunes the subprocess server. The zero value is not valid; start
// from DefaultConfig.
type Config struct {
	// StdinBufsize is each process's stdin buffer in bytes: the credit a
	// client gets in its first add-credit response, and the most the
	// server queues for a process that is slow to read. A command may ask
	// for its own size with the stdin_BUFSIZE option. Default 65536.
	StdinBufsize int
	// KillGrace is how long unloading the module waits, after SIGKILLing
	// every process group, for the processes to be reaped and their
	// streams ended before it gives up on them. Default 2s.
	KillGrace time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{StdinBufsize: 64 * 1024, KillGrace: 2 * time.Second}
}

// maxStdinBufsize bounds what a command may ask for.
const maxStdinBufsize = 64 << 20

// Validate reports the first setting that is out of range.
func (c Config) Validate() error {
	if c.StdinBufsize < 1 || c.StdinBufsize > maxStdinBufsize {
		return fmt.Errorf("stdin-bufsize=%d: must be 1..%d: %w", c.StdinBufsize, maxStdinBufsize, syscall.EINVAL)
	}
	if c.KillGrace <= 0 {
		return fmt.Errorf("kill-grace=%v: must be positive: %w", c.KillGrace, syscall.EINVAL)
	}
	return nil
}

// parseArgs reads module arguments of the form key=value:
// stdin-bufsize=BYTES and kill-grace=DURATION.
func parseArgs(args []string) (Config, error) {
	c := DefaultConfig()
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return c, fmt.Errorf("module argument %q: want key=value: %w", a, syscall.EINVAL)
		}
		switch k {
		case "stdin-bufsize":
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, fmt.Errorf("stdin-bufsize=%q: not an integer: %w", v, syscall.EINVAL)
			}
			c.StdinBufsize = n
		case "kill-grace":
			d, err := time.ParseDuration(v)
			if err != nil {
				return c, fmt.Errorf("kill-grace=%q: not a duration: %w", v, syscall.EINVAL)
			}
			c.KillGrace = d
		default:
			return c, fmt.Errorf("unknown module argument %q (known: stdin-bufsize, kill-grace): %w", k, syscall.EINVAL)
		}
	}
	return c, c.Validate()
}
