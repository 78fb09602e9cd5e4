package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/fsd"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// flux resource eventlog (flux-resource(1)): the resource journal, read
// from the resource module's eventlog (resource.eventlog in the KVS).

type resourceEventlogOptions struct {
	eventlogOptions
	follow  bool
	wait    string
	match   []string
	timeout string
	include string
}

func newResourceEventlogCmd() *cobra.Command {
	var o resourceEventlogOptions
	cmd := &cobra.Command{
		Use:   "eventlog [-w EVENT] [-f FORMAT] [-T FORMAT] [-L [WHEN]] [-H] [-F] [-i TARGETS]",
		Short: "Show the resource journal",
		Long: `Print the resource eventlog (RFC 44 events: resource-define, online,
offline, drain, undrain, resource-update ...). --follow keeps printing
events as they are posted; --wait=EVENT waits for EVENT (whose context
matches every --match-context KEY=VAL), prints it and exits.
--include limits the events shown to those naming the given ranks or
hosts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.path = ""
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return resourceEventlog(ctx, h, o, cmd.OutOrStdout())
			})
		},
	}
	addEventlogFormatFlags(cmd, &o.eventlogOptions)
	f := cmd.Flags()
	f.MarkHidden("path")
	f.BoolVarP(&o.follow, "follow", "F", false, "after the current events, print new ones as they are posted")
	f.StringVarP(&o.wait, "wait", "w", "", "wait for `EVENT`, print it and exit")
	f.StringArrayVarP(&o.match, "match-context", "m", nil, "with --wait, only an event whose context has `KEY=VAL` (may be repeated)")
	f.StringVarP(&o.timeout, "timeout", "t", "", "with --wait, fail after `FSD`")
	f.StringVarP(&o.include, "include", "i", "", "only events about `TARGETS` (ranks or hosts)")
	return cmd
}

func resourceEventlog(ctx context.Context, h *flux.Handle, o resourceEventlogOptions, out io.Writer) error {
	ef, err := newEventFormatter(o.format, o.timeFormat, o.human, o.color, out)
	if err != nil {
		return err
	}
	if o.timeout != "" {
		if o.wait == "" {
			return usageError{errors.New("--timeout works with --wait")}
		}
		d, err := fsd.ParseDuration(o.timeout)
		if err != nil {
			return fmt.Errorf("--timeout: %v", err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if len(o.match) > 0 && o.wait == "" {
		return usageError{errors.New("--match-context works with --wait")}
	}
	keep, err := resourceEventFilter(ctx, h, o.include)
	if err != nil {
		return err
	}
	watch := o.follow || o.wait != ""
	got := false
	err = eventlogStream(ctx, h, kvs.PrimaryNamespace, "resource.eventlog", watch, false, func(chunk []byte) (bool, error) {
		events, err := eventlog.Parse(chunk)
		if err != nil {
			return false, err
		}
		var b strings.Builder
		more := true
		for _, ev := range events {
			if !keep(ev) {
				continue
			}
			if o.wait != "" && (ev.Name != o.wait || !contextMatches(ev, o.match)) {
				continue
			}
			line, err := ef.format(ev)
			if err != nil {
				return false, err
			}
			b.WriteString(line + "\n")
			if o.wait != "" {
				got, more = true, false
				break
			}
		}
		if _, err := io.WriteString(out, b.String()); err != nil {
			return false, err
		}
		return more, nil
	})
	switch {
	case o.wait != "" && !got && ctx.Err() == context.DeadlineExceeded:
		return fmt.Errorf("timeout waiting for %s event", o.wait)
	case err != nil && ctx.Err() != nil:
		return nil
	}
	return err
}

// resourceEventFilter returns a test for events about the ranks or hosts
// of targets ("": every event). Events that name no ranks (a
// resource-define, a resource-update) always pass.
func resourceEventFilter(ctx context.Context, h *flux.Handle, targets string) (func(eventlog.Event) bool, error) {
	if targets == "" {
		return func(eventlog.Event) bool { return true }, nil
	}
	ranks, err := idset.Parse(targets)
	if err != nil {
		hl, herr := hostlist.Parse(targets)
		if herr != nil {
			return nil, fmt.Errorf("-i/--include: invalid targets: %s", targets)
		}
		all, err := h.Attr(ctx, "hostlist")
		if err != nil {
			return nil, err
		}
		names, err := hostlist.Parse(all)
		if err != nil {
			return nil, err
		}
		ranks = idset.Set{}
		for i, host := range names.Hosts() {
			for _, want := range hl.Hosts() {
				if host == want {
					ranks.Add(uint(i))
				}
			}
		}
	}
	return func(ev eventlog.Event) bool {
		var c struct {
			Idset *string `json:"idset"`
		}
		if ev.DecodeContext(&c) != nil || c.Idset == nil {
			return true
		}
		s, err := idset.Parse(*c.Idset)
		return err != nil || !s.Intersect(ranks).Empty()
	}, nil
}
