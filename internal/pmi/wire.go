package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxLine bounds one wire message (a line). Longer lines are a protocol
// error on either side.
const MaxLine = 64 * 1024

// Message is one PMI-1 wire message: the command (the value of cmd=, or
// of mcmd= for the multi-line spawn request) and its other key=value
// tuples in the order they appeared.
type Message struct {
	Cmd string
	// Multi is set when the command came as mcmd= (the first line of a
	// multi-line request such as spawn).
	Multi bool
	Keys  []string
	vals  map[string]string
}

// NewMessage starts a message for cmd; add tuples with Set.
func NewMessage(cmd string) *Message {
	return &Message{Cmd: cmd, vals: make(map[string]string)}
}

// Set adds key=value, or replaces the value of a key already set.
func (m *Message) Set(key, value string) *Message {
	if m.vals == nil {
		m.vals = make(map[string]string)
	}
	if _, ok := m.vals[key]; !ok {
		m.Keys = append(m.Keys, key)
	}
	m.vals[key] = value
	return m
}

// SetInt adds key=n.
func (m *Message) SetInt(key string, n int) *Message { return m.Set(key, strconv.Itoa(n)) }

// Get returns the value of key and whether it was present.
func (m *Message) Get(key string) (string, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// Int returns the integer value of key.
func (m *Message) Int(key string) (int, error) {
	v, ok := m.vals[key]
	if !ok {
		return 0, fmt.Errorf("%w: cmd=%s: missing %s=", ErrProtocol, m.Cmd, key)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(v, "+"))
	if err != nil {
		return 0, fmt.Errorf("%w: cmd=%s: %s=%q is not an integer", ErrProtocol, m.Cmd, key, v)
	}
	return n, nil
}

// String renders the message as it goes on the wire, with the trailing
// newline: "cmd=NAME k1=v1 k2=v2\n".
func (m *Message) String() string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(m.Cmd)
	for _, k := range m.Keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m.vals[k])
	}
	b.WriteByte('\n')
	return b.String()
}

// ParseMessage parses one wire message (with or without its newline).
// Following RFC 13's advice to parsers, tuples may come in any order,
// with extra white space between them, and cmd= need not be first. A
// token without '=' continues the previous tuple's value, so string-valued
// keys such as msg= may hold spaces ("msg=no such key"). A line without
// cmd= (or mcmd=), a repeated key, or an empty key is an error.
func ParseMessage(line string) (*Message, error) {
	line = strings.TrimSuffix(line, "\n")
	m := &Message{vals: make(map[string]string)}
	last := ""     // key of the previous tuple
	lastStart := 0 // where its value starts in line
	haveCmd := false
	i := 0
	for i < len(line) {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		tok := line[i:j]
		k, v, ok := strings.Cut(tok, "=")
		switch {
		case !ok:
			if last == "" {
				return nil, fmt.Errorf("%w: %q: token %q is not key=value", ErrProtocol, line, tok)
			}
			// Continue the previous value, keeping the original spacing.
			if last == "cmd" || last == "mcmd" {
				return nil, fmt.Errorf("%w: %q: command name has a space", ErrProtocol, line)
			}
			m.vals[last] = line[lastStart:j]
		case k == "":
			return nil, fmt.Errorf("%w: %q: empty key in %q", ErrProtocol, line, tok)
		case k == "cmd" || k == "mcmd":
			if haveCmd {
				return nil, fmt.Errorf("%w: %q: more than one cmd=", ErrProtocol, line)
			}
			if v == "" {
				return nil, fmt.Errorf("%w: %q: empty command", ErrProtocol, line)
			}
			haveCmd = true
			m.Cmd, m.Multi = v, k == "mcmd"
			last, lastStart = k, i+len(k)+1
		default:
			if _, dup := m.vals[k]; dup {
				return nil, fmt.Errorf("%w: %q: key %q repeated", ErrProtocol, line, k)
			}
			m.Keys = append(m.Keys, k)
			m.vals[k] = v
			last, lastStart = k, i+len(k)+1
		}
		i = j
	}
	if !haveCmd {
		return nil, fmt.Errorf("%w: %q: no cmd=", ErrProtocol, line)
	}
	return m, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// readLine reads one newline-terminated line of at most MaxLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > MaxLine {
			return "", fmt.Errorf("%w: message longer than %d bytes", ErrProtocol, MaxLine)
		}
		if err == nil {
			return string(b), nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(b) > 0 {
			return "", fmt.Errorf("%w: connection closed mid-message", io.ErrUnexpectedEOF)
		}
		return "", err
	}
}

// validWord reports whether s is an RFC 13 "word": one or more visible
// ASCII characters other than '='.
func validWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '=' {
			return false
		}
	}
	return true
}

// validValue reports whether s may be stored in the PMI KVS: RFC 13
// restricts values to ASCII 33..126; the empty string is valid.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
