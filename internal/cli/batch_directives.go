package cli

// Submission directives (RFC 36): options embedded in a batch script.
//
// A directive is a line starting with a prefix of non-word characters
// and the tag "flux:" or "FLUX:" (the prefix and tag are the sentinel).
// Every directive of a script uses the same sentinel. Processing starts
// at the first directive and stops at the first non-blank line that does
// not start with the sentinel's prefix; a directive after that is an
// error. The directive text is split into words with POSIX shell quoting,
// "#" starts a comment, and '''...''' or """...""" quote a literal; a
// triple quote that ends a line opens a multi-line literal continued on
// the following directive lines until a line ending with the closing
// triple quote (the newline after the opening quote is dropped and the
// common indentation removed).

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrDirective is the kind of every submission directive error.
var ErrDirective = errors.New("invalid submission directive")

// errOpenTriple reports a triple-quoted literal not closed on its line.
var errOpenTriple = errors.New("unterminated triple-quoted string")

// sentinelOf returns the sentinel (prefix + tag) a line starts with, the
// prefix, and the text after the sentinel; ok is false if the line is
// not a directive.
func sentinelOf(line string) (sentinel, prefix, rest string, ok bool) {
	i := 0
	for i < len(line) {
		r, size := utf8.DecodeRuneInString(line[i:])
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			break
		}
		i += size
	}
	prefix = line[:i]
	for _, tag := range []string{"flux:", "FLUX:"} {
		if strings.HasPrefix(line[i:], tag) {
			n := i + len(tag)
			return line[:n], prefix, line[n:], true
		}
	}
	return "", "", "", false
}

// parseDirectives returns the words of the submission directives of a
// script, in order.
func parseDirectives(script string) ([]string, error) {
	lines := strings.Split(strings.TrimSuffix(script, "\n"), "\n")
	var (
		sentinel, prefix string
		started, stopped bool
		words            []string
		pending          string // an open multi-line literal so far
		pendingLine      int
	)
	for n, raw := range lines {
		line := strings.TrimSuffix(raw, "\r")
		lineno := n + 1
		s, _, rest, isDirective := sentinelOf(line)
		if pending != "" {
			if !isDirective || s != sentinel {
				return nil, fmt.Errorf("%w: line %d: the multi-line string opened on line %d must continue with %q on every line",
					ErrDirective, lineno, pendingLine, sentinel)
			}
			pending += "\n" + rest
			w, err := splitDirective(pending)
			if errors.Is(err, errOpenTriple) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrDirective, pendingLine, err)
			}
			words = append(words, w...)
			pending = ""
			continue
		}
		switch {
		case stopped:
			if isDirective {
				return nil, fmt.Errorf("%w: line %d: orphan directive %q after the directives ended (directives must be grouped together)",
					ErrDirective, lineno, strings.TrimSpace(line))
			}
			continue
		case !started:
			if !isDirective {
				continue
			}
			started = true
			sentinel, prefix, _, _ = sentinelOf(line)
		case isDirective:
			if s != sentinel {
				return nil, fmt.Errorf("%w: line %d: sentinel %q differs from the first directive's %q",
					ErrDirective, lineno, s, sentinel)
			}
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, prefix):
			continue
		default:
			stopped = true
			continue
		}
		w, err := splitDirective(rest)
		if errors.Is(err, errOpenTriple) && endsWithTriple(rest) {
			pending, pendingLine = rest, lineno
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrDirective, lineno, err)
		}
		words = append(words, w...)
	}
	if pending != "" {
		return nil, fmt.Errorf("%w: line %d: unterminated multi-line string", ErrDirective, pendingLine)
	}
	return words, nil
}

func endsWithTriple(s string) bool {
	s = strings.TrimRight(s, " \t")
	return strings.HasSuffix(s, `"""`) || strings.HasSuffix(s, `'''`)
}

// splitDirective splits directive text into words (POSIX shell quoting,
// "#" comments at the start of a word, triple-quoted literals).
func splitDirective(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	end := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			end()
			i++
		case c == '#' && !inWord:
			// a comment runs to the end of the line
			nl := strings.IndexByte(s[i:], '\n')
			if nl < 0 {
				i = len(s)
			} else {
				i += nl
			}
		case strings.HasPrefix(s[i:], `"""`) || strings.HasPrefix(s[i:], `'''`):
			q := s[i : i+3]
			j := strings.Index(s[i+3:], q)
			if j < 0 {
				return nil, errOpenTriple
			}
			body := s[i+3 : i+3+j]
			if strings.HasPrefix(body, "\n") {
				body = dedent(body[1:])
			}
			cur.WriteString(body)
			inWord = true
			i += 3 + j + 3
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '"':
			i++
			closed := false
			for i < len(s) {
				d := s[i]
				if d == '"' {
					closed = true
					i++
					break
				}
				if d == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					if s[i+1] != '\n' {
						cur.WriteByte(s[i+1])
					}
					i += 2
					continue
				}
				cur.WriteByte(d)
				i++
			}
			if !closed {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			if s[i+1] != '\n' {
				cur.WriteByte(s[i+1])
				inWord = true
			}
			i += 2
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	end()
	return words, nil
}

// dedent removes the indentation common to every non-blank line; blank
// lines become empty.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	common := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			common, first = ind, false
			continue
		}
		for !strings.HasPrefix(ind, common) {
			common = common[:len(common)-1]
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			lines[i] = ""
		} else {
			lines[i] = strings.TrimPrefix(l, common)
		}
	}
	return strings.Join(lines, "\n")
}
