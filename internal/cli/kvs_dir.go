package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// kvsDirOptions are the flux kvs dir flags.
type kvsDirOptions struct {
	ns        string
	recursive bool
	dirOnly   bool
	width     int
	at        string
}

func newKVSDirCmd() *cobra.Command {
	var o kvsDirOptions
	cmd := &cobra.Command{
		Use:   "dir [-N ns] [-R] [-d] [-w COLS] [-a treeobj] [KEY]",
		Short: "Display all keys under directory",
		Long: `Print "KEY = VALUE" for each key in directory KEY (default "."), "KEY." for
subdirectories (their contents with -R) and "KEY -> TARGET" for symlinks.
-d omits the values. Lines are cut to the terminal width (-w COLS; 0 means
no limit).`,
		Args: cobra.MaximumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			key := "."
			if len(args) == 1 {
				key = args[0]
			}
			out := cmd.OutOrStdout()
			return kvsDir(ctx, h, o, key, windowWidth(o.width, out), out)
		}),
	}
	nsFlag(cmd, &o.ns)
	f := cmd.Flags()
	f.BoolVarP(&o.recursive, "recursive", "R", false, "recursively display keys under subdirectories")
	f.BoolVarP(&o.dirOnly, "directory", "d", false, "list directory entries and not values")
	f.IntVarP(&o.width, "width", "w", -1, "set output width to `COLS` (0 means no limit)")
	f.StringVarP(&o.at, "at", "a", "", "look up relative to RFC 11 snapshot reference `TREEOBJ`")
	return cmd
}

// kvsReader looks keys up in a namespace or in a snapshot.
type kvsReader struct {
	h    *flux.Handle
	ns   string
	root *treeobj.Object
}

func (r kvsReader) lookup(ctx context.Context, flags int, key string) (*treeobj.Object, error) {
	if r.root != nil {
		return kvs.LookupAt(ctx, r.h, flags, key, r.root)
	}
	return kvs.Lookup(ctx, r.h, r.ns, flags, key)
}

func (r kvsReader) dir(ctx context.Context, key string) (*kvs.Directory, error) {
	if r.root != nil {
		return kvs.DirAt(ctx, r.h, key, r.root)
	}
	return kvs.Dir(ctx, r.h, r.ns, key)
}

func kvsDir(ctx context.Context, h *flux.Handle, o kvsDirOptions, key string, width int, out io.Writer) error {
	r := kvsReader{h: h, ns: o.ns}
	if o.at != "" {
		var err error
		if r.root, err = treeobj.Decode([]byte(o.at)); err != nil {
			return fmt.Errorf("--at: %w", err)
		}
	}
	d, err := r.dir(ctx, key)
	if err != nil {
		return keyErr(key, err)
	}
	return dumpDir(ctx, r, d, o, width, out)
}

func dumpDir(ctx context.Context, r kvsReader, d *kvs.Directory, o kvsDirOptions, width int, out io.Writer) error {
	for _, name := range d.Names() {
		key := d.KeyAt(name)
		e := d.Entry(name)
		switch {
		case e.Type == treeobj.Symlink:
			if e.Namespace != "" {
				fmt.Fprintf(out, "%s -> %s::%s\n", key, e.Namespace, e.Target)
			} else {
				fmt.Fprintf(out, "%s -> %s\n", key, e.Target)
			}
		case e.IsDir():
			if !o.recursive {
				fmt.Fprintf(out, "%s.\n", key)
				continue
			}
			sub, err := r.dir(ctx, key)
			if err != nil {
				return keyErr(key, err)
			}
			if sub.Len() == 0 {
				fmt.Fprintf(out, "%s.\n", key)
				continue
			}
			if err := dumpDir(ctx, r, sub, o, width, out); err != nil {
				return err
			}
		case o.dirOnly:
			fmt.Fprintln(out, key)
		default:
			obj, err := r.lookup(ctx, 0, key)
			if err != nil {
				return keyErr(key, err)
			}
			data, err := kvs.ValueOf(key, obj)
			if err != nil {
				return err
			}
			if n := len(data); n > 0 && data[n-1] == 0 {
				data = data[:n-1]
			}
			kvPrintf(out, key, width, string(data))
		}
	}
	return nil
}

// kvPrintf prints "KEY = VALUE", cut to maxcol columns (0: no limit) at
// the first newline or unprintable character, "..." marking a cut.
func kvPrintf(out io.Writer, key string, maxcol int, val string) {
	if maxcol != 0 && maxcol <= 3 {
		maxcol = 0
	}
	kv := key + " = " + val
	overflow := false
	if maxcol != 0 {
		if len(kv) > maxcol-3 {
			kv = kv[:maxcol-3]
			overflow = true
		}
		if i := strings.IndexByte(kv, '\n'); i >= 0 {
			if i+1 < len(kv) {
				overflow = true
			}
			kv = kv[:i]
		}
		for i := 0; i < len(kv); i++ {
			if c := kv[i]; c < 0x20 || c > 0x7e {
				kv = kv[:i]
				overflow = true
				break
			}
		}
	}
	if overflow {
		kv += "..."
	}
	fmt.Fprintln(out, kv)
}

// kvsLsOptions are the flux kvs ls flags.
type kvsLsOptions struct {
	ns        string
	recursive bool
	dirOnly   bool
	width     int
	one       bool
	classify  bool
}

func newKVSLsCmd() *cobra.Command {
	var o kvsLsOptions
	cmd := &cobra.Command{
		Use:   "ls [-N ns] [-R] [-d] [-F] [-w COLS] [-1] [KEY...]",
		Short: "List directory",
		Long: `List the directories KEY (default "."), like ls(1): -R recursively, -d the
directories themselves, -F with "." after directories and "@" after
symlinks, -1 one per line, -w COLS wide (0 means no limit).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := openHandle()
			if err != nil {
				return kvsFail(cmd, err)
			}
			defer h.Close()
			ctx, cancel := cmdContext()
			defer cancel()
			out := cmd.OutOrStdout()
			width := windowWidth(o.width, out)
			if o.one {
				width = 1
			}
			if err := kvsLs(ctx, h, o, args, width, out, cmd.ErrOrStderr()); err != nil {
				return kvsFail(cmd, err)
			}
			return nil
		},
	}
	nsFlag(cmd, &o.ns)
	f := cmd.Flags()
	f.BoolVarP(&o.recursive, "recursive", "R", false, "list directories recursively")
	f.BoolVarP(&o.dirOnly, "directory", "d", false, "list directories instead of their contents")
	f.IntVarP(&o.width, "width", "w", -1, "set output width to `COLS` (0 means no limit)")
	f.BoolVarP(&o.one, "1", "1", false, "one entry per line")
	f.BoolVarP(&o.classify, "classify", "F", false, "append an indicator (one of .@) to entries")
	return cmd
}

// kvsLs lists like flux kvs ls: the keys that are not directories to be
// expanded first, then each directory. Keys that cannot be listed are
// reported on errw and make it fail at the end.
func kvsLs(ctx context.Context, h *flux.Handle, o kvsLsOptions, keys []string, width int, out, errw io.Writer) error {
	if len(keys) == 0 {
		keys = []string{"."}
	}
	var dirs, singles []string
	failed := false
	for _, key := range keys {
		if err := lsCategorize(ctx, h, o, key, &dirs, &singles); err != nil {
			if errors.Is(err, errLsKey) {
				fmt.Fprintln(errw, strings.TrimSuffix(err.Error(), ": "+errLsKey.Error()))
				failed = true
				continue
			}
			return err
		}
	}
	sort.Strings(singles)
	sort.Strings(dirs)
	label, vspace := false, false
	if len(singles) > 0 {
		listColumns(out, singles, singles, width)
		label, vspace = true, true
	}
	if o.recursive || len(dirs) > 1 {
		label = true
	}
	for _, key := range dirs {
		if err := lsDir(ctx, h, o, key, width, label, vspace, out); err != nil {
			return err
		}
		vspace = true
	}
	if failed {
		return exitCode(1)
	}
	return nil
}

// errLsKey marks a per-key ls error (reported, not fatal).
var errLsKey = errors.New("ls key error")

func lsCategorize(ctx context.Context, h *flux.Handle, o kvsLsOptions, key string, dirs, singles *[]string) error {
	nkey := key
	requireDir := false
	for len(nkey) > 1 && strings.HasSuffix(nkey, ".") {
		nkey = nkey[:len(nkey)-1]
		requireDir = true
	}
	obj, err := kvs.Lookup(ctx, h, o.ns, kvs.FlagTreeObj, nkey)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", nkey, errText(err), errLsKey)
	}
	switch {
	case obj.IsDir():
		if o.dirOnly {
			if o.classify {
				nkey += "."
			}
			*singles = append(*singles, nkey)
		} else {
			*dirs = append(*dirs, nkey)
		}
	case obj.Type == treeobj.Symlink:
		if requireDir {
			return fmt.Errorf("%s: %s: %w", nkey, strerror(syscall.ENOTDIR), errLsKey)
		}
		if o.classify || o.dirOnly {
			if o.classify {
				nkey += "@"
			}
			*singles = append(*singles, nkey)
			return nil
		}
		// a link to a directory lists the directory
		_, err := kvs.Lookup(ctx, h, o.ns, 0, nkey)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
			*singles = append(*singles, nkey)
		case errors.Is(err, syscall.EISDIR):
			*dirs = append(*dirs, nkey)
		default:
			return keyErr(nkey, err)
		}
	default:
		if requireDir {
			return fmt.Errorf("%s: %s: %w", nkey, strerror(syscall.ENOTDIR), errLsKey)
		}
		*singles = append(*singles, nkey)
	}
	return nil
}

func lsDir(ctx context.Context, h *flux.Handle, o kvsLsOptions, key string, width int, label, vspace bool, out io.Writer) error {
	d, err := kvs.Dir(ctx, h, o.ns, key)
	if err != nil {
		return keyErr(key, err)
	}
	if label {
		if vspace {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "%s:\n", key)
	}
	names := d.Names()
	shown := names
	if o.classify {
		shown = make([]string, len(names))
		for i, n := range names {
			shown[i] = n
			switch e := d.Entry(n); {
			case e.IsDir():
				shown[i] += "."
			case e.Type == treeobj.Symlink:
				shown[i] += "@"
			}
		}
	}
	listColumns(out, names, shown, width)
	if !o.recursive {
		return nil
	}
	for _, n := range names {
		if d.Entry(n).IsDir() {
			if err := lsDir(ctx, h, o, d.KeyAt(n), width, label, true, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// listColumns prints shown in columns as wide as the longest of names
// plus 4, as many per line as fit in width (0: unlimited; 1: one per
// line).
func listColumns(out io.Writer, names, shown []string, width int) {
	colWidth := 0
	for _, n := range names {
		if len(n) > colWidth {
			colWidth = len(n)
		}
	}
	colWidth += 4
	var b strings.Builder
	col, lastLen := 0, 0
	for _, s := range shown {
		if width != 0 && col+colWidth > width && col > 0 {
			b.WriteByte('\n')
			col = 0
		} else if lastLen > 0 {
			b.WriteString(strings.Repeat(" ", colWidth-lastLen))
		}
		b.WriteString(s)
		lastLen = len(s)
		col += colWidth
	}
	if col > 0 {
		b.WriteByte('\n')
	}
	io.WriteString(out, b.String())
}
