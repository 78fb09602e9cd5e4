package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
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
// malformed, or "". The object is first validated as JSON, then its
// top-level members are walked without building a map.
func parseObject(b []byte) (Event, string) {
	if !utf8.Valid(b) {
		return Event{}, "not valid UTF-8"
	}
	if firstNonSpace(b) != '{' {
		return Event{}, "not a JSON object"
	}
	if !json.Valid(b) {
		var v any
		return Event{}, "not a JSON object: " + jsonReason(json.Unmarshal(b, &v))
	}
	var ts, name, ctx []byte
	i := skipSpace(b, 0) + 1 // past '{'
	for {
		i = skipSpace(b, i)
		if b[i] == '}' {
			break
		}
		kEnd := skipValue(b, i)
		key := b[i:kEnd]
		i = skipSpace(b, kEnd) + 1 // past ':'
		i = skipSpace(b, i)
		vEnd := skipValue(b, i)
		switch {
		case keyIs(key, "timestamp"):
			ts = b[i:vEnd]
		case keyIs(key, "name"):
			name = b[i:vEnd]
		case keyIs(key, "context"):
			ctx = b[i:vEnd]
		}
		i = skipSpace(b, vEnd)
		if b[i] == ',' {
			i++
		}
	}

	var e Event
	if ts == nil {
		return Event{}, `missing required key "timestamp"`
	}
	if c := ts[0]; c != '-' && (c < '0' || c > '9') {
		return Event{}, "timestamp is not a number"
	}
	v, err := strconv.ParseFloat(string(ts), 64)
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
	if name[0] != '"' {
		return Event{}, "name is not a string"
	}
	if bytes.IndexByte(name, '\\') < 0 {
		e.Name = string(name[1 : len(name)-1])
	} else if err := json.Unmarshal(name, &e.Name); err != nil {
		return Event{}, "name is not a string"
	}
	if e.Name == "" {
		return Event{}, "name is empty"
	}

	if ctx != nil {
		if ctx[0] != '{' {
			return Event{}, "context is not a JSON object"
		}
		e.Context = bytes.Clone(ctx)
	}
	return e, ""
}

// keyIs reports whether the JSON string token key decodes to want. Keys
// with escapes are decoded; plain ones are compared in place.
func keyIs(key []byte, want string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key[1:len(key)-1]) == want
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == want
}

// The helpers below walk JSON already checked by json.Valid.

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// jsonReason shortens an encoding/json error to its message.
func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
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
