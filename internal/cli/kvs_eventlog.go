package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

func newKVSEventlogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eventlog",
		Short: "Manipulate a KVS eventlog",
		Long:  `Read, append to and wait on RFC 18 eventlogs stored in the KVS.`,
	}
	cmd.AddCommand(newKVSEventlogGetCmd(), newKVSEventlogAppendCmd(), newKVSEventlogWaitCmd())
	return cmd
}

// printEvent prints one event as flux kvs eventlog does: "TIMESTAMP NAME
// CONTEXT" (timestamp with 6 decimals, context as compact JSON), or with
// raw its RFC 18 line.
func printEvent(out io.Writer, e eventlog.Event, raw bool) error {
	if raw {
		line, err := eventlog.Encode(e)
		if err != nil {
			return err
		}
		_, err = out.Write(line)
		return err
	}
	ctx := ""
	if len(e.Context) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, e.Context); err != nil {
			return err
		}
		ctx = " " + b.String()
	}
	_, err := fmt.Fprintf(out, "%f %s%s\n", e.Timestamp, e.Name, ctx)
	return err
}

// kvsEventlogGetOptions are the flux kvs eventlog get flags.
type kvsEventlogGetOptions struct {
	ns                string
	waitcreate, watch bool
	count             int
	raw               bool
}

func newKVSEventlogGetCmd() *cobra.Command {
	var o kvsEventlogGetOptions
	cmd := &cobra.Command{
		Use:   "get [-N ns] [-W] [-w] [-c COUNT] [-u] KEY",
		Short: "Display the contents of a KVS eventlog",
		Long: `Print the events of the eventlog KEY. -W waits for it to be created; -w
then prints events as they are appended until interrupted (or COUNT events
with -c); -u prints the RFC 18 lines as stored.`,
		Args: cobra.ExactArgs(1),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsEventlogGet(ctx, h, o, args[0], cmd.OutOrStdout())
		}),
	}
	nsFlag(cmd, &o.ns)
	f := cmd.Flags()
	f.BoolVarP(&o.waitcreate, "waitcreate", "W", false, "wait for the eventlog to be created")
	f.BoolVarP(&o.watch, "watch", "w", false, "monitor the eventlog")
	f.IntVarP(&o.count, "count", "c", 0, "display at most `COUNT` events")
	f.BoolVarP(&o.raw, "unformatted", "u", false, "show events in RFC 18 form")
	return cmd
}

// eventlogStream delivers the eventlog at key chunk by chunk: once (the
// whole log) unless watching, then each appended chunk.
func eventlogStream(ctx context.Context, h *flux.Handle, ns, key string, watch, waitcreate bool, fn func(chunk []byte) (more bool, err error)) error {
	if !watch && !waitcreate {
		data, err := kvs.GetRaw(ctx, h, ns, key)
		if err != nil {
			return err
		}
		_, err = fn(data)
		return err
	}
	flags := 0
	if watch {
		flags |= kvs.FlagWatch | kvs.FlagWatchAppend
	}
	if waitcreate {
		flags |= kvs.FlagWaitCreate
	}
	w, err := kvs.Watch(h, ns, key, flags)
	if err != nil {
		return err
	}
	defer w.Close()
	cancelled := false
	for {
		data, err := w.NextValue(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if cancelled {
			continue // drain to the end of the stream
		}
		more, err := fn(data)
		if err != nil {
			return err
		}
		if !more {
			if !watch {
				return nil
			}
			w.Cancel()
			cancelled = true
		}
	}
}

func kvsEventlogGet(ctx context.Context, h *flux.Handle, o kvsEventlogGetOptions, key string, out io.Writer) error {
	n := 0
	err := eventlogStream(ctx, h, o.ns, key, o.watch, o.waitcreate, func(chunk []byte) (bool, error) {
		events, err := eventlog.Parse(chunk)
		if err != nil {
			return false, fmt.Errorf("eventlog_decode: %v", err)
		}
		for _, e := range events {
			if o.count > 0 && n >= o.count {
				return false, nil
			}
			if err := printEvent(out, e, o.raw); err != nil {
				return false, err
			}
			n++
		}
		return o.count == 0 || n < o.count, nil
	})
	if err != nil && ctx.Err() == nil {
		return keyErr(key, err)
	}
	return nil
}

func newKVSEventlogAppendCmd() *cobra.Command {
	var ns string
	var ts float64
	cmd := &cobra.Command{
		Use:   "append [-N ns] [-t SECONDS] KEY NAME [CONTEXT...]",
		Short: "Append to a KVS eventlog",
		Long: `Append event NAME to the eventlog KEY. CONTEXT arguments, joined with
spaces, must form a JSON object. -t sets the timestamp (seconds since the
epoch; default now).`,
		Args: cobra.MinimumNArgs(2),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			e := eventlog.Event{Timestamp: ts, Name: args[1]}
			if ts <= 0 {
				e.Timestamp = float64(time.Now().UnixNano()) / 1e9
			}
			if len(args) > 2 {
				e.Context = json.RawMessage(strings.Join(args[2:], " "))
			}
			line, err := eventlog.Encode(e)
			if err != nil {
				return fmt.Errorf("eventlog_entry_create: %v", err)
			}
			var txn kvs.Txn
			txn.Append(args[0], line)
			if _, err := kvs.Commit(ctx, h, ns, 0, &txn); err != nil {
				return fmt.Errorf("flux_kvs_commit: %s", errText(err))
			}
			return nil
		}),
	}
	nsFlag(cmd, &ns)
	cmd.Flags().Float64VarP(&ts, "timestamp", "t", 0, "timestamp in `SECONDS` since the epoch")
	return cmd
}

// kvsWaitEventOptions are the flux kvs eventlog wait-event flags.
type kvsWaitEventOptions struct {
	ns         string
	timeout    string
	raw        bool
	waitcreate bool
	quiet      bool
	verbose    bool
	match      []string
}

func newKVSEventlogWaitCmd() *cobra.Command {
	var o kvsWaitEventOptions
	cmd := &cobra.Command{
		Use:   "wait-event [-N ns] [-t SECONDS] [-u] [-W] [-q] [-v] [-m KEY=VAL] KEY EVENT",
		Short: "Wait for an event in a KVS eventlog",
		Long: `Wait until event EVENT is in the eventlog KEY and print it. -t gives up
after a timeout (FSD: 1.5, 2m ...), -W waits for the eventlog to be
created, -q prints nothing, -v also prints the events before it, -u prints
RFC 18 lines, -m KEY=VAL requires the event's context to have KEY equal to
VAL (a JSON value, or else a string).`,
		Args: cobra.ExactArgs(2),
		RunE: kvsRun(func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error {
			return kvsWaitEvent(ctx, h, o, args[0], args[1], cmd.OutOrStdout())
		}),
	}
	nsFlag(cmd, &o.ns)
	f := cmd.Flags()
	f.StringVarP(&o.timeout, "timeout", "t", "", "give up after `SECONDS`")
	f.BoolVarP(&o.raw, "unformatted", "u", false, "show events in RFC 18 form")
	f.BoolVarP(&o.waitcreate, "waitcreate", "W", false, "wait for the eventlog to be created")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not print the matched event")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "also print the events before the matched one")
	f.StringArrayVarP(&o.match, "match-context", "m", nil, "require context `KEY=VAL`")
	return cmd
}

// contextMatches reports whether e's context has every KEY=VAL of match.
func contextMatches(e eventlog.Event, match []string) bool {
	if len(match) == 0 {
		return true
	}
	var ctx map[string]json.RawMessage
	if e.DecodeContext(&ctx) != nil {
		return false
	}
	for _, m := range match {
		k, v, _ := strings.Cut(m, "=")
		got, ok := ctx[k]
		if !ok {
			return false
		}
		var want, have any
		if json.Unmarshal([]byte(v), &want) != nil {
			want = v
		}
		if json.Unmarshal(got, &have) != nil || fmt.Sprint(have) != fmt.Sprint(want) {
			return false
		}
	}
	return true
}

func kvsWaitEvent(ctx context.Context, h *flux.Handle, o kvsWaitEventOptions, key, name string, out io.Writer) error {
	if o.timeout != "" {
		d, err := fsd.ParseDuration(o.timeout)
		if err != nil {
			return fmt.Errorf("--timeout: %v", err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	got := false
	err := eventlogStream(ctx, h, o.ns, key, true, o.waitcreate, func(chunk []byte) (bool, error) {
		events, err := eventlog.Parse(chunk)
		if err != nil {
			return false, fmt.Errorf("eventlog_decode: %v", err)
		}
		for _, e := range events {
			if e.Name == name && contextMatches(e, o.match) {
				if !o.quiet {
					printEvent(out, e, o.raw)
				}
				got = true
				return false, nil
			}
			if o.verbose {
				printEvent(out, e, o.raw)
			}
		}
		return true, nil
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (err == nil && !got && ctx.Err() == context.DeadlineExceeded):
		return fmt.Errorf("wait-event timeout on event '%s'", name)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("eventlog path %s not found", key)
	case err != nil:
		if ctx.Err() != nil {
			return nil
		}
		return keyErr(key, err)
	case !got && ctx.Err() == nil:
		return fmt.Errorf("event '%s' never received", name)
	}
	return nil
}
