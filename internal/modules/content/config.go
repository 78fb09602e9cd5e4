package content

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// Defaults of Config.
const (
	// DefaultCacheSize bounds the bytes of clean blobs a broker caches.
	// The KVS keeps the objects it uses in its own cache, so the content
	// cache mostly serves the faults of the ranks below (a job's blobs
	// read by its shells, a few KiB each): 8 MiB holds that working set
	// without growing with the number of jobs. (On rank 0 under a job
	// workload nearly every load is a KVS fault of a job directory last
	// used long ago, which no cache of reasonable size would hold.)
	DefaultCacheSize = 8 << 20
	// DefaultBlobSizeLimit is flux-core's limit (RFC 10 says 1 MiB but
	// allows it raised while large KVS directories exist).
	DefaultBlobSizeLimit = 1 << 30
	// DefaultFlushBatchLimit bounds rank 0's stores in flight to the
	// backing store.
	DefaultFlushBatchLimit = 256
	// DefaultDirtyLimit bounds the blobs rank 0 holds that are not yet
	// in the backing store before it makes writers wait.
	DefaultDirtyLimit = 32 << 20
)

// Config tunes the content module. Each field comes from a module
// argument NAME=VALUE, else from the broker attribute content.NAME, else
// from its default.
type Config struct {
	// Hash is the digest algorithm, "sha1" or "sha256" (attribute
	// content.hash only: it must be the same on every rank; default sha1).
	Hash string
	// CacheSize (cache-size) is how many bytes of blobs the cache holds
	// (each entry counted with its bookkeeping) before it evicts clean
	// entries, least recently used first. Dirty entries are never
	// evicted, so the cache may exceed it while they are being written
	// upstream (default 8 MiB).
	CacheSize int64
	// BlobSizeLimit (blob-size-limit) is the largest blob content.store
	// accepts; larger ones get EFBIG (default 1 GiB).
	BlobSizeLimit int64
	// FlushBatchLimit (flush-batch-limit) is how many stores rank 0 keeps
	// in flight to the backing store (default 256). Ranks > 0 write
	// through without a limit: each store in flight there is a client's.
	FlushBatchLimit int
	// DirtyLimit (dirty-limit) bounds the bytes of blobs rank 0 holds
	// that are not yet in its backing store. Past it, rank 0 answers
	// content.store requests only once the backlog is back under three
	// quarters of the limit, so writers faster than the backing store
	// (the KVS under a burst of jobs) wait, and merge their work into
	// fewer, larger commits, instead of filling memory (default 32 MiB;
	// 0: no limit).
	DirtyLimit int64
	// BackingModule (backing-module) names the module expected to
	// register as the backing store on rank 0. Until it registers (or
	// BackingTimeout passes), rank 0 holds back load misses, flushes and
	// checkpoint lookups instead of answering them from memory alone.
	// Empty: answer at once.
	BackingModule string
}

// BackingTimeout bounds how long rank 0 waits for Config.BackingModule.
const BackingTimeout = 30 * time.Second

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Hash:            fluxcontent.DefaultHash,
		CacheSize:       DefaultCacheSize,
		BlobSizeLimit:   DefaultBlobSizeLimit,
		FlushBatchLimit: DefaultFlushBatchLimit,
		DirtyLimit:      DefaultDirtyLimit,
	}
}

// Validate reports a setting that can't work.
func (c Config) Validate() error {
	if err := fluxcontent.ValidateHash(c.Hash); err != nil {
		return fmt.Errorf("content.hash: %w", err)
	}
	if c.CacheSize < 0 {
		return fmt.Errorf("cache-size %d is negative: %w", c.CacheSize, syscall.EINVAL)
	}
	if c.BlobSizeLimit <= 0 {
		return fmt.Errorf("blob-size-limit %d must be positive: %w", c.BlobSizeLimit, syscall.EINVAL)
	}
	if c.DirtyLimit < 0 {
		return fmt.Errorf("dirty-limit %d is negative: %w", c.DirtyLimit, syscall.EINVAL)
	}
	if c.FlushBatchLimit <= 0 {
		return fmt.Errorf("flush-batch-limit %d must be positive: %w", c.FlushBatchLimit, syscall.EINVAL)
	}
	return nil
}

// apply sets the setting name (without the "content." prefix) to value.
func (c *Config) apply(name, value string) error {
	switch name {
	case "cache-size", "blob-size-limit", "dirty-limit":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s=%q: not an integer: %w", name, value, syscall.EINVAL)
		}
		switch name {
		case "cache-size":
			c.CacheSize = n
		case "blob-size-limit":
			c.BlobSizeLimit = n
		default:
			c.DirtyLimit = n
		}
	case "flush-batch-limit":
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("%s=%q: not an integer: %w", name, value, syscall.EINVAL)
		}
		c.FlushBatchLimit = n
	case "backing-module":
		c.BackingModule = value
	default:
		return fmt.Errorf("unknown content module option %q: %w", name, syscall.EINVAL)
	}
	return nil
}

// attrNames are the settings also read from broker attributes.
var attrNames = []string{"cache-size", "blob-size-limit", "flush-batch-limit", "dirty-limit", "backing-module"}

// parseConfig builds a Config from attribute values (name without the
// "content." prefix → value; hash under "hash") and module arguments,
// arguments winning.
func parseConfig(attrs map[string]string, args []string) (Config, error) {
	c := DefaultConfig()
	if v, ok := attrs["hash"]; ok {
		c.Hash = v
	}
	for _, name := range attrNames {
		if v, ok := attrs[name]; ok {
			if err := c.apply(name, v); err != nil {
				return c, fmt.Errorf("attribute content.%w", err)
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
