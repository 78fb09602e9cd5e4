package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// The output formats of flux jobs and flux pgrep use Python's format
// string syntax ("{id.f58:>12} {name:<10.10+}"), with flux's extras:
// conversions !d !D !F !H !P, the "h" spec suffix (empty-ish values print
// as "-"), the "+" suffix (mark truncation with "+"), "?:" before a field
// (drop the column when it is empty for every row), "+:" (widen the
// column to its widest value) and "?+:" (both). This file is that engine; the fields come
// from the command (see jobs.go).

// fmtKind is the type of a formatted value, which decides default
// alignment and number formatting as Python does.
type fmtKind uint8

const (
	fmtStr fmtKind = iota
	fmtInt
	fmtFloat
	fmtBool
	fmtTime // a timestamp converted by !d (strftime formatting)
)

// fmtVal is one field value.
type fmtVal struct {
	kind fmtKind
	s    string
	i    int64
	f    float64
	b    bool
}

func vStr(s string) fmtVal        { return fmtVal{kind: fmtStr, s: s} }
func vInt(i int64) fmtVal         { return fmtVal{kind: fmtInt, i: i} }
func vFloat(f float64) fmtVal     { return fmtVal{kind: fmtFloat, f: f} }
func vBool(b bool) fmtVal         { return fmtVal{kind: fmtBool, b: b} }
func vEmpty() fmtVal              { return fmtVal{kind: fmtStr} }
func (v fmtVal) isEmptyStr() bool { return v.kind == fmtStr && v.s == "" }

// String is Python's str() of the value.
func (v fmtVal) String() string {
	switch v.kind {
	case fmtInt:
		return strconv.FormatInt(v.i, 10)
	case fmtFloat:
		return pyFloatStr(v.f)
	case fmtBool:
		if v.b {
			return "True"
		}
		return "False"
	case fmtTime:
		return time.Unix(0, int64(v.f*1e9)).Format("2006-01-02 15:04:05.000000")
	}
	return v.s
}

// pyFloatStr formats f as Python's repr does: shortest digits, always a
// decimal point or exponent, scientific below 1e-4 or from 1e16.
func pyFloatStr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Python writes e+16 / e-05 with at least two exponent digits
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		digits := exp[1:]
		if len(digits) < 2 {
			digits = "0" + digits
		}
		return mant + "e" + string(sign) + digits
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyFSD formats a duration as flux's Python tools do.
func pyFSD(secs float64) string {
	switch {
	case math.IsInf(secs, 1):
		return "inf"
	case secs < 1e-3:
		return "0s"
	case secs < 10:
		return fmt.Sprintf("%.03fs", secs)
	case secs < 60:
		return pyG4(secs) + "s"
	case secs < 3600:
		return pyG4(secs/60) + "m"
	case secs < 86400:
		return pyG4(secs/3600) + "h"
	}
	return pyG4(secs/86400) + "d"
}

// pyG4 is C's "%.4g".
func pyG4(f float64) string {
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// pyHMS formats seconds as Python's str(timedelta(seconds=round(x))).
func pyHMS(secs float64) string {
	if secs > 0 && secs < 1 {
		secs = 1
	}
	n := int64(math.RoundToEven(secs))
	neg := n < 0
	days := n / 86400
	rem := n % 86400
	if neg && rem != 0 {
		days--
		rem += 86400
	}
	h, m, s := rem/3600, (rem%3600)/60, rem%60
	hms := fmt.Sprintf("%d:%02d:%02d", h, m, s)
	if days == 0 {
		return hms
	}
	unit := "days"
	if days == 1 || days == -1 {
		unit = "day"
	}
	return fmt.Sprintf("%d %s, %s", days, unit, hms)
}

// emptyOutputs are the strings "h" prints as "-" and "?:" drops.
var emptyOutputs = map[string]bool{"": true, "0s": true, "0.0": true, "0:00:00": true, "1970-01-01T00:00:00": true}

// fmtField is one parsed field of a format.
type fmtField struct {
	text   string // literal text before the field
	name   string // "" for trailing text only
	conv   string
	spec   string
	expand bool // "+:" prefix
	drop   bool // "?:" prefix
}

// parseFormat splits a Python format string into fields.
func parseFormat(s string) ([]fmtField, error) {
	var out []fmtField
	var text strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				text.WriteByte('{')
				i++
				continue
			}
			depth := 1
			j := i + 1
			for ; j < len(s) && depth > 0; j++ {
				switch s[j] {
				case '{':
					depth++
				case '}':
					depth--
				}
			}
			if depth != 0 {
				return nil, fmt.Errorf("invalid format %q: unmatched '{'", s)
			}
			body := s[i+1 : j-1]
			f := fmtField{text: text.String()}
			text.Reset()
			name, rest := body, ""
			if k := strings.IndexAny(body, "!:"); k >= 0 {
				name, rest = body[:k], body[k:]
			}
			if strings.HasPrefix(rest, "!") {
				rest = rest[1:]
				conv, spec, _ := strings.Cut(rest, ":")
				f.conv = conv
				f.spec = spec
				if len(conv) != 1 {
					return nil, fmt.Errorf("invalid format %q: bad conversion %q", s, conv)
				}
			} else if strings.HasPrefix(rest, ":") {
				f.spec = rest[1:]
			}
			if name == "" {
				return nil, fmt.Errorf("invalid format %q: empty field name", s)
			}
			f.name = name
			switch {
			case strings.HasSuffix(f.text, "?+:"):
				// both: dropped when empty everywhere, else widened
				f.drop, f.expand = true, true
				f.text = strings.TrimSuffix(f.text, "?+:")
			case strings.HasSuffix(f.text, "?:"):
				f.drop = true
				f.text = strings.TrimSuffix(f.text, "?:")
			case strings.HasSuffix(f.text, "+:"):
				f.expand = true
				f.text = strings.TrimSuffix(f.text, "+:")
			}
			out = append(out, f)
			i = j - 1
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				text.WriteByte('}')
				i++
				continue
			}
			return nil, fmt.Errorf("invalid format %q: single '}'", s)
		default:
			text.WriteByte(c)
		}
	}
	if text.Len() > 0 {
		out = append(out, fmtField{text: text.String()})
	}
	return out, nil
}

// fmtSpec is a parsed Python format spec.
type fmtSpec struct {
	fill      rune
	align     byte // 0, '<', '>', '^', '='
	sign      byte
	zero      bool
	width     int
	comma     bool
	precision int // -1: none
	typ       byte
	hyphen    bool // "h" suffix
	plus      bool // "+" suffix
	timefmt   string
	isTime    bool
}

var specRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:(.)?([<>=^]))?([+\- ])?(#)?(0)?(\d+)?([,_])?(?:\.(\d+))?([bcdeEfFgGnosxX%])?$`)
})

// parseSpec parses spec; for !d values the part before "::" is a
// strftime format.
func parseSpec(spec string, isTime bool) (fmtSpec, error) {
	ps := fmtSpec{precision: -1, fill: ' '}
	if isTime {
		ps.isTime = true
		tf, rest, found := strings.Cut(spec, "::")
		ps.timefmt = tf
		if !found {
			return ps, nil
		}
		spec = rest
	}
	if strings.HasSuffix(spec, "+") {
		ps.plus = true
		spec = spec[:len(spec)-1]
	}
	if strings.HasSuffix(spec, "h") {
		ps.hyphen = true
		spec = spec[:len(spec)-1]
	}
	m := specRE().FindStringSubmatch(spec)
	if m == nil {
		return ps, fmt.Errorf("Invalid format specifier %q", spec) // Python's words
	}
	if m[2] != "" {
		ps.align = m[2][0]
		if m[1] != "" {
			ps.fill, _ = utf8.DecodeRuneInString(m[1])
		}
	}
	if m[3] != "" {
		ps.sign = m[3][0]
	}
	ps.zero = m[5] != ""
	if m[6] != "" {
		ps.width, _ = strconv.Atoi(m[6])
	}
	ps.comma = m[7] != ""
	if m[8] != "" {
		ps.precision, _ = strconv.Atoi(m[8])
	}
	if m[9] != "" {
		ps.typ = m[9][0]
	}
	return ps, nil
}

// convert applies a !conversion.
func convert(v fmtVal, conv string) (fmtVal, error) {
	switch conv {
	case "":
		return v, nil
	case "s", "r":
		if conv == "r" && v.kind == fmtStr {
			return vStr("'" + v.s + "'"), nil
		}
		return vStr(v.String()), nil
	case "d":
		switch v.kind {
		case fmtFloat:
			return fmtVal{kind: fmtTime, f: v.f}, nil
		case fmtInt:
			return fmtVal{kind: fmtTime, f: float64(v.i)}, nil
		}
		if v.isEmptyStr() {
			return fmtVal{kind: fmtTime, f: 0}, nil
		}
	case "D":
		switch v.kind {
		case fmtFloat, fmtInt:
			t := v.f
			if v.kind == fmtInt {
				t = float64(v.i)
			}
			if t == 0 {
				return vStr(""), nil
			}
			return vStr(time.Unix(int64(t), 0).Format("2006-01-02T15:04:05")), nil
		}
		if v.isEmptyStr() {
			return vStr(""), nil
		}
	case "F":
		switch v.kind {
		case fmtFloat:
			return vStr(pyFSD(v.f)), nil
		case fmtInt:
			return vStr(pyFSD(float64(v.i))), nil
		}
		if v.isEmptyStr() {
			return vStr(""), nil
		}
	case "H":
		switch v.kind {
		case fmtFloat:
			return vStr(pyHMS(v.f)), nil
		case fmtInt:
			return vStr(pyHMS(float64(v.i))), nil
		}
		if v.isEmptyStr() {
			return vStr(""), nil
		}
	case "P":
		var f float64
		switch v.kind {
		case fmtFloat:
			f = v.f
		case fmtInt:
			f = float64(v.i)
		default:
			if v.isEmptyStr() {
				return vStr(""), nil
			}
			return v, fmt.Errorf("!P needs a number")
		}
		f *= 100
		if f > 0 && f < 1 {
			return vStr(fmt.Sprintf("%.2f%%", f)), nil
		}
		return vStr(strconv.FormatFloat(f, 'g', 3, 64) + "%"), nil
	default:
		return v, fmt.Errorf("unknown conversion !%s", conv)
	}
	return v, fmt.Errorf("conversion !%s does not apply to %q", conv, v.String())
}

// runeLen counts characters as Python does (code points).
func runeLen(s string) int { return utf8.RuneCountInString(s) }

func truncRunes(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

func pad(s string, ps fmtSpec, defAlign byte) string {
	n := runeLen(s)
	if ps.width <= n {
		return s
	}
	align := ps.align
	if align == 0 {
		align = defAlign
	}
	fill := fillString(ps.fill, ps.width-n)
	switch align {
	case '>':
		return fill + s
	case '^':
		left := (ps.width - n) / 2
		return fillString(ps.fill, left) + s + fillString(ps.fill, ps.width-n-left)
	case '=':
		if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
			return s[:1] + fill + s[1:]
		}
		return fill + s
	}
	return s + fill
}

// spaces serves the usual fill without an allocation per field.
const spaces = "                                                                "

// fillString returns n copies of the fill character.
func fillString(fill rune, n int) string {
	if fill == ' ' && n <= len(spaces) {
		return spaces[:n]
	}
	return strings.Repeat(string(fill), n)
}

// formatValue applies a spec to a converted value (Python's format()).
func formatValue(v fmtVal, ps fmtSpec) string {
	if v.kind == fmtTime {
		var s string
		if v.f != 0 {
			s = strftime(time.Unix(0, int64(v.f*1e9)), ps.timefmt)
		}
		if ps.hyphen && s == "" {
			s = "-"
		}
		if ps.precision >= 0 {
			s = truncRunes(s, ps.precision)
		}
		return pad(s, ps, '<')
	}
	if ps.hyphen {
		s := v.String()
		if emptyOutputs[s] {
			s = "-"
		}
		v = vStr(s)
	}
	var out string
	switch v.kind {
	case fmtStr:
		s := v.s
		if ps.precision >= 0 {
			s = truncRunes(s, ps.precision)
		}
		out = pad(s, ps, '<')
		if ps.plus && runeLen(out) < runeLen(v.s) {
			out = truncRunes(out, runeLen(out)-1) + "+"
		}
		return out
	case fmtBool:
		if ps.typ == 0 && ps.width == 0 && ps.precision < 0 {
			return v.String()
		}
		if ps.typ == 0 || ps.typ == 's' {
			return pad(v.String(), ps, '<')
		}
		if v.b {
			v = vInt(1)
		} else {
			v = vInt(0)
		}
		fallthrough
	case fmtInt:
		var s string
		switch ps.typ {
		case 'x':
			s = strconv.FormatInt(v.i, 16)
		case 'X':
			s = strings.ToUpper(strconv.FormatInt(v.i, 16))
		case 'o':
			s = strconv.FormatInt(v.i, 8)
		case 'b':
			s = strconv.FormatInt(v.i, 2)
		case 'f', 'F', 'e', 'E', 'g', 'G', '%':
			return formatValue(vFloat(float64(v.i)), ps)
		case 's':
			s = v.String()
		default:
			s = strconv.FormatInt(v.i, 10)
			if ps.comma {
				s = groupThousands(s)
			}
		}
		if ps.sign == '+' && v.i >= 0 {
			s = "+" + s
		} else if ps.sign == ' ' && v.i >= 0 {
			s = " " + s
		}
		if ps.zero && ps.align == 0 {
			ps.fill, ps.align = '0', '='
		}
		return pad(s, ps, '>')
	case fmtFloat:
		var s string
		prec := ps.precision
		switch ps.typ {
		case 'f', 'F':
			if prec < 0 {
				prec = 6
			}
			s = strconv.FormatFloat(v.f, 'f', prec, 64)
		case 'e', 'E':
			if prec < 0 {
				prec = 6
			}
			s = strconv.FormatFloat(v.f, 'e', prec, 64)
		case 'g', 'G':
			if prec < 0 {
				prec = 6
			}
			s = strconv.FormatFloat(v.f, 'g', prec, 64)
		case '%':
			if prec < 0 {
				prec = 6
			}
			s = strconv.FormatFloat(v.f*100, 'f', prec, 64) + "%"
		case 's':
			s = v.String()
		default:
			if prec >= 0 {
				s = strconv.FormatFloat(v.f, 'g', prec, 64)
			} else {
				s = pyFloatStr(v.f)
			}
		}
		if ps.sign == '+' && v.f >= 0 {
			s = "+" + s
		}
		if ps.zero && ps.align == 0 {
			ps.fill, ps.align = '0', '='
		}
		return pad(s, ps, '>')
	}
	return v.String()
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// strftime implements the common C strftime conversions.
func strftime(t time.Time, f string) string {
	if f == "" {
		f = "%FT%T"
	}
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'f':
			fmt.Fprintf(&b, "%06d", t.Nanosecond()/1000)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b', 'h':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'R':
			fmt.Fprintf(&b, "%02d:%02d", t.Hour(), t.Minute())
		case 'T':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'F':
			fmt.Fprintf(&b, "%d-%02d-%02d", t.Year(), int(t.Month()), t.Day())
		case 'D':
			fmt.Fprintf(&b, "%02d/%02d/%02d", int(t.Month()), t.Day(), t.Year()%100)
		case 's':
			fmt.Fprintf(&b, "%d", t.Unix())
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// fieldSource resolves field names for one kind of item.
type fieldSource[T any] struct {
	// get returns a getter for a field name, or an error if unknown.
	get func(name string) (func(T) fmtVal, error)
	// heading returns the column header of a field.
	heading func(name string) string
	// printable: values come from users (job names ...), so their
	// control characters print as '?' (appendPrintable); a source whose
	// values are the command's own (colours) leaves it unset.
	printable bool
}

// outputFormat is a compiled format for items of type T.
type outputFormat[T any] struct {
	fields  []fmtField
	getters []func(T) fmtVal
	specs   []fmtSpec
	src     fieldSource[T]
	// sortKeys are the keys of a "sort:KEY[,KEY...] " prefix of the
	// format (flux-core's output formats take one), for commands that
	// sort.
	sortKeys string
}

func compileFormat[T any](format string, src fieldSource[T]) (*outputFormat[T], error) {
	var sortKeys string
	if rest, ok := strings.CutPrefix(format, "sort:"); ok {
		sortKeys, format, _ = strings.Cut(rest, " ")
		if sortKeys == "" {
			return nil, fmt.Errorf("empty sort: prefix")
		}
	}
	fields, err := parseFormat(format)
	if err != nil {
		return nil, err
	}
	of := &outputFormat[T]{fields: fields, src: src, sortKeys: sortKeys}
	for _, f := range fields {
		if f.name == "" {
			of.getters = append(of.getters, nil)
			of.specs = append(of.specs, fmtSpec{})
			continue
		}
		g, err := src.get(f.name)
		if err != nil {
			return nil, err
		}
		ps, err := parseSpec(f.spec, f.conv == "d")
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.name, err)
		}
		of.getters = append(of.getters, g)
		of.specs = append(of.specs, ps)
	}
	return of, nil
}

// value returns field i of item, converted.
func (of *outputFormat[T]) value(i int, item T) (fmtVal, error) {
	v := of.getters[i](item)
	return convert(v, of.fields[i].conv)
}

// prepare drops "?:" fields that are empty for every item and widens
// "+:" fields to their widest value.
func (of *outputFormat[T]) prepare(items []T) error { return of.prepareHeader(items, true) }

// prepareHeader is prepare; with header, an expandable field is also at
// least as wide as its heading (flux-core's OutputFormat does the same).
func (of *outputFormat[T]) prepareHeader(items []T, header bool) error {
	keep := make([]bool, len(of.fields))
	for i, f := range of.fields {
		if !f.drop {
			keep[i] = true
			continue
		}
		for _, it := range items {
			v, err := of.value(i, it)
			if err != nil {
				return err
			}
			s := v.String()
			if v.kind == fmtTime {
				if v.f != 0 {
					s = "x"
				} else {
					s = ""
				}
			}
			if !emptyOutputs[s] {
				keep[i] = true
				break
			}
		}
	}
	var fields []fmtField
	var getters []func(T) fmtVal
	var specs []fmtSpec
	for i := range of.fields {
		if keep[i] {
			fields = append(fields, of.fields[i])
			getters = append(getters, of.getters[i])
			specs = append(specs, of.specs[i])
		}
	}
	of.fields, of.getters, of.specs = fields, getters, specs
	for i, f := range of.fields {
		if !f.expand {
			continue
		}
		ps := of.specs[i]
		raw := ps
		raw.width, raw.precision, raw.plus = 0, -1, false
		maxw := 0
		if header {
			maxw = runeLen(of.src.heading(f.name))
		}
		for _, it := range items {
			v, err := of.value(i, it)
			if err != nil {
				return err
			}
			if n := runeLen(formatValue(v, raw)); n > maxw {
				maxw = n
			}
		}
		if maxw > ps.width {
			ps.width = maxw
		}
		if ps.precision >= 0 && maxw > ps.precision {
			ps.precision = maxw
		}
		of.specs[i] = ps
	}
	return nil
}

// header returns the header line: headings with each field's fill,
// alignment and width only.
func (of *outputFormat[T]) header() string {
	var b strings.Builder
	for i, f := range of.fields {
		b.WriteString(f.text)
		if f.name == "" {
			continue
		}
		ps := of.specs[i]
		hs := fmtSpec{fill: ' ', align: ps.align, width: ps.width, precision: -1}
		if ps.isTime {
			// width and alignment come after "::" in a time spec
			hs.align, hs.width = ps.align, ps.width
		}
		b.WriteString(pad(of.src.heading(f.name), hs, '<'))
	}
	return b.String()
}

// line formats one item.
func (of *outputFormat[T]) line(item T) (string, error) {
	b, err := of.appendLine(nil, item)
	return string(b), err
}

// appendLine appends one formatted item to b (long listings format
// straight into their output buffer).
func (of *outputFormat[T]) appendLine(b []byte, item T) ([]byte, error) {
	for i, f := range of.fields {
		b = append(b, f.text...)
		if f.name == "" {
			continue
		}
		v, err := of.value(i, item)
		if err != nil {
			return b, fmt.Errorf("field %s: %w", f.name, err)
		}
		if of.src.printable {
			b = appendPrintable(b, formatValue(v, of.specs[i]))
		} else {
			b = append(b, formatValue(v, of.specs[i])...)
		}
	}
	return b, nil
}

// appendPrintable appends s with its control characters (a newline or an
// escape sequence in a job name a guest chose) shown as '?': a value
// must not add rows, or colours, to the listing of another user.
func appendPrintable(b []byte, s string) []byte {
	clean := true
	for _, r := range s {
		if unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return append(b, s...)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			r = '?'
		}
		b = utf8.AppendRune(b, r)
	}
	return b
}

// sortItems sorts items by comma-separated field names ("-name" for
// descending), comparing numbers numerically.
func sortItems[T any](items []T, keys string, src fieldSource[T]) error {
	type key struct {
		get  func(T) fmtVal
		desc bool
	}
	var ks []key
	for _, k := range strings.Split(keys, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		desc := strings.HasPrefix(k, "-")
		g, err := src.get(strings.TrimPrefix(k, "-"))
		if err != nil {
			return fmt.Errorf("Invalid sort key: %s", strings.TrimPrefix(k, "-"))
		}
		ks = append(ks, key{g, desc})
	}
	sort.SliceStable(items, func(a, b int) bool {
		for _, k := range ks {
			c := compareVals(k.get(items[a]), k.get(items[b]))
			if c == 0 {
				continue
			}
			if k.desc {
				return c > 0
			}
			return c < 0
		}
		return false
	})
	return nil
}

func compareVals(a, b fmtVal) int {
	num := func(v fmtVal) (float64, bool) {
		switch v.kind {
		case fmtInt:
			return float64(v.i), true
		case fmtFloat, fmtTime:
			return v.f, true
		case fmtBool:
			if v.b {
				return 1, true
			}
			return 0, true
		}
		return 0, false
	}
	if x, ok := num(a); ok {
		if y, ok := num(b); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	return strings.Compare(a.String(), b.String())
}

// jsonValue renders an annotation value as flux's Python tools print it.
func jsonValue(raw json.RawMessage) fmtVal {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return vEmpty()
	}
	switch x := v.(type) {
	case string:
		return vStr(x)
	case float64:
		if x == math.Trunc(x) && !strings.ContainsAny(string(raw), ".eE") {
			return vInt(int64(x))
		}
		return vFloat(x)
	case bool:
		return vBool(x)
	case nil:
		return vStr("None")
	}
	return vStr(pyJSONDumps(raw))
}
