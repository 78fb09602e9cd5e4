package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/filearchive"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// archiveExtractOptions are the flux archive extract flags.
type archiveExtractOptions struct {
	archiveOptions
	directory  string
	overwrite  bool
	listOnly   bool
	verbose    int
	waitcreate string
}

func newArchiveExtractCmd() *cobra.Command {
	var o archiveExtractOptions
	cmd := &cobra.Command{
		Use:   "extract [-n NAME] [-C DIR] [--overwrite] [--waitcreate[=FSD]] [PATTERN]",
		Short: "Extract KVS file archive contents",
		Long: `Extract the files of archive.NAME (those matching the glob PATTERN, where
'*' also matches '/') into the current directory or -C DIR. An existing
file is an error unless --overwrite; existing directories are kept.
Permission bits are restored (without set-user-ID and set-group-ID),
owners and times are not. Absolute paths and paths with '..' are refused,
and nothing is written through a symbolic link.

--waitcreate waits for the archive to be created, forever or for FSD (an
RFC 23 duration such as 30s): the KVS of another broker may not have
caught up with a just-created archive yet. -t lists the files instead of
extracting them (in long form with -v).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return archiveExtract(ctx, h, o, args, cmd)
			})
		},
	}
	f := cmd.Flags()
	o.flags(cmd, "read from")
	f.StringVarP(&o.directory, "directory", "C", "", "extract into `DIR`")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace existing files")
	f.BoolVarP(&o.listOnly, "list-only", "t", false, "list the files without extracting them")
	f.IntVarP(&o.verbose, "verbose", "v", 0, "list files on stderr as they are extracted")
	f.Lookup("verbose").NoOptDefVal = "1"
	f.StringVar(&o.waitcreate, "waitcreate", "", "wait for the archive to be created (for at most `FSD`)")
	f.Lookup("waitcreate").NoOptDefVal = "inf"
	return cmd
}

func archiveExtract(ctx context.Context, h *flux.Handle, o archiveExtractOptions, args []string, cmd *cobra.Command) error {
	key, err := o.key()
	if err != nil {
		return err
	}
	wait := cmd.Flags().Changed("waitcreate")
	var timeout float64
	if wait {
		if timeout, err = fsd.Parse(o.waitcreate); err != nil {
			return fmt.Errorf("--waitcreate=%s: %v", o.waitcreate, err)
		}
		if math.IsInf(timeout, 1) {
			timeout = 0
		}
	}
	if err := archiveCheckDir(o.directory); err != nil {
		return err
	}
	files, err := archiveLoad(ctx, h, o.namespace(), key, wait, fsd.ToDuration(timeout))
	if err != nil {
		return err
	}
	pattern := ""
	if len(args) > 0 {
		pattern = args[0]
	}
	files = archiveFilter(cmd, files, pattern)
	if o.listOnly {
		return archivePrintList(key, files, o.verbose > 0, false, cmd.OutOrStdout())
	}
	x := filearchive.Extractor{Dir: o.directory, Overwrite: o.overwrite, Blobs: &content.Fetcher{Ctx: ctx, H: h, Window: archiveWindow}}
	if o.verbose > 0 {
		stderr := cmd.ErrOrStderr()
		x.Trace = func(p string) { fmt.Fprintln(stderr, p) }
	}
	return x.Extract(files)
}

// archiveListOptions are the flux archive list flags.
type archiveListOptions struct {
	archiveOptions
	long, raw bool
}

func newArchiveListCmd() *cobra.Command {
	var o archiveListOptions
	cmd := &cobra.Command{
		Use:   "list [-n NAME] [-l|--raw] [PATTERN]",
		Short: "List KVS file archive contents",
		Long: `List the files of archive.NAME, or those matching the glob PATTERN (where
'*' also matches '/'). -l adds the type (f, d or l), permissions and size;
--raw prints each RFC 37 file object as JSON.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := o.key()
			if err != nil {
				return err
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				files, err := archiveLoad(ctx, h, o.namespace(), key, false, 0)
				if err != nil {
					return err
				}
				pattern := ""
				if len(args) > 0 {
					pattern = args[0]
				}
				files = archiveFilter(cmd, files, pattern)
				return archivePrintList(key, files, o.long, o.raw, cmd.OutOrStdout())
			})
		},
	}
	o.flags(cmd, "read from")
	cmd.Flags().BoolVarP(&o.long, "long", "l", false, "show file type, mode and size")
	cmd.Flags().BoolVar(&o.raw, "raw", false, "show the RFC 37 file objects as JSON")
	return cmd
}

// archivePrintList prints one line per file object.
func archivePrintList(key string, files []map[string]any, long, raw bool, w io.Writer) error {
	for i, f := range files {
		if raw {
			b, err := json.Marshal(f)
			if err != nil {
				return fmt.Errorf("%s: entry %d: %v", key, i, err)
			}
			fmt.Fprintf(w, "%s\n", b)
			continue
		}
		line, err := filearchive.ListLine(i, f, long)
		if err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
