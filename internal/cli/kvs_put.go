package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// kvsCommitOutput are -O/-s of the commands that commit.
type kvsCommitOutput struct {
	treeobjRoot, sequence bool
}

func (o *kvsCommitOutput) flags(cmd *cobra.Command, what string) {
	cmd.Flags().BoolVarP(&o.treeobjRoot, "treeobj-root", "O", false, "print the RFC 11 root containing the "+what)
	cmd.Flags().BoolVarP(&o.sequence, "sequence", "s", false, "print the root sequence number containing the "+what)
}

// commit commits txn and prints what -O/-s ask for.
func (o *kvsCommitOutput) commit(ctx context.Context, h *flux.Handle, ns string, flags int, txn *kvs.Txn, out io.Writer) error {
	res, err := kvs.Commit(ctx, h, ns, flags, txn)
	if err != nil {
		return fmt.Errorf("flux_kvs_commit: %s", errText(err))
	}
	switch {
	case o.treeobjRoot:
		fmt.Fprintf(out, "%s\n", res.Treeobj().Encode())
	case o.sequence:
		fmt.Fprintf(out, "%d\n", res.Rootseq)
	}
	return nil
}

// kvsPutOptions are the flux kvs put flags.
type kvsPutOptions struct {
	ns         string
	out        kvsCommitOutput
	raw        bool
	treeobj    bool
	noMerge    bool
	appendData bool
}

func newKVSPutCmd() *cobra.Command {
	var o kvsPutOptions
	cmd := &cobra.Command{
		Use:   "put [-N ns] [-O|-s] [-r|-t] [-n] [-A] KEY=VALUE [KEY=VALUE...]",
		Short: "Store value under key",
		Long: `Store VALUE under KEY and commit, all pairs in one transaction. With -r or
-t a VALUE of "-" is read from standard input; -t stores VALUE as an RFC 11
object. -A appends VALUE to the key's value instead of replacing it. -n
keeps the commit from being merged with others.`,
		Args: cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsPut(ctx, h, o, args, cmd.InOrStdin(), cmd.OutOrStdout())
		}),
	}
	f := cmd.Flags()
	nsFlag(cmd, &o.ns)
	o.out.flags(cmd, "puts")
	f.BoolVarP(&o.raw, "raw", "r", false, "store value(s) as is")
	f.BoolVarP(&o.treeobj, "treeobj", "t", false, "store an RFC 11 object")
	f.BoolVarP(&o.noMerge, "no-merge", "n", false, "keep the commit from being merged with others")
	f.BoolVarP(&o.appendData, "append", "A", false, "append value(s) to key instead of overwriting")
	return cmd
}

func kvsPut(ctx context.Context, h *flux.Handle, o kvsPutOptions, args []string, in io.Reader, out io.Writer) error {
	var txn kvs.Txn
	for _, arg := range args {
		key, val, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("put: you must specify a value as key=value")
		}
		data := []byte(val)
		if val == "-" && (o.raw || o.treeobj) {
			b, err := io.ReadAll(in)
			if err != nil {
				return fmt.Errorf("stdin: %v", err)
			}
			data = b
		}
		switch {
		case o.treeobj:
			obj, err := treeobj.Decode(data)
			if err != nil {
				return fmt.Errorf("%s: %v", key, err)
			}
			txn.PutTreeobj(key, obj)
		case o.appendData:
			txn.Append(key, data)
		default:
			txn.Put(key, data)
		}
	}
	flags := 0
	if o.noMerge {
		flags |= kvs.CommitNoMerge
	}
	return o.out.commit(ctx, h, o.ns, flags, &txn, out)
}

// kvsUnlinkOptions are the flux kvs unlink flags.
type kvsUnlinkOptions struct {
	ns               string
	out              kvsCommitOutput
	recursive, force bool
}

func newKVSUnlinkCmd() *cobra.Command {
	var o kvsUnlinkOptions
	cmd := &cobra.Command{
		Use:   "unlink [-N ns] [-O|-s] [-R] [-f] KEY [KEY...]",
		Short: "Remove key",
		Long: `Remove KEY and commit. A non-empty directory needs -R; -f ignores keys
that do not exist.`,
		Args: cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsUnlink(ctx, h, o, args, cmd.OutOrStdout())
		}),
	}
	nsFlag(cmd, &o.ns)
	o.out.flags(cmd, "unlinks")
	cmd.Flags().BoolVarP(&o.recursive, "recursive", "R", false, "remove directory contents recursively")
	cmd.Flags().BoolVarP(&o.force, "force", "f", false, "ignore nonexistent keys")
	return cmd
}

func kvsUnlink(ctx context.Context, h *flux.Handle, o kvsUnlinkOptions, keys []string, out io.Writer) error {
	var txn kvs.Txn
	for _, key := range keys {
		obj, err := kvs.Lookup(ctx, h, o.ns, kvs.FlagTreeObj, key)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) && o.force {
				continue
			}
			return fmt.Errorf("cannot unlink '%s': %s", key, errText(err))
		}
		if !o.recursive && obj.IsDir() {
			n := obj.Count()
			if obj.Type == treeobj.Dirref {
				d, err := kvs.Dir(ctx, h, o.ns, key)
				if err != nil {
					return fmt.Errorf("cannot unlink '%s': %s", key, errText(err))
				}
				n = d.Len()
			}
			if n > 0 {
				return fmt.Errorf("cannot unlink '%s': %s", key, strerror(syscall.ENOTEMPTY))
			}
		}
		txn.Unlink(key)
	}
	return o.out.commit(ctx, h, o.ns, 0, &txn, out)
}

// kvsLinkOptions are the flux kvs link flags.
type kvsLinkOptions struct {
	ns, targetNS string
	out          kvsCommitOutput
}

func newKVSLinkCmd() *cobra.Command {
	var o kvsLinkOptions
	cmd := &cobra.Command{
		Use:   "link [-N ns] [-T ns] [-O|-s] TARGET LINKNAME",
		Short: "Create a new name for target",
		Long: `Make LINKNAME a symbolic link to TARGET (which need not exist) and commit.
-T names the namespace TARGET is in.`,
		Args: cobra.ExactArgs(2),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			var txn kvs.Txn
			txn.Symlink(args[1], o.targetNS, args[0])
			return o.out.commit(ctx, h, o.ns, 0, &txn, cmd.OutOrStdout())
		}),
	}
	cmd.Flags().StringVarP(&o.ns, "namespace", "N", "", "the link's namespace `NS`")
	cmd.Flags().StringVarP(&o.targetNS, "target-namespace", "T", "", "the target's namespace `NS`")
	o.out.flags(cmd, "link")
	return cmd
}

func newKVSMkdirCmd() *cobra.Command {
	var ns string
	var out kvsCommitOutput
	cmd := &cobra.Command{
		Use:   "mkdir [-N ns] [-O|-s] KEY [KEY...]",
		Short: "Create a directory",
		Long:  `Make each KEY an empty directory (replacing what was there) and commit.`,
		Args:  cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			var txn kvs.Txn
			for _, key := range args {
				txn.Mkdir(key)
			}
			return out.commit(ctx, h, ns, 0, &txn, cmd.OutOrStdout())
		}),
	}
	nsFlag(cmd, &ns)
	out.flags(cmd, "new directory")
	return cmd
}

// newKVSCopyCmd is flux kvs copy, or with name "move" flux kvs move.
func newKVSCopyCmd(name string) *cobra.Command {
	var srcNS, dstNS string
	short := "Copy source key to destination key"
	if name == "move" {
		short = "Move source key to destination key"
	}
	cmd := &cobra.Command{
		Use:   name + " [-S src-ns] [-D dst-ns] SOURCE DESTINATION",
		Short: short,
		Long: `Copy SOURCE to DESTINATION: the destination refers to the same stored
objects, so copying a directory does not walk it. move then unlinks SOURCE
(not atomically).`,
		Args: cobra.ExactArgs(2),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			var err error
			if name == "move" {
				_, err = kvs.Move(ctx, h, srcNS, args[0], dstNS, args[1], 0)
			} else {
				_, err = kvs.Copy(ctx, h, srcNS, args[0], dstNS, args[1], 0)
			}
			if err != nil {
				return fmt.Errorf("flux_kvs_%s: %s", name, errText(err))
			}
			return nil
		}),
	}
	cmd.Flags().StringVarP(&srcNS, "src-namespace", "S", "", "the source key's namespace `NS`")
	cmd.Flags().StringVarP(&dstNS, "dst-namespace", "D", "", "the destination key's namespace `NS`")
	return cmd
}
