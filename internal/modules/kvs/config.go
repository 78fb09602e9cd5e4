package kvs

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// Defaults of Config.
const (
	DefaultCheckpointPeriod = time.Second
	DefaultCacheExpiry      = 10 * time.Second
	// DefaultMasterCacheExpiry is rank 0's default: a miss there is a
	// read from the local content cache or SQLite, not a round trip up
	// the tree, and its cache otherwise holds every job directory of the
	// last ten seconds (hundreds of MB under a burst of jobs).
	DefaultMasterCacheExpiry = 2 * time.Second
	DefaultMaxBatchOps       = 100000
)

// Config tunes the kvs module. Each field comes from a module argument
// NAME=VALUE, else from the broker attribute kvs.NAME, else its default.
type Config struct {
	// CheckpointPeriod (checkpoint-period) is how often rank 0 writes the
	// primary namespace's root to the content checkpoint when it changed
	// (default 1s; 0 disables periodic checkpoints, leaving the one at
	// unload and those of FLUX_KVS_SYNC commits).
	CheckpointPeriod time.Duration
	// CacheExpiry (cache-expiry) is how long an unused blob stays in a
	// broker's KVS cache (default 10s; 2s on rank 0).
	CacheExpiry time.Duration
	// TransactionMerge (transaction-merge) lets rank 0 apply every
	// queued transaction in one pass and publish one new root (default
	// 1; 0 applies one transaction per root).
	TransactionMerge bool
	// MaxBatchOps (max-batch-ops) bounds the operations one merged pass
	// applies, so a flood of commits still publishes roots regularly
	// (default 100000).
	MaxBatchOps int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		CheckpointPeriod: DefaultCheckpointPeriod,
		CacheExpiry:      DefaultCacheExpiry,
		TransactionMerge: true,
		MaxBatchOps:      DefaultMaxBatchOps,
	}
}

// Validate reports a setting that can't work.
func (c Config) Validate() error {
	if c.CheckpointPeriod < 0 {
		return fmt.Errorf("checkpoint-period %v is negative: %w", c.CheckpointPeriod, syscall.EINVAL)
	}
	if c.CacheExpiry <= 0 {
		return fmt.Errorf("cache-expiry %v must be positive: %w", c.CacheExpiry, syscall.EINVAL)
	}
	if c.MaxBatchOps <= 0 {
		return fmt.Errorf("max-batch-ops %d must be positive: %w", c.MaxBatchOps, syscall.EINVAL)
	}
	return nil
}

// attrNames are the settings also read from broker attributes kvs.NAME.
var attrNames = []string{"checkpoint-period", "cache-expiry", "transaction-merge", "max-batch-ops"}

func (c *Config) apply(name, value string) error {
	switch name {
	case "checkpoint-period", "cache-expiry":
		d, err := parseDuration(value)
		if err != nil {
			return fmt.Errorf("%s=%q: %v: %w", name, value, err, syscall.EINVAL)
		}
		if name == "checkpoint-period" {
			c.CheckpointPeriod = d
		} else {
			c.CacheExpiry = d
		}
	case "transaction-merge":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want 0 or 1: %w", name, value, syscall.EINVAL)
		}
		c.TransactionMerge = n != 0
	case "max-batch-ops":
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("%s=%q: not an integer: %w", name, value, syscall.EINVAL)
		}
		c.MaxBatchOps = n
	default:
		return fmt.Errorf("unknown kvs module option %q: %w", name, syscall.EINVAL)
	}
	return nil
}

// parseDuration reads a Flux Standard Duration (RFC 23: "0.5", "1.5s",
// "2m", "1d") or a Go duration ("1h30m").
func parseDuration(s string) (time.Duration, error) {
	if d, err := fsd.ParseDuration(s); err == nil {
		return d, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return 0, fmt.Errorf("not a duration (an FSD such as 30s or 2m)")
}

// parseConfig builds a Config from attributes (name without "kvs."
// prefix → value) and module arguments, arguments winning, for a broker
// of the given rank (rank 0 has its own default cache expiry).
func parseConfig(attrs map[string]string, args []string, rank uint32) (Config, error) {
	c := DefaultConfig()
	if rank == 0 {
		c.CacheExpiry = DefaultMasterCacheExpiry
	}
	for _, name := range attrNames {
		if v, ok := attrs[name]; ok {
			if err := c.apply(name, v); err != nil {
				return c, fmt.Errorf("attribute kvs.%w", err)
			}
		}
	}
	for _, arg := range args {
		name, value, ok := strings.Cut(arg, "=")
		if !ok {
			return c, fmt.Errorf("module argument %q is not NAME=VALUE: %w", arg, syscall.EINVAL)
		}
		if err := c.apply(name, value); err != nil {
			return c, err
		}
	}
	return c, c.Validate()
}
