package eventlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Parse decodes a whole eventlog. Empty input is an empty log. Every line,
// the last included, must end with "\n"; an empty line is an error.
func Parse(data []byte) ([]Event, error) {
	if len(data) == 0 {
		return nil, nil
	}
	events := make([]Event, 0, bytes.Count(data, []byte{'\n'})+1)
	for lineno := 1; len(data) > 0; lineno++ {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		if !found {
			return nil, &SyntaxError{Line: lineno, Reason: "last event is not terminated by a newline"}
		}
		e, why := parseLine(line)
		if why != "" {
			return nil, &SyntaxError{Line: lineno, Reason: why}
		}
		events = append(events, e)
		data = rest
	}
	return events, nil
}

// ParseEvent decodes a single event: one line, with or without its
// terminating newline (the form the job-info eventlog watch service sends).
func ParseEvent(line []byte) (Event, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	e, why := parseLine(line)
	if why != "" {
		return Event{}, &SyntaxError{Line: 1, Reason: why}
	}
	return e, nil
}

func parseLine(line []byte) (Event, string) {
	if len(line) == 0 {
		return Event{}, "empty line"
	}
	if bytes.IndexByte(line, '\n') >= 0 {
		return Event{}, "event contains a newline"
	}
	return parseObject(line)
}

// parseObject checks one event object and returns the reason it is
// malformed, or "". The object is scanned by jsonwire, which checks it
// whole and reports its top-level members with their raw values; only
// the three RFC 18 keys are kept.
func parseObject(b []byte) (Event, string) {
	if !utf8.Valid(b) {
		return Event{}, "not valid UTF-8"
	}
	if jsonwire.KindOf(b) != jsonwire.KindObject {
		return Event{}, "not a JSON object"
	}
	var ts, name, ctx []byte
	err := jsonwire.Object(b, func(key, val []byte) error {
		switch string(key) {
		case "timestamp":
			ts = val
		case "name":
			name = val
		case "context":
			ctx = val
		}
		return nil
	})
	if err != nil {
		return Event{}, "not a JSON object: " + jsonReason(err)
	}

	var e Event
	if ts == nil {
		return Event{}, `missing required key "timestamp"`
	}
	if jsonwire.KindOf(ts) != jsonwire.KindNumber {
		return Event{}, "timestamp is not a number"
	}
	v, err := jsonwire.Float(ts)
	if err != nil {
		return Event{}, "timestamp is out of range"
	}
	if why := checkTimestamp(v); why != "" {
		return Event{}, why
	}
	e.Timestamp = v

	if name == nil {
		return Event{}, `missing required key "name"`
	}
	if jsonwire.KindOf(name) != jsonwire.KindString {
		return Event{}, "name is not a string"
	}
	if e.Name, err = jsonwire.String(name); err != nil {
		return Event{}, "name is not a string"
	}
	if e.Name == "" {
		return Event{}, "name is empty"
	}

	if ctx != nil {
		if jsonwire.KindOf(ctx) != jsonwire.KindObject {
			return Event{}, "context is not a JSON object"
		}
		e.Context = bytes.Clone(ctx)
	}
	return e, ""
}

// jsonReason shortens a jsonwire error to its message.
func jsonReason(err error) string {
	var se *jsonwire.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Msg, se.Offset)
	}
	return err.Error()
}

// Decoder reads events one at a time from a stream.
type Decoder struct {
	r    *bufio.Reader
	line int
	err  error
}

// NewDecoder returns a decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReader(r)}
}

// Next returns the next event. At the clean end of the stream it returns
// io.EOF; a final line without its newline is a [*SyntaxError]. After an
// error every later call returns the same error.
func (d *Decoder) Next() (Event, error) {
	if d.err != nil {
		return Event{}, d.err
	}
	lineno := d.line + 1
	line, err := d.r.ReadBytes('\n')
	if len(line) > 0 {
		d.line = lineno
	}
	switch {
	case err == io.EOF && len(line) == 0:
		d.err = io.EOF
		return Event{}, d.err
	case err == io.EOF:
		d.err = &SyntaxError{Line: lineno, Reason: "last event is not terminated by a newline"}
		return Event{}, d.err
	case err != nil:
		d.err = fmt.Errorf("eventlog line %d: %w", lineno, err)
		return Event{}, d.err
	}
	e, why := parseLine(line[:len(line)-1])
	if why != "" {
		d.err = &SyntaxError{Line: lineno, Reason: why}
		return Event{}, d.err
	}
	return e, nil
}

// Line returns the number of lines read so far.
func (d *Decoder) Line() int { return d.line }
