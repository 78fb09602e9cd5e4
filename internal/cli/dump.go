package cli

// flux dump / flux restore: a KVS snapshot as a portable archive.
//
// Archive format (documented for other tools): a POSIX ustar archive, or
// the same compressed with gzip when the file name ends in .tgz or
// .tar.gz (restore detects gzip by its magic number). Each KVS value is a
// regular file whose path is the key with "." replaced by "/" (so
// "job.0000.0004.b200.0000.eventlog" is job/0000/0004/b200/0000/eventlog)
// and whose content is the value's bytes. Each symlink is a symlink entry
// whose target is the link's target key, prefixed "NAMESPACE::" when the
// link names a namespace. Directories are not archived on their own
// (empty directories are lost). Files have mode 0644, the dumping user's
// uid/gid, and the dump's start time (or the checkpoint's time) as mtime.

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// dumpOptions are the flux dump and flux restore flags.
type dumpOptions struct {
	verbose, quiet bool
	checkpoint     bool
	noCache        bool
	key            string  // restore --key
	sizeLimit      string  // restore --size-limit
	limit          float64 // parsed size limit (0: none)
	maxreqs        int     // restore: content stores in flight at most
}

func (o *dumpOptions) contentFlags() content.Flags {
	if o.noCache {
		return content.BypassCache
	}
	return 0
}

func newDumpCmd() *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "dump [OPTIONS] OUTFILE",
		Short: "Write KVS snapshot to portable archive",
		Long: `Write the primary KVS namespace (its current root, or with --checkpoint the
last checkpoint in the content backing store) to OUTFILE, a tar archive
(.tgz/.tar.gz: compressed; "-": standard output). Keys become paths with
"/" separators; symlinks stay symlinks.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.maxreqs <= 0 {
				return fmt.Errorf("--maxreqs=%d: invalid value for maxreqs", o.maxreqs)
			}
			return dumpRun(cmd, func(ctx context.Context, h *flux.Handle) error {
				return runDump(ctx, h, o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.verbose, "verbose", "v", false, "list keys on stderr as they are dumped")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "don't show a periodic count of dumped keys")
	f.BoolVar(&o.checkpoint, "checkpoint", false, "dump the last KVS checkpoint instead of the current root")
	f.BoolVar(&o.noCache, "no-cache", false, "bypass the broker content cache")
	f.IntVar(&o.maxreqs, "maxreqs", 2, "accepted as flux-core's (`N` concurrent loads); fluxgo's dump reads one blob at a time")
	return cmd
}

func newRestoreCmd() *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "restore [OPTIONS] INFILE",
		Short: "Restore KVS snapshot from a portable archive",
		Long: `Read an archive written by flux dump (INFILE, or "-" for standard input),
store its content and make it either the directory KVS key NAME (--key) or
the KVS checkpoint (--checkpoint; unload the kvs module first).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.maxreqs <= 0 || o.maxreqs > 1<<16 {
				return fmt.Errorf("--maxreqs=%d: invalid value for maxreqs (1-65536)", o.maxreqs)
			}
			return dumpRun(cmd, func(ctx context.Context, h *flux.Handle) error {
				return runRestore(ctx, h, o, args[0], cmd.InOrStdin(), cmd.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.verbose, "verbose", "v", false, "list keys on stderr as they are restored")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "don't show a periodic count of restored keys")
	f.BoolVar(&o.checkpoint, "checkpoint", false, "write the restored root as the KVS checkpoint")
	f.StringVar(&o.key, "key", "", "make the restored root the directory `NAME`")
	f.BoolVar(&o.noCache, "no-cache", false, "bypass the broker content cache")
	f.StringVar(&o.sizeLimit, "size-limit", "", "skip keys larger than `SIZE` (suffix b, k, M, G)")
	f.IntVar(&o.maxreqs, "maxreqs", storeWindow, "Max concurrent content store requests (`N`)")
	return cmd
}

func dumpRun(cmd *cobra.Command, fn func(ctx context.Context, h *flux.Handle) error) error {
	return withHandle(func(ctx context.Context, h *flux.Handle) error {
		return fn(ctx, h)
	})
}

// progress reports keys on stderr: each with -v, else (unless -q) the
// count when done.
type progress struct {
	w    io.Writer
	o    *dumpOptions
	verb string // "archived" or "restored"
	cmd  string
	n    int
}

func (p *progress) key(k string) {
	p.n++
	if p.o.verbose {
		fmt.Fprintln(p.w, k)
	}
}

func (p *progress) done() {
	if !p.o.quiet {
		fmt.Fprintf(p.w, "flux-%s: %s %d keys\n", p.cmd, p.verb, p.n)
	}
}

func runDump(ctx context.Context, h *flux.Handle, o dumpOptions, path string, stdout, stderr io.Writer) error {
	var rootref string
	mtime := time.Now()
	if o.checkpoint {
		cp, err := content.CheckpointGet(ctx, h, content.DefaultCheckpointKey)
		if err != nil {
			return fmt.Errorf("error fetching checkpoint: %s", errText(err))
		}
		rootref = cp.Rootref
		if cp.Timestamp > 0 {
			mtime = time.Unix(0, int64(cp.Timestamp*1e9))
		}
	} else {
		r, err := kvs.GetRoot(ctx, h, kvs.PrimaryNamespace)
		if err != nil {
			return fmt.Errorf("error fetching current KVS root: %s", errText(err))
		}
		rootref = r.Rootref
	}
	var out io.Writer = stdout
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		out = f
		switch {
		case strings.HasSuffix(path, ".tgz"), strings.HasSuffix(path, ".tar.gz"):
			gz := gzip.NewWriter(f)
			out = gz
			defer gz.Close()
		case strings.HasSuffix(path, ".tar"):
		default:
			return fmt.Errorf("%s: unsupported archive format (use .tar, .tgz or .tar.gz)", path)
		}
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	tw := tar.NewWriter(bw)
	d := &dumper{ctx: ctx, h: h, o: &o, tw: tw, mtime: mtime, uid: os.Getuid(), gid: os.Getgid(),
		prog: &progress{w: stderr, o: &o, cmd: "dump", verb: "archived"}}
	if u, err := user.Current(); err == nil {
		d.uname = u.Username
	}
	if err := d.dir(rootref, ""); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	d.prog.done()
	return nil
}

type dumper struct {
	ctx      context.Context
	h        *flux.Handle
	o        *dumpOptions
	tw       *tar.Writer
	mtime    time.Time
	uid, gid int
	uname    string
	prog     *progress
}

func (d *dumper) load(ref string) ([]byte, error) {
	b, err := content.Load(d.ctx, d.h, ref, d.o.contentFlags())
	if err != nil {
		return nil, fmt.Errorf("%s", errText(err))
	}
	return b, nil
}

// dir archives the directory stored at blobref ref, whose key is prefix.
func (d *dumper) dir(ref, prefix string) error {
	b, err := d.load(ref)
	if err != nil {
		return err
	}
	o, err := treeobj.Decode(b)
	if err != nil || o.Type != treeobj.Dir {
		return fmt.Errorf("%s: blob %s is not an RFC 11 dir", keyOrRoot(prefix), ref)
	}
	return d.entries(o, prefix)
}

func keyOrRoot(k string) string {
	if k == "" {
		return "."
	}
	return k
}

func (d *dumper) entries(dir *treeobj.Object, prefix string) error {
	for _, e := range dir.Entries() {
		key := e.Name
		if prefix != "" {
			key = prefix + "." + e.Name
		}
		if err := d.entry(e.Obj, key); err != nil {
			return err
		}
	}
	return nil
}

func (d *dumper) header(key string) *tar.Header {
	return &tar.Header{
		Name: strings.ReplaceAll(key, ".", "/"), Mode: 0o644, ModTime: d.mtime,
		Uid: d.uid, Gid: d.gid, Uname: d.uname, Format: tar.FormatPAX,
	}
}

func (d *dumper) entry(e *treeobj.Object, key string) error {
	switch e.Type {
	case treeobj.Dir:
		return d.entries(e, key)
	case treeobj.Dirref:
		return d.dir(e.Refs[0], key)
	case treeobj.Symlink:
		hdr := d.header(key)
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = e.Target
		if e.Namespace != "" {
			hdr.Linkname = e.Namespace + "::" + e.Target
		}
		d.prog.key(key)
		return d.tw.WriteHeader(hdr)
	case treeobj.Val, treeobj.Valref:
		var data []byte
		if e.Type == treeobj.Val {
			var err error
			if data, err = e.Value(); err != nil {
				return fmt.Errorf("%s: %v", key, err)
			}
		} else {
			for _, ref := range e.Refs {
				b, err := d.load(ref)
				if err != nil {
					return fmt.Errorf("%s: %v", key, err)
				}
				data = append(data, b...)
			}
		}
		hdr := d.header(key)
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(len(data))
		if err := d.tw.WriteHeader(hdr); err != nil {
			return err
		}
		d.prog.key(key)
		_, err := d.tw.Write(data)
		return err
	}
	return fmt.Errorf("%s: unknown tree object type", key)
}

// restorer builds the KVS tree of an archive and stores it, keeping up to
// storeWindow content.store requests in flight.
type restorer struct {
	ctx     context.Context
	h       *flux.Handle
	o       *dumpOptions
	hash    string
	root    *treeobj.Object
	pending []*flux.Future
	prog    *progress
}

const storeWindow = 256

func (r *restorer) store(data []byte) (string, error) {
	ref, err := content.Blobref(r.hash, data)
	if err != nil {
		return "", err
	}
	f, err := content.SendStore(r.h, data, r.o.contentFlags())
	if err != nil {
		return "", err
	}
	r.pending = append(r.pending, f)
	if len(r.pending) >= r.o.maxreqs {
		if err := r.drain(r.o.maxreqs / 2); err != nil {
			return "", err
		}
	}
	return ref, nil
}

// drain waits until at most keep stores are in flight.
func (r *restorer) drain(keep int) error {
	for len(r.pending) > keep {
		f := r.pending[0]
		r.pending = r.pending[1:]
		if _, err := content.StoreResult(f.Get(r.ctx)); err != nil {
			return fmt.Errorf("content store: %s", errText(err))
		}
	}
	return nil
}

// insert puts obj at key in the in-memory tree.
func (r *restorer) insert(key string, obj *treeobj.Object) error {
	comps := treeobj.SplitKey(key)
	if len(comps) == 0 {
		return fmt.Errorf("archive entry with an empty path")
	}
	dir := r.root
	for _, c := range comps[:len(comps)-1] {
		next := dir.Entry(c)
		if next == nil || next.Type != treeobj.Dir {
			next = treeobj.NewDir()
			dir.Set(c, next)
		}
		dir = next
	}
	dir.Set(comps[len(comps)-1], obj)
	return nil
}

// unroll stores a dir depth first and returns its blobref.
func (r *restorer) unroll(dir *treeobj.Object) (string, error) {
	for i, e := range dir.Entries() {
		if e.Obj.Type == treeobj.Dir {
			ref, err := r.unroll(e.Obj)
			if err != nil {
				return "", err
			}
			dir.SetAt(i, treeobj.NewDirref(ref))
		}
	}
	return r.store(dir.Encode())
}

func runRestore(ctx context.Context, h *flux.Handle, o dumpOptions, path string, stdin io.Reader, stderr io.Writer) error {
	switch {
	case !o.checkpoint && o.key == "":
		return errors.New("Please specify a restore target with --checkpoint or --key")
	case o.checkpoint && o.key != "":
		return errors.New("--checkpoint and --key are mutually exclusive")
	}
	if o.maxreqs == 0 {
		o.maxreqs = storeWindow // a caller's zero options: the default
	}
	if o.sizeLimit != "" {
		n, err := size.Parse(o.sizeLimit)
		if err != nil {
			return fmt.Errorf("--size-limit=%s: %v", o.sizeLimit, err)
		}
		o.limit = float64(n)
	}
	var in io.Reader = stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	br := bufio.NewReaderSize(in, 1<<20)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		defer gz.Close()
		in = gz
	} else {
		in = br
	}
	hashName, err := content.HashName(ctx, h)
	if err != nil {
		return err
	}
	r := &restorer{ctx: ctx, h: h, o: &o, hash: hashName, root: treeobj.NewDir(),
		prog: &progress{w: stderr, o: &o, cmd: "restore", verb: "restored"}}
	tr := tar.NewReader(in)
	skipped := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		key := strings.Trim(strings.ReplaceAll(hdr.Name, "/", "."), ".")
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeSymlink:
			target, ns := hdr.Linkname, ""
			if i := strings.Index(target, "::"); i >= 0 {
				ns, target = target[:i], target[i+2:]
			}
			if err := r.insert(key, treeobj.NewSymlink(ns, target)); err != nil {
				return err
			}
		case tar.TypeReg:
			if o.limit > 0 && float64(hdr.Size) > o.limit {
				skipped++
				fmt.Fprintf(stderr, "flux-restore: skipping %s (%d bytes)\n", key, hdr.Size)
				continue
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("%s: %s: %v", path, hdr.Name, err)
			}
			obj := treeobj.NewVal(data)
			if len(obj.Data) > 72 {
				ref, err := r.store(data)
				if err != nil {
					return err
				}
				obj = treeobj.NewValref(ref)
			}
			if err := r.insert(key, obj); err != nil {
				return err
			}
		default:
			fmt.Fprintf(stderr, "flux-restore: skipping %s: unsupported archive entry type %q\n", hdr.Name, hdr.Typeflag)
			continue
		}
		r.prog.key(key)
	}
	rootref, err := r.unroll(r.root)
	if err != nil {
		return err
	}
	if err := r.drain(0); err != nil {
		return err
	}
	r.prog.done()
	if o.checkpoint {
		if err := content.Flush(ctx, h); err != nil && !errors.Is(err, syscall.ENOSYS) {
			return fmt.Errorf("content flush: %s", errText(err))
		}
		cp := content.Checkpoint{Rootref: rootref, Timestamp: float64(time.Now().UnixNano()) / 1e9}
		if err := content.CheckpointPut(ctx, h, content.DefaultCheckpointKey, cp); err != nil {
			return fmt.Errorf("error updating checkpoint: %s", errText(err))
		}
		return nil
	}
	var txn kvs.Txn
	txn.PutTreeobj(o.key, treeobj.NewDirref(rootref))
	if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
		return fmt.Errorf("error updating %s: %s", o.key, errText(err))
	}
	return nil
}
