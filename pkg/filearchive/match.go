package filearchive

import "unicode/utf8"

// Match reports whether name matches the shell pattern the way fnmatch(3)
// does without flags, which is how flux archive selects files: '*'
// matches any run of characters, '/' included; '?' any one character;
// "[...]" one character of a set ("[!...]" or "[^...]": not of it, "a-z"
// a range); '\' makes the next character literal. A '[' without its ']'
// is a literal '['.
func Match(pattern, name string) bool {
	p, n := runes(pattern), runes(name)
	pi, ni := 0, 0
	// the last '*' seen and where in name its run ends for now: on a
	// mismatch the run grows by one and matching resumes after the '*'
	star, starEnd := -1, 0
	for ni < len(n) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '*':
				star, starEnd = pi, ni
				pi++
				continue
			case '?':
				pi++
				ni++
				continue
			case '[':
				ok, next, valid := matchClass(p, pi+1, n[ni])
				if !valid {
					if n[ni] == '[' {
						pi++
						ni++
						continue
					}
				} else if ok {
					pi = next
					ni++
					continue
				}
			case '\\':
				lit := c
				if pi+1 < len(p) {
					lit = p[pi+1]
				}
				if lit == n[ni] {
					pi += min(2, len(p)-pi)
					ni++
					continue
				}
			default:
				if c == n[ni] {
					pi++
					ni++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		starEnd++
		pi, ni = star+1, starEnd
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchClass matches r against the bracket expression starting at p[i]
// (just past its '['): whether r is in it, the index past its ']', and
// whether the expression is complete.
func matchClass(p []rune, i int, r rune) (matched bool, next int, valid bool) {
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate = true
		i++
	}
	for first := true; i < len(p); first = false {
		if p[i] == ']' && !first {
			return matched != negate, i + 1, true
		}
		lo := p[i]
		if lo == '\\' && i+1 < len(p) {
			i++
			lo = p[i]
		}
		i++
		if i+1 < len(p) && p[i] == '-' && p[i+1] != ']' {
			hi := p[i+1]
			i += 2
			if hi == '\\' && i < len(p) {
				hi = p[i]
				i++
			}
			if lo <= r && r <= hi {
				matched = true
			}
		} else if r == lo {
			matched = true
		}
	}
	return false, 0, false
}

// runes splits s into characters; a byte that is not valid UTF-8 becomes
// a value of its own past the Unicode range, so that two such bytes only
// match if they are equal.
func runes(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			r = utf8.MaxRune + 1 + rune(s[i])
		}
		out = append(out, r)
		i += size
	}
	return out
}
