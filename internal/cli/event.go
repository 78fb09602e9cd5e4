package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

func newEventCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "event",
		Short: "Publish and subscribe to Flux events",
		Long: `Flux events are broadcast to every subscriber in the instance. A
subscription to topic T matches every event whose topic starts with T; the
empty subscription matches all events.`,
	}
	cmd.AddCommand(newEventPubCmd(), newEventSubCmd())
	return cmd
}

// eventPubOptions are the flux event pub flags.
type eventPubOptions struct {
	raw      bool
	sync     bool
	loopback bool
	private  bool
	guest    bool // not the instance owner (see notSocketOwner)
}

func newEventPubCmd() *cobra.Command {
	var o eventPubOptions
	cmd := &cobra.Command{
		Use:   "pub [OPTIONS] TOPIC [PAYLOAD...]",
		Short: "Publish an event",
		Long: `Publish an event on TOPIC. PAYLOAD, if given, is JSON unless --raw; several
PAYLOAD arguments are joined with single spaces.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var payload []byte
			if len(args) > 1 {
				payload = []byte(strings.Join(args[1:], " "))
			}
			uri, _ := enclosingURI()
			o.guest = notSocketOwner(uri)
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return eventPub(ctx, h, args[0], payload, o)
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.BoolVarP(&o.raw, "raw", "r", false, "send the payload as raw bytes instead of JSON")
	f.BoolVarP(&o.sync, "synchronous", "s", false, "wait until the event has been given its sequence number")
	f.BoolVarP(&o.loopback, "loopback", "l", false, "wait until the event comes back to this command")
	f.BoolVarP(&o.private, "private", "p", false, "mark the event private (owner and sender only)")
	return cmd
}

// notSocketOwner reports whether a local:// uri's socket belongs to
// another user than ours (we are a guest of that instance); false when
// it cannot tell.
func notSocketOwner(uri string) bool {
	path, ok := strings.CutPrefix(uri, "local://")
	if !ok {
		return false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) != os.Getuid()
}

// eventPub publishes one event. payload nil means none.
func eventPub(ctx context.Context, h *flux.Handle, topic string, payload []byte, o eventPubOptions) error {
	if topic == "" {
		return fmt.Errorf("topic must not be empty")
	}
	if payload != nil && !o.raw {
		var v any
		if err := json.Unmarshal(payload, &v); err != nil {
			return fmt.Errorf("payload is not valid JSON (use --raw for other data): %v", err)
		}
	}
	if o.raw && o.sync {
		return fmt.Errorf("--raw cannot be combined with --synchronous: the event.pub service takes JSON payloads")
	}
	var sub *flux.Subscription
	if o.loopback {
		var err error
		if sub, err = h.Subscribe(ctx, topic); err != nil {
			return fmt.Errorf("subscribe %s: %w", topic, err)
		}
	}
	var seq uint32
	switch {
	case o.sync || (o.loopback && !o.raw) || (o.guest && !o.raw && strings.Contains(topic, ".")):
		// (a guest's event may be refused, in a service's namespace:
		// event.pub says so, where a bare event would be dropped)
		// The sequence number lets --loopback pick out our own event.
		var p any
		if payload != nil {
			p = json.RawMessage(payload)
		}
		var err error
		if seq, err = h.PublishSync(ctx, topic, p, o.private); err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
	default:
		m := message.New(message.Event, topic)
		m.Flags |= message.FlagRoute
		if o.private {
			m.Flags |= message.FlagPrivate
		}
		if payload != nil {
			if o.raw {
				m.SetPayload(payload)
			} else {
				m.SetJSON(payload)
			}
		}
		if err := h.Send(m); err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
		// One round trip to the local broker: it reads a connection's
		// messages in order, so once this answers the event has been
		// handed on, and an event published next by another command
		// can't overtake it.
		if err := h.Call(ctx, "broker.ping", flux.NodeidAny, map[string]any{}, nil); err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
	}
	if sub == nil {
		return nil
	}
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s to loop back: %w", topic, err)
		}
		if m.Topic != topic {
			continue
		}
		if seq != 0 && m.Seq == seq {
			return nil
		}
		if seq == 0 && bytes.Equal(m.JSON(), bytes.TrimSuffix(payload, []byte{0})) {
			return nil
		}
	}
}

func newEventSubCmd() *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "sub [--count=N] [TOPIC...]",
		Short: "Print events as they arrive",
		Long: `Subscribe to events whose topic starts with one of the TOPICs (all events
when none is given) and print each on one line: the topic, then a tab and
the payload if there is one.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return fmt.Errorf("--count=%d: must be >= 0", count)
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return eventSub(ctx, h, args, count, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().IntVarP(&count, "count", "c", 0, "exit after printing `N` events")
	return cmd
}

// eventSub prints events matching topics (all when empty) until count
// have been printed (0: until ctx ends).
func eventSub(ctx context.Context, h *flux.Handle, topics []string, count int, w io.Writer) error {
	if len(topics) == 0 {
		topics = []string{""}
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	printed := 0
	var last *flux.Message
	show := func(m *flux.Message) {
		// An event matching several TOPICs reaches every handler in
		// turn as the same message: print it once.
		if m == last || (count > 0 && printed >= count) {
			return
		}
		last = m
		fmt.Fprintln(w, formatEvent(m))
		printed++
		if count > 0 && printed == count {
			cancel()
		}
	}
	for _, t := range topics {
		if err := h.OnEvent(ctx, t, show); err != nil {
			return fmt.Errorf("subscribe %q: %w", t, err)
		}
	}
	err := h.Serve(ctx)
	if count > 0 && printed == count {
		return nil
	}
	if parent.Err() != nil || errors.Is(err, context.Canceled) {
		return nil // interrupted
	}
	return err
}

// formatEvent is "topic" or "topic<TAB>payload".
func formatEvent(m *flux.Message) string {
	p := m.JSON()
	if len(p) == 0 {
		return m.Topic
	}
	return m.Topic + "\t" + string(p)
}
