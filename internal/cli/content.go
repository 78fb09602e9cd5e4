package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
)

// newContentCmd is flux content (flux-content(1)): load, store, flush and
// dropcache on the instance's content store.
func newContentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "content",
		Short: "Access the instance content store",
		Long: `flux content reads and writes the instance's content-addressable store
(RFC 10), where blobs are kept under "blobrefs" naming their digest, e.g.
sha1-f1d2d2f924e986ac86fdf7b36c94bcdf32beec15.`,
	}
	cmd.AddCommand(newContentLoadCmd(), newContentStoreCmd(), newContentFlushCmd(), newContentDropcacheCmd())
	return cmd
}

func newContentLoadCmd() *cobra.Command {
	var bypass bool
	cmd := &cobra.Command{
		Use:   "load [--bypass-cache] [BLOBREF...]",
		Short: "Concatenate the blobs stored under BLOBREF(s) to stdout",
		Long: `flux content load writes the blob stored under each BLOBREF to standard
output, in order. With no BLOBREF, blobrefs are read from standard input,
one per line.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				refs, err := readContentBlobrefs(cmd.InOrStdin())
				if err != nil {
					return err
				}
				args = refs
			}
			return contentWithHandle(func(ctx context.Context, h *flux.Handle) error {
				return contentLoad(ctx, h, args, contentFlags(bypass), cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVarP(&bypass, "bypass-cache", "b", false, "load directly from the backing store on rank 0")
	return cmd
}

func newContentStoreCmd() *cobra.Command {
	var bypass bool
	var chunksize int
	cmd := &cobra.Command{
		Use:   "store [--bypass-cache] [--chunksize=N]",
		Short: "Store a blob from stdin and print its blobref",
		Long: `flux content store reads standard input, stores it as one blob (or as
blobs of at most N bytes with --chunksize) and prints each blobref.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if chunksize < 0 {
				return fmt.Errorf("--chunksize=%d: must be >= 0", chunksize)
			}
			data, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("read from stdin: %w", err)
			}
			return contentWithHandle(func(ctx context.Context, h *flux.Handle) error {
				return contentStore(ctx, h, data, chunksize, contentFlags(bypass), cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().BoolVarP(&bypass, "bypass-cache", "b", false, "store directly to the backing store on rank 0")
	cmd.Flags().IntVar(&chunksize, "chunksize", 0, "store blobs of at most `N` bytes (0: one blob)")
	return cmd
}

func newContentFlushCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "flush",
		Short: "Write dirty entries of the local content cache and wait for them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return contentWithHandle(func(ctx context.Context, h *flux.Handle) error {
				if err := content.Flush(ctx, h); err != nil {
					return fmt.Errorf("content.flush: %w", err)
				}
				return nil
			})
		},
	}
}

func newContentDropcacheCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dropcache",
		Short: "Drop non-essential entries from the local content cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return contentWithHandle(func(ctx context.Context, h *flux.Handle) error {
				if err := content.Dropcache(ctx, h); err != nil {
					return fmt.Errorf("content.dropcache: %w", err)
				}
				return nil
			})
		},
	}
}

// contentWithHandle runs fn with a connection to the enclosing instance.
func contentWithHandle(fn func(ctx context.Context, h *flux.Handle) error) error {
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		return fn(ctx, h)
	})
}

func contentFlags(bypass bool) content.Flags {
	if bypass {
		return content.BypassCache
	}
	return 0
}

// readContentBlobrefs reads one blobref per line; blank lines are skipped.
func readContentBlobrefs(r io.Reader) ([]string, error) {
	var refs []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			refs = append(refs, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read blobrefs from stdin: %w", err)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("no blobrefs were specified")
	}
	return refs, nil
}

// contentLoad writes the blobs named by refs to w, in order. All
// blobrefs are checked before anything is loaded, and the loads are
// pipelined.
func contentLoad(ctx context.Context, h *flux.Handle, refs []string, flags content.Flags, w io.Writer) error {
	digests := make([][]byte, len(refs))
	for i, ref := range refs {
		_, d, err := content.Parse(ref)
		if err != nil {
			return err
		}
		digests[i] = d
	}
	futures := make([]*flux.Future, len(refs))
	for i, d := range digests {
		f, err := content.SendLoad(h, d, flags)
		if err != nil {
			return fmt.Errorf("load %s: %w", refs[i], err)
		}
		futures[i] = f
	}
	for i, f := range futures {
		data, err := content.LoadResult(f.Get(ctx))
		if err != nil {
			var ferr *flux.Error
			if errors.As(err, &ferr) {
				return err // the service's message names the blob
			}
			return fmt.Errorf("load %s: %w", refs[i], err)
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// contentStore stores data as one blob, or as chunks of at most
// chunksize bytes, and prints one blobref per line.
func contentStore(ctx context.Context, h *flux.Handle, data []byte, chunksize int, flags content.Flags, w io.Writer) error {
	chunks := [][]byte{data} // an empty input is one empty blob
	if chunksize > 0 && len(data) > 0 {
		chunks = nil
		for off := 0; off < len(data); off += chunksize {
			chunks = append(chunks, data[off:min(off+chunksize, len(data))])
		}
	}
	futures := make([]*flux.Future, len(chunks))
	for i, c := range chunks {
		f, err := content.SendStore(h, c, flags)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		futures[i] = f
	}
	hash, err := content.HashName(ctx, h)
	if err != nil {
		return err
	}
	for _, f := range futures {
		digest, err := content.StoreResult(f.Get(ctx))
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		ref, err := content.Format(hash, digest)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		fmt.Fprintln(w, ref)
	}
	return nil
}
