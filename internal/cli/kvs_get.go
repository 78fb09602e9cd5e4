package cli

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// kvsGetOptions are the flux kvs get flags.
type kvsGetOptions struct {
	ns         string
	raw        bool
	treeobj    bool
	at         string
	label      bool
	waitcreate bool
	watch      bool
	uniq       bool
	appendOnly bool
	full       bool
	count      int
}

func newKVSGetCmd() *cobra.Command {
	var o kvsGetOptions
	cmd := &cobra.Command{
		Use:   "get [-N ns] [-r|-t] [-a treeobj] [-l] [-W] [-w] [-u] [-A] [-f] [-c COUNT] KEY [KEY...]",
		Short: "Get value stored under key",
		Long: `Print the value stored under KEY, followed by a newline unless it is empty.
-r prints the value as is, -t the RFC 11 object, -l prefixes "KEY=".
-W waits for KEY to be created; -w prints each new value until interrupted
(or COUNT values with -c), -u only values that changed, -A only appended
data, -f also notices changes made by replacing a parent directory.`,
		Args: cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsGet(ctx, h, o, args, cmd.OutOrStdout())
		}),
	}
	f := cmd.Flags()
	nsFlag(cmd, &o.ns)
	f.BoolVarP(&o.raw, "raw", "r", false, "interpret value(s) as raw data")
	f.BoolVarP(&o.treeobj, "treeobj", "t", false, "show the RFC 11 object")
	f.StringVarP(&o.at, "at", "a", "", "look up relative to RFC 11 snapshot reference `TREEOBJ`")
	f.BoolVarP(&o.label, "label", "l", false, "print KEY= before the value")
	f.BoolVarP(&o.waitcreate, "waitcreate", "W", false, "wait for the key to be created")
	f.BoolVarP(&o.watch, "watch", "w", false, "monitor key writes")
	f.BoolVarP(&o.uniq, "uniq", "u", false, "only monitor key writes that change the value")
	f.BoolVarP(&o.appendOnly, "append", "A", false, "only monitor key appends")
	f.BoolVarP(&o.full, "full", "f", false, "monitor key changes with more complete accuracy")
	f.IntVarP(&o.count, "count", "c", 0, "display at most `COUNT` changes")
	return cmd
}

// printValue writes one looked-up object as flux kvs get does.
func (o *kvsGetOptions) printValue(w io.Writer, key string, obj *treeobj.Object) error {
	if o.label {
		fmt.Fprintf(w, "%s=", key)
	}
	if o.treeobj {
		_, err := fmt.Fprintf(w, "%s\n", obj.Encode())
		return err
	}
	data, err := kvs.ValueOf(key, obj)
	if err != nil {
		return keyErr(key, err)
	}
	if o.raw {
		_, err = w.Write(data)
		return err
	}
	if n := len(data); n > 0 && data[n-1] == 0 {
		data = data[:n-1]
	}
	if len(data) > 0 {
		_, err = fmt.Fprintf(w, "%s\n", data)
	}
	return err
}

func kvsGet(ctx context.Context, h *flux.Handle, o kvsGetOptions, keys []string, out io.Writer) error {
	flags := 0
	if o.treeobj {
		flags |= kvs.FlagTreeObj
	}
	if !o.watch && !o.waitcreate {
		var root *treeobj.Object
		if o.at != "" {
			var err error
			if root, err = treeobj.Decode([]byte(o.at)); err != nil {
				return fmt.Errorf("--at: %w", err)
			}
		}
		for _, key := range keys {
			var obj *treeobj.Object
			var err error
			if root != nil {
				obj, err = kvs.LookupAt(ctx, h, flags, key, root)
			} else {
				obj, err = kvs.Lookup(ctx, h, o.ns, flags, key)
			}
			if err != nil {
				return keyErr(key, err)
			}
			if err := o.printValue(out, key, obj); err != nil {
				return err
			}
		}
		return nil
	}
	if o.at != "" {
		return fmt.Errorf("--at cannot be combined with --watch or --waitcreate")
	}
	if o.watch {
		flags |= kvs.FlagWatch
		if o.full {
			flags |= kvs.FlagWatchFull
		}
		if o.uniq {
			flags |= kvs.FlagWatchUniq
		}
		if o.appendOnly {
			flags |= kvs.FlagWatchAppend
		}
	}
	if o.waitcreate {
		flags |= kvs.FlagWaitCreate
	}
	// All keys are watched at once; the count limit is over all of them.
	var (
		mu    sync.Mutex
		count int
		first error
		wg    sync.WaitGroup
	)
	for _, key := range keys {
		w, err := kvs.Watch(h, o.ns, key, flags)
		if err != nil {
			return keyErr(key, err)
		}
		wg.Add(1)
		go func(key string, w *kvs.Watcher) {
			defer wg.Done()
			defer w.Close()
			for {
				obj, err := w.Next(ctx)
				if err == io.EOF {
					return
				}
				mu.Lock()
				if err == nil {
					err = o.printValue(out, key, obj)
				}
				if err != nil {
					if first == nil {
						first = keyErr(key, err)
					}
					mu.Unlock()
					return
				}
				count++
				limit := o.count > 0 && count >= o.count
				mu.Unlock()
				if limit {
					w.Cancel()
				}
			}
		}(key, w)
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return nil // interrupted
	}
	return first
}

// kvsReadlinkOptions are the flux kvs readlink flags.
type kvsReadlinkOptions struct {
	ns, at          string
	nsOnly, keyOnly bool
}

func newKVSReadlinkCmd() *cobra.Command {
	var o kvsReadlinkOptions
	cmd := &cobra.Command{
		Use:   "readlink [-N ns] [-a treeobj] [-o|-k] KEY [KEY...]",
		Short: "Retrieve the key a link refers to",
		Long: `Print the target of the symlink KEY, as NAMESPACE::TARGET when the link
names a namespace (-o prints only the namespace, -k only the target).`,
		Args: cobra.MinimumNArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsReadlink(ctx, h, o, args, cmd.OutOrStdout())
		}),
	}
	nsFlag(cmd, &o.ns)
	f := cmd.Flags()
	f.StringVarP(&o.at, "at", "a", "", "look up relative to RFC 11 snapshot reference `TREEOBJ`")
	f.BoolVarP(&o.nsOnly, "namespace-only", "o", false, "print only the namespace of a link that names one")
	f.BoolVarP(&o.keyOnly, "key-only", "k", false, "print only the target key")
	return cmd
}

func kvsReadlink(ctx context.Context, h *flux.Handle, o kvsReadlinkOptions, keys []string, out io.Writer) error {
	var root *treeobj.Object
	if o.at != "" {
		var err error
		if root, err = treeobj.Decode([]byte(o.at)); err != nil {
			return fmt.Errorf("--at: %w", err)
		}
	}
	for _, key := range keys {
		var obj *treeobj.Object
		var err error
		if root != nil {
			obj, err = kvs.LookupAt(ctx, h, kvs.FlagReadLink, key, root)
		} else {
			obj, err = kvs.Lookup(ctx, h, o.ns, kvs.FlagReadLink, key)
		}
		if err != nil {
			return keyErr(key, err)
		}
		if obj.Type != treeobj.Symlink {
			return fmt.Errorf("%s: %s", key, strerrorEINVAL)
		}
		switch {
		case o.nsOnly && obj.Namespace != "":
			fmt.Fprintln(out, obj.Namespace)
		case o.keyOnly || obj.Namespace == "":
			fmt.Fprintln(out, obj.Target)
		default:
			fmt.Fprintf(out, "%s::%s\n", obj.Namespace, obj.Target)
		}
	}
	return nil
}

const strerrorEINVAL = "Invalid argument"
