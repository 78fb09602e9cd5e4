// Package eventlog implements the RFC 18 KVS event log format: the
// newline-separated JSON events that record a Flux job's life (the job
// eventlog, guest.exec.eventlog, the output eventlogs ...).
//
// Each event is one line holding a JSON object with a "timestamp" (a
// positive number of seconds since the Unix epoch), a "name" (a string)
// and optionally a "context" (an object), ended by "\n". The log as a whole
// is not JSON.
//
// [Event.Context] is kept as raw JSON: most readers look only at names and
// timestamps, and those that need the context decode it into a type of
// their own with [Event.DecodeContext]. Key order inside a context is
// whatever the writer chose; nothing here depends on it.
//
// Parsing is strict: a malformed line is an error that names the line and
// the rule it broke (a [*SyntaxError]). Keys other than the three above are
// allowed, as Flux allows them, and dropped.
package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Event is one eventlog entry.
type Event struct {
	// Timestamp is in seconds since the Unix epoch (fractions allowed).
	Timestamp float64
	// Name is the event name, e.g. "submit".
	Name string
	// Context is the event's JSON object, or nil if it has none.
	Context json.RawMessage
}

// Sentinel error kinds.
var (
	// ErrFormat: an eventlog, or one line of it, is malformed.
	ErrFormat = errors.New("malformed eventlog")
	// ErrEvent: an event cannot be encoded (bad name, timestamp or
	// context).
	ErrEvent = errors.New("invalid event")
)

// SyntaxError reports a malformed eventlog line. It wraps [ErrFormat].
type SyntaxError struct {
	Line   int    // 1-based line number
	Reason string // which rule the line broke
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("eventlog line %d: %s", e.Line, e.Reason)
}

// Unwrap returns [ErrFormat].
func (e *SyntaxError) Unwrap() error { return ErrFormat }

// New returns an event stamped with the current time. context is nil or
// anything that encodes to a JSON object.
func New(name string, context any) (Event, error) {
	return NewAt(time.Now(), name, context)
}

// NewAt is like [New] with an explicit time.
func NewAt(t time.Time, name string, context any) (Event, error) {
	e := Event{Timestamp: float64(t.UnixNano()) / 1e9, Name: name}
	if context != nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(context); err != nil {
			return Event{}, fmt.Errorf("%w %q: context: %v", ErrEvent, name, err)
		}
		e.Context = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// Time returns the timestamp as a time.Time (to the microsecond, the
// precision a float64 keeps for present-day dates).
func (e Event) Time() time.Time {
	sec, frac := math.Modf(e.Timestamp)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3)
}

// DecodeContext decodes the context into v. An event without a context
// decodes as the empty object, leaving v's fields unset.
func (e Event) DecodeContext(v any) error {
	data := []byte(e.Context)
	if len(data) == 0 {
		data = []byte("{}")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("event %q context: %w", e.Name, err)
	}
	return nil
}

// Validate checks the RFC 18 rules for one event: a positive, finite
// timestamp, a non-empty valid UTF-8 name, and a context that is absent or
// a JSON object.
func (e Event) Validate() error {
	if why := checkTimestamp(e.Timestamp); why != "" {
		return fmt.Errorf("%w %q: %s", ErrEvent, e.Name, why)
	}
	if why := checkName(e.Name); why != "" {
		return fmt.Errorf("%w: %s", ErrEvent, why)
	}
	if len(e.Context) > 0 {
		if why := checkContext(e.Context); why != "" {
			return fmt.Errorf("%w %q: %s", ErrEvent, e.Name, why)
		}
	}
	return nil
}

func checkTimestamp(ts float64) string {
	if math.IsNaN(ts) || math.IsInf(ts, 0) {
		return "timestamp is not a finite number"
	}
	if ts <= 0 {
		return "timestamp must be greater than zero"
	}
	return ""
}

func checkName(name string) string {
	if name == "" {
		return "name is empty"
	}
	if !utf8.ValidString(name) {
		return "name is not valid UTF-8"
	}
	return ""
}

func checkContext(ctx []byte) string {
	if jsonwire.Object(ctx, nil) != nil {
		return "context is not a JSON object"
	}
	return ""
}

// Encode returns e as one eventlog line: compact JSON with the keys in
// the order timestamp, name, context, and a trailing newline.
func Encode(e Event) ([]byte, error) {
	return Append(nil, e)
}

// Append appends the encoded line for e to dst (for instance to an
// eventlog being built up) and returns the extended slice. On error dst is
// returned unchanged.
func Append(dst []byte, e Event) ([]byte, error) {
	out, err := appendObject(dst, e)
	if err != nil {
		return dst, err
	}
	return append(out, '\n'), nil
}

// EncodeAll encodes events as a whole eventlog.
func EncodeAll(events []Event) ([]byte, error) {
	var out []byte
	for _, e := range events {
		var err error
		if out, err = Append(out, e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MarshalJSON encodes e as the JSON object of its eventlog line, without
// the newline.
func (e Event) MarshalJSON() ([]byte, error) {
	return appendObject(nil, e)
}

// UnmarshalJSON decodes one event object with the same rules as [Parse].
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, why := parseObject(b)
	if why != "" {
		return fmt.Errorf("%w: event: %s", ErrFormat, why)
	}
	*e = ev
	return nil
}

func appendObject(dst []byte, e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return dst, err
	}
	dst = append(dst, `{"timestamp":`...)
	dst = appendTimestamp(dst, e.Timestamp)
	dst = append(dst, `,"name":`...)
	dst = jsonwire.AppendPlainString(dst, e.Name)
	if len(e.Context) > 0 {
		dst = append(dst, `,"context":`...)
		buf := bytes.NewBuffer(dst)
		if err := json.Compact(buf, e.Context); err != nil {
			return dst, fmt.Errorf("%w %q: context: %v", ErrEvent, e.Name, err)
		}
		dst = buf.Bytes()
	}
	return append(dst, '}'), nil
}

// appendTimestamp formats ts as Flux does (17 significant digits, no
// trailing zeros, and always a fraction or exponent so it reads back as a
// real): 1796013269.4011328, 1552593348.0.
func appendTimestamp(dst []byte, ts float64) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, ts, 'g', 17, 64)
	if !bytes.ContainsAny(dst[start:], ".e") {
		dst = append(dst, ".0"...)
	}
	return dst
}
