package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/filearchive"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// archiveCreateOptions are the flux archive create flags.
type archiveCreateOptions struct {
	archiveOptions
	directory          string
	overwrite, append  bool
	preserve, mmap     bool
	verbose            int
	chunksize          string
	smallFileThreshold string
}

func newArchiveCreateCmd() *cobra.Command {
	var o archiveCreateOptions
	cmd := &cobra.Command{
		Use:   "create [-n NAME] [-C DIR] [--overwrite|--append] [--preserve] PATH...",
		Short: "Create a KVS file archive",
		Long: `Archive each PATH (a directory with everything under it) as archive.NAME.
Paths are stored relative: -C DIR reads them from DIR, and a leading "/"
is dropped. Only regular files, directories and symbolic links can be
archived; anything else, or an unreadable file, is an error.

Files up to --small-file-threshold bytes (default 1K) are held in the
archive itself; larger ones are stored in the content store in blobs of
at most --chunksize bytes (default 1M, 0 for unlimited), holes of sparse
files left out. Sizes take a suffix k/K, M or G. --preserve also records
the blobs under archive.NAME_blobs so that they survive a restart with
garbage collection.

It is an error if the archive exists, unless --overwrite replaces it or
--append adds to it. --mmap is accepted for compatibility and has the same
limits as in flux-core (rank 0 only, not with --preserve or
--no-force-primary), but file data is always copied into the content
store: the files may change or go away once the archive is created.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return archiveCreate(ctx, h, o, args, cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	o.flags(cmd, "write to")
	f.StringVarP(&o.directory, "directory", "C", "", "read PATHs relative to `DIR`")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace an existing archive")
	f.BoolVar(&o.append, "append", false, "add to an existing archive (create it if missing)")
	f.BoolVar(&o.preserve, "preserve", false, "keep the archive's blobs across a restart with garbage collection")
	f.BoolVar(&o.mmap, "mmap", false, "accepted for compatibility: file data is copied")
	f.IntVarP(&o.verbose, "verbose", "v", 0, "list files on stderr as they are archived")
	f.Lookup("verbose").NoOptDefVal = "1"
	f.StringVar(&o.chunksize, "chunksize", "1M", "largest content blob in bytes (`N`, 0 for unlimited)")
	f.StringVar(&o.smallFileThreshold, "small-file-threshold", "1K", "largest file kept in the archive itself (`N` bytes)")
	return cmd
}

func archiveCreate(ctx context.Context, h *flux.Handle, o archiveCreateOptions, paths []string, stderr io.Writer) error {
	key, err := o.key()
	if err != nil {
		return err
	}
	if o.overwrite && o.append {
		return fmt.Errorf("--overwrite and --append cannot be used together")
	}
	params := filearchive.Params{}
	if params.Chunksize, err = parseArchiveSize("chunksize", o.chunksize); err != nil {
		return err
	}
	if params.SmallFileThreshold, err = parseArchiveSize("small-file-threshold", o.smallFileThreshold); err != nil {
		return err
	}
	if o.mmap {
		switch {
		case o.preserve:
			return fmt.Errorf("--mmap cannot work with --preserve")
		case o.noForcePrimary:
			return fmt.Errorf("--mmap cannot work with --no-force-primary")
		}
		rank, err := h.Attr(ctx, "rank")
		if err != nil {
			return fmt.Errorf("error fetching broker rank: %s", errText(err))
		}
		if rank != "0" {
			return fmt.Errorf("--mmap only works on the rank 0 broker")
		}
	}
	if err := archiveCheckDir(o.directory); err != nil {
		return err
	}
	if params.Hash, err = content.HashName(ctx, h); err != nil {
		return fmt.Errorf("content.hash: %s", errText(err))
	}
	ns := o.namespace()
	blobsKey := key + "_blobs"
	var txn kvs.Txn
	var files []map[string]any
	seq := 0 // next archive.NAME_blobs.N
	switch {
	case o.overwrite:
		txn.Unlink(blobsKey)
	default:
		b, err := kvs.GetRaw(ctx, h, ns, key)
		switch {
		case errors.Is(err, syscall.ENOENT):
		case err != nil:
			return fmt.Errorf("KVS lookup %s: %s", key, errText(err))
		case !o.append:
			return fmt.Errorf("%s: key exists (use --overwrite to replace the archive or --append to add to it)", key)
		default:
			if files, err = filearchive.Decode(b); err != nil {
				return fmt.Errorf("%s: %v", key, err)
			}
			if o.preserve {
				if seq, err = archiveBlobsNext(ctx, h, ns, blobsKey); err != nil {
					return err
				}
			}
		}
	}

	store := &contentBlobStore{ctx: ctx, h: h}
	b := filearchive.Builder{Dir: o.directory, Params: params, Blobs: store}
	if o.verbose > 0 {
		b.Trace = func(p string) { fmt.Fprintln(stderr, p) }
	}
	for _, p := range paths {
		if err := b.Add(p); err != nil {
			store.Flush()
			return err
		}
	}
	if err := store.Flush(); err != nil {
		return err
	}
	if o.preserve {
		for _, ref := range b.Blobrefs {
			txn.PutTreeobj(blobsKey+"."+strconv.Itoa(seq), treeobj.NewValref(ref))
			seq++
		}
	}
	if err := txn.PutJSON(key, append(files, b.Files...)); err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	if _, err := kvs.Commit(ctx, h, ns, 0, &txn); err != nil {
		return fmt.Errorf("kvs commit: %s", errText(err))
	}
	return nil
}

// archiveBlobsNext is the next free N of archive.NAME_blobs.N, for
// --append --preserve to add to the blobs recorded before.
func archiveBlobsNext(ctx context.Context, h *flux.Handle, ns, blobsKey string) (int, error) {
	dir, err := kvs.Dir(ctx, h, ns, blobsKey)
	if errors.Is(err, syscall.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("KVS lookup %s: %s", blobsKey, errText(err))
	}
	next := 0
	for _, name := range dir.Names() {
		if n, err := strconv.Atoi(name); err == nil && n >= next {
			next = n + 1
		}
	}
	return next, nil
}
