package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/filearchive"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// newArchiveCmd is flux archive (flux-archive(1)): files kept as an RFC
// 37 archive under the KVS key archive.NAME, large files' data in the
// content store, so every broker of an instance can extract them. The
// subcommands live in archive_create.go and archive_extract.go (extract,
// list); the format in pkg/filearchive.
func newArchiveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Flux KVS file archive utility",
		Long: `flux archive stores files, directories and symbolic links as an RFC 37
archive under the KVS key archive.NAME (NAME is "main" unless -n/--name
says otherwise), the data of files over 1K in the content store, so that
every broker of the instance can extract them, e.g.

  flux archive create -n data -C /project dataset1
  flux exec -r all flux archive extract -n data --waitcreate -C /tmp/x
  flux archive remove -n data

Archives live in the primary KVS namespace unless --no-force-primary.`,
	}
	cmd.AddCommand(newArchiveCreateCmd(), newArchiveListCmd(), newArchiveExtractCmd(), newArchiveRemoveCmd())
	return cmd
}

// archiveOptions are the flags every flux archive subcommand has.
type archiveOptions struct {
	name           string
	noForcePrimary bool
}

func (o *archiveOptions) flags(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVarP(&o.name, "name", "n", "main", verb+" archive `NAME`")
	cmd.Flags().BoolVar(&o.noForcePrimary, "no-force-primary", false, "use the default KVS namespace ($FLUX_KVS_NAMESPACE), not the primary one")
}

// key is the archive's KVS key; an empty name is an error.
func (o *archiveOptions) key() (string, error) {
	if o.name == "" {
		return "", fmt.Errorf("--name: the archive name must not be empty")
	}
	return "archive." + o.name, nil
}

// namespace is where the archive lives: "primary" unless
// --no-force-primary.
func (o *archiveOptions) namespace() string {
	if o.noForcePrimary {
		return kvs.Namespace("")
	}
	return kvs.PrimaryNamespace
}

// archiveLoad reads the archive at key; with wait (--waitcreate) it first
// waits up to timeout (0: forever) for the key to be created.
func archiveLoad(ctx context.Context, h *flux.Handle, ns, key string, wait bool, timeout time.Duration) ([]map[string]any, error) {
	var b []byte
	var err error
	if wait {
		wctx := ctx
		if timeout > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		b, err = kvs.WaitCreate(wctx, h, ns, key)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: the archive was not created within %s (--waitcreate)", key, fsd.Format(timeout.Seconds()))
		}
	} else {
		b, err = kvs.GetRaw(ctx, h, ns, key)
	}
	if err != nil {
		return nil, fmt.Errorf("KVS lookup %s: %s", key, errText(err))
	}
	files, err := filearchive.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", key, err)
	}
	return files, nil
}

// archiveFilter keeps the entries matching pattern ("" keeps all) and
// notes on stderr when none does.
func archiveFilter(cmd *cobra.Command, files []map[string]any, pattern string) []map[string]any {
	if pattern == "" {
		return files
	}
	files = filearchive.Filter(files, pattern)
	if len(files) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "flux-archive: no files matched pattern '%s'\n", pattern)
	}
	return files
}

// archiveCheckDir fails unless -C dir is a directory, as a chdir would.
func archiveCheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		var en syscall.Errno
		if errors.As(err, &en) {
			return fmt.Errorf("chdir %s: %s", dir, strerror(en))
		}
		return fmt.Errorf("chdir %s: %v", dir, err)
	}
	return nil
}

// parseArchiveSize parses --chunksize and --small-file-threshold: a size
// as everywhere else (size.Bounded: "1.5M", "64k"), 0 to INT_MAX.
func parseArchiveSize(flag, s string) (int64, error) {
	n, err := size.Bounded(s, 0, math.MaxInt32)
	if err != nil {
		return 0, fmt.Errorf("--%s=%s: %v", flag, s, err)
	}
	return n, nil
}

// archiveWindow is how many content store or load requests an archive
// command keeps in flight.
const archiveWindow = 16

// contentBlobStore is filearchive.BlobStore on the instance's content
// store: stores are pipelined, archiveWindow at a time.
type contentBlobStore struct {
	ctx     context.Context
	h       *flux.Handle
	pending []pendingStore
}

type pendingStore struct {
	ref    string
	digest []byte
	f      *flux.Future
}

func (c *contentBlobStore) Store(ref string, data []byte) error {
	_, digest, err := content.Parse(ref)
	if err != nil {
		return err
	}
	f, err := content.SendStore(c.h, data, 0)
	if err != nil {
		return fmt.Errorf("error storing blob %s: %s", ref, errText(err))
	}
	c.pending = append(c.pending, pendingStore{ref, digest, f})
	if len(c.pending) >= archiveWindow {
		p := c.pending[0]
		c.pending = c.pending[1:]
		return c.wait(p)
	}
	return nil
}

func (c *contentBlobStore) wait(p pendingStore) error {
	defer p.f.Close()
	got, err := content.StoreResult(p.f.Get(c.ctx))
	if err != nil {
		return fmt.Errorf("error storing blob %s: %s", p.ref, errText(err))
	}
	if !bytes.Equal(got, p.digest) {
		return fmt.Errorf("error storing blob %s: the content store answered with another digest (is content.hash the same on every broker?)", p.ref)
	}
	return nil
}

func (c *contentBlobStore) Flush() error {
	var first error
	for _, p := range c.pending {
		if err := c.wait(p); err != nil && first == nil {
			first = err
		}
	}
	c.pending = nil
	return first
}

// archiveRemoveOptions are the flux archive remove flags.
type archiveRemoveOptions struct {
	archiveOptions
	force bool
}

func newArchiveRemoveCmd() *cobra.Command {
	var o archiveRemoveOptions
	cmd := &cobra.Command{
		Use:   "remove [-n NAME] [-f]",
		Short: "Remove a KVS file archive",
		Long: `Unlink archive.NAME and archive.NAME_blobs from the KVS. Without -f it
is an error if the archive does not exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := o.key()
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return archiveRemove(ctx, h, o.namespace(), key, o.force)
			})
		},
	}
	o.flags(cmd, "remove")
	cmd.Flags().BoolVarP(&o.force, "force", "f", false, "do not fail if the archive does not exist")
	return cmd
}

// archiveRemove unlinks key and key_blobs in one commit.
func archiveRemove(ctx context.Context, h *flux.Handle, ns, key string, force bool) error {
	if !force {
		if _, err := kvs.Lookup(ctx, h, ns, kvs.FlagTreeObj, key); errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("%s does not exist", key)
		} else if err != nil {
			return fmt.Errorf("KVS lookup %s: %s", key, errText(err))
		}
	}
	var txn kvs.Txn
	txn.Unlink(key)
	txn.Unlink(key + "_blobs")
	if _, err := kvs.Commit(ctx, h, ns, 0, &txn); err != nil {
		return fmt.Errorf("unlink %s,%s_blobs: %s", key, key, errText(err))
	}
	return nil
}
