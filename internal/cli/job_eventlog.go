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
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// flux job eventlog [-f FORMAT] [-T TIME-FORMAT] [-H] [-p PATH] ID
// flux job wait-event [-t TIMEOUT] [-m KEY=VAL] [-c COUNT] [-q] [-v] [-W]
//                     [-f FORMAT] [-T TIME-FORMAT] [-H] [-p PATH] ID EVENT

// eventFormatter prints eventlog entries as flux job eventlog does:
// "TIMESTAMP NAME key=value ..." (values compact JSON) or raw JSON.
type eventFormatter struct {
	json    bool
	tsFmt   string // raw, iso, offset, human
	color   bool
	t0      float64
	lastMin int64
	lastTS  float64
}

func newEventFormatter(format, timeFormat string, human bool, color string, out io.Writer) (*eventFormatter, error) {
	if human {
		format, timeFormat = "text", "human"
	}
	ef := &eventFormatter{tsFmt: strings.ToLower(timeFormat), lastMin: -1}
	switch strings.ToLower(format) {
	case "text":
	case "json":
		ef.json = true
	default:
		return nil, fmt.Errorf("invalid format type '%s'", format)
	}
	switch ef.tsFmt {
	case "raw", "iso", "offset", "human":
	case "reltime":
		ef.tsFmt = "human"
	default:
		return nil, fmt.Errorf("invalid time-format type '%s'", timeFormat)
	}
	if color == "" {
		color = "always"
	}
	var err error
	if ef.color, err = useColor(color, out); err != nil {
		return nil, err
	}
	return ef, nil
}

func (ef *eventFormatter) seen(ts float64) {
	if ef.t0 == 0 {
		ef.t0 = ts
	}
}

func (ef *eventFormatter) paint(code, s string) string { return paint(ef.color, code, s) }

const (
	colorBoldGr = sgrBold + sgrGreen
	colorBoldRd = sgrBold + sgrRed
)

func (ef *eventFormatter) timestamp(ts float64) string {
	switch ef.tsFmt {
	case "iso":
		t := time.Unix(0, int64(ts*1e9))
		usec := int64((ts - float64(int64(ts))) * 1e6)
		tz := t.Format("-07:00")
		if _, off := t.Zone(); off == 0 {
			tz = "Z"
		}
		return ef.paint(sgrGreen, fmt.Sprintf("%s.%06d%s", t.Format("2006-01-02T15:04:05"), usec, tz))
	case "offset":
		ef.seen(ts)
		return ef.paint(sgrGreen, fmt.Sprintf("%f", ts-ef.t0))
	case "human":
		t := time.Unix(0, int64(ts*1e9))
		min := t.Unix() / 60
		if min == ef.lastMin {
			return ef.paint(sgrGreen, fmt.Sprintf("[%+11.6f]", ts-ef.lastTS))
		}
		ef.lastMin, ef.lastTS = min, ts
		return ef.paint(colorBoldGr, "["+t.Format("Jan02 15:04")+"]")
	}
	return ef.paint(sgrGreen, fmt.Sprintf("%f", ts))
}

// format renders one event (without the newline).
func (ef *eventFormatter) format(ev eventlog.Event) (string, error) {
	if ef.json {
		b, err := eventlog.Encode(ev)
		return strings.TrimSuffix(string(b), "\n"), err
	}
	var b strings.Builder
	b.WriteString(ef.timestamp(ev.Timestamp))
	b.WriteByte(' ')
	nameColor := sgrYellow
	if ev.Name == "exception" {
		nameColor = colorBoldRd
	}
	b.WriteString(ef.paint(nameColor, ev.Name))
	if len(ev.Context) > 0 {
		kvs, err := orderedObject(ev.Context)
		if err != nil {
			return "", err
		}
		for _, kv := range kvs {
			vc := sgrMagenta
			if len(kv.val) > 0 && (kv.val[0] == '-' || (kv.val[0] >= '0' && kv.val[0] <= '9')) {
				vc = sgrWhite
			}
			b.WriteByte(' ')
			b.WriteString(ef.paint(sgrBlue, kv.key))
			b.WriteByte('=')
			b.WriteString(ef.paint(vc, kv.val))
		}
	}
	return b.String(), nil
}

type keyVal struct{ key, val string }

// orderedObject returns an object's members in document order, values
// as compact JSON.
func orderedObject(raw []byte) ([]keyVal, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("event context is not an object")
	}
	var out []keyVal
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, err
		}
		out = append(out, keyVal{key, buf.String()})
	}
	return out, nil
}

type eventlogOptions struct {
	format, timeFormat, color, path string
	human                           bool
	follow                          bool // flux job eventlog -F
}

func addEventlogFormatFlags(cmd *cobra.Command, o *eventlogOptions) {
	f := cmd.Flags()
	f.StringVarP(&o.format, "format", "f", "text", "Specify output format: text, json")
	f.StringVarP(&o.timeFormat, "time-format", "T", "raw", "Specify time format: raw, iso, offset")
	f.BoolVarP(&o.human, "human", "H", false, "Display human-readable output. See also --color, --format, and --time-format.")
	addColorFlag(f, &o.color, true)
	f.Lookup("color").NoOptDefVal = "always"
	f.StringVarP(&o.path, "path", "p", "eventlog", "Specify alternate eventlog name or path suffix (e.g. \"exec\", \"output\", or \"guest.exec.eventlog\")")
}

func newJobEventlogCmd() *cobra.Command {
	var o eventlogOptions
	cmd := &cobra.Command{
		Use:   "eventlog [-f FORMAT] [-T TIME-FORMAT] [-p PATH] ID",
		Short: "Display eventlog for a job",
		Args:  cobra.ExactArgs(1),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return jobEventlog(ctx, h, args[0], o, cmd.OutOrStdout())
			})
		}),
	}
	addEventlogFormatFlags(cmd, &o)
	cmd.Flags().BoolVarP(&o.follow, "follow", "F", false, "Follow events until job is inactive.")
	return cmd
}

// jobEventlog prints a job's eventlog (read once with job-info.lookup).
func jobEventlog(ctx context.Context, h *flux.Handle, idArg string, o eventlogOptions, out io.Writer) error {
	id, err := parseJobIDArg(idArg)
	if err != nil {
		return err
	}
	ef, err := newEventFormatter(o.format, o.timeFormat, o.human, o.color, out)
	if err != nil {
		return err
	}
	path := job.EventlogPath(o.path)
	notFound := func(err error) error {
		if !errors.Is(err, syscall.ENOENT) {
			return err
		}
		if path == "eventlog" {
			return fmt.Errorf("job %s not found", idArg)
		}
		return fmt.Errorf("eventlog path %s not found", path)
	}
	if o.follow {
		// each event as it comes, until the log is complete
		var werr error
		err := watchEventlogPath(ctx, h, id, path, func(ev eventlog.Event) bool {
			line, err := ef.format(ev)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: failed to print eventlog entry: %v\n", jobProg, err)
				return false
			}
			if _, werr = io.WriteString(out, line+"\n"); werr != nil {
				return true
			}
			return false
		})
		if err != nil {
			return notFound(err)
		}
		return werr
	}
	s, err := job.LookupString(ctx, h, id, path, 0)
	if err != nil {
		return notFound(err)
	}
	events, err := eventlog.Parse([]byte(s))
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, ev := range events {
		line, err := ef.format(ev)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: failed to print eventlog entry: %v\n", jobProg, err)
			continue
		}
		b.WriteString(line + "\n")
	}
	_, err = io.WriteString(out, b.String())
	return err
}

type waitEventOptions struct {
	eventlogOptions
	timeout    string
	match      string
	count      int
	quiet      bool
	verbose    bool
	waitcreate bool
}

func newJobWaitEventCmd() *cobra.Command {
	var o waitEventOptions
	cmd := &cobra.Command{
		Use:   "wait-event [-t TIMEOUT] [-m KEY=VAL] [-q] [-v] [-p PATH] ID EVENT",
		Short: "Wait for an event in a job eventlog",
		Args:  cobra.ExactArgs(2),
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return jobWaitEvent(ctx, h, args[0], args[1], o, cmd.OutOrStdout())
			})
		}),
	}
	addEventlogFormatFlags(cmd, &o.eventlogOptions)
	f := cmd.Flags()
	f.StringVarP(&o.timeout, "timeout", "t", "", "timeout after DURATION")
	f.StringVarP(&o.match, "match-context", "m", "", "match key=val in context")
	f.IntVarP(&o.count, "count", "c", 1, "required number of matches")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "Do not output matched event")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "Output all events before matched event")
	f.BoolVarP(&o.waitcreate, "waitcreate", "W", false, "If path does not exist, wait for its creation")
	return cmd
}

// contextHas reports whether the event context has key with value val
// (compared as compact JSON, or as the string itself).
func contextHas(ev eventlog.Event, key, val string) bool {
	if len(ev.Context) == 0 {
		return false
	}
	kvs, err := orderedObject(ev.Context)
	if err != nil {
		return false
	}
	for _, kv := range kvs {
		if kv.key != key {
			continue
		}
		if kv.val == val {
			return true
		}
		var s string
		if json.Unmarshal([]byte(kv.val), &s) == nil && s == val {
			return true
		}
	}
	return false
}

// jobWaitEvent waits for the COUNT-th event NAME (matching -m) in a job
// eventlog and prints it.
func jobWaitEvent(ctx context.Context, h *flux.Handle, idArg, name string, o waitEventOptions, out io.Writer) error {
	id, err := parseJobIDArg(idArg)
	if err != nil {
		return err
	}
	if o.count <= 0 {
		return fmt.Errorf("count must be > 0")
	}
	ef, err := newEventFormatter(o.format, o.timeFormat, o.human, o.color, out)
	if err != nil {
		return err
	}
	var mkey, mval string
	if o.match != "" {
		var ok bool
		if mkey, mval, ok = strings.Cut(o.match, "="); !ok {
			return fmt.Errorf("must specify a context test as key=value")
		}
	}
	if o.timeout != "" {
		d, err := fsd.ParseDuration(o.timeout)
		if err != nil {
			return fmt.Errorf("invalid timeout %q: %w", o.timeout, err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	path := job.EventlogPath(o.path)
	flags := 0
	if o.waitcreate {
		flags = job.WatchWaitCreate
	}
	w, err := job.WatchEventlog(h, id, path, flags)
	if err != nil {
		return err
	}
	matches := 0
	for {
		ev, err := w.Next(ctx)
		if err == io.EOF {
			return fmt.Errorf("event '%s' never received", name)
		}
		if err != nil {
			switch {
			case ctx.Err() == context.DeadlineExceeded:
				w.Cancel()
				return fmt.Errorf("wait-event timeout on event '%s'", name)
			case errors.Is(err, syscall.ENOENT) && path == "eventlog":
				return fmt.Errorf("job %s not found", idArg)
			case errors.Is(err, syscall.ENOENT):
				return fmt.Errorf("eventlog path %s not found", path)
			}
			return err
		}
		ef.seen(ev.Timestamp)
		if ev.Name == name && (mkey == "" || contextHas(ev, mkey, mval)) {
			matches++
			if matches == o.count {
				if !o.quiet {
					line, err := ef.format(ev)
					if err != nil {
						return err
					}
					fmt.Fprintln(out, line)
				}
				w.Cancel()
				return nil
			}
		}
		if o.verbose {
			line, err := ef.format(ev)
			if err == nil {
				fmt.Fprintln(out, line)
			}
		}
	}
}
