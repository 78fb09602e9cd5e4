package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// --begin-time takes what flux-core's submit commands take: "now", an
// offset +FSD or -FSD from now, or a date and time in the everyday forms
// flux-core reads with the parsedatetime module ("2021-06-21 8am",
// "tomorrow morning", "in an hour", "noon"). A date without a time means
// its midnight; a time without a date means today.

// beginTimeLayouts are the absolute numeric forms.
var beginTimeLayouts = []string{
	time.RFC3339,
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
	"2006-01-02",
}

// dayWords are the named days, as an offset from today.
var dayWords = map[string]int{"today": 0, "tomorrow": 1, "yesterday": -1}

// hourWords are the named times of day (parsedatetime's hours).
var hourWords = map[string]int{
	"midnight": 0, "morning": 6, "breakfast": 8, "noon": 12, "lunch": 12,
	"afternoon": 13, "eod": 17, "evening": 18, "dinner": 19, "night": 21, "tonight": 21,
}

// offsetUnits are the units of "in N UNITS".
var offsetUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	// calendar units as parsedatetime approximates them
	"month": 30 * 24 * time.Hour, "months": 30 * 24 * time.Hour,
	"year": 365 * 24 * time.Hour, "years": 365 * 24 * time.Hour,
}

// countWords are the spelled-out counts of "in N UNITS".
var countWords = map[string]float64{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
	"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}

// parseBeginTime reads a --begin-time value relative to now.
func parseBeginTime(s string, now time.Time) (time.Time, error) {
	t, err := parseDatetime(s, now)
	if err != nil {
		return t, fmt.Errorf("--begin-time: %w", err)
	}
	return t, nil
}

// parseDatetime reads a point in time as flux-core's parse_datetime does
// (--begin-time, flux jobs --since): now, +FSD or -FSD from now, a date
// and time, or spoken forms ("tomorrow 8am", "in 2 hours").
func parseDatetime(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if s != "" && (s[0] == '+' || s[0] == '-') {
		sec, err := fsd.Parse(s[1:])
		if err != nil {
			return time.Time{}, err
		}
		if sec > 1e12 {
			return time.Time{}, fmt.Errorf("%q is too far from now", s)
		}
		d := fsd.ToDuration(sec)
		if s[0] == '-' {
			d = -d
		}
		return now.Add(d), nil
	}
	for _, layout := range beginTimeLayouts {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	if t, ok := spokenTime(strings.Fields(strings.ToLower(s)), now); ok {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q (want now, +FSD, -FSD, a date YYYY-MM-DD or today/tomorrow, a time HH:MM[:SS], 8am or noon, \"in N minutes|hours|days\" or \"N hours|days ago\")", s)
}

// spokenTime reads "in N UNITS", "N UNITS from now", or a date and a
// time of day in either order ("tomorrow 8am", "5pm today").
func spokenTime(words []string, now time.Time) (time.Time, bool) {
	if len(words) == 0 {
		return time.Time{}, false
	}
	if words[0] == "in" {
		return offsetTime(words[1:], now)
	}
	if n := len(words); n > 2 && words[n-2] == "from" && words[n-1] == "now" {
		return offsetTime(words[:n-2], now)
	}
	if n := len(words); n > 1 && words[n-1] == "ago" {
		if t, ok := offsetTime(words[:n-1], now); ok {
			return now.Add(-t.Sub(now)), true
		}
		return time.Time{}, false
	}
	// "8 am" is one time of day
	var toks []string
	for _, w := range words {
		if (w == "am" || w == "pm") && len(toks) > 0 {
			toks[len(toks)-1] += w
			continue
		}
		if w != "at" {
			toks = append(toks, w)
		}
	}
	day, haveDay := time.Time{}, false
	hms, haveTime := [3]int{}, false
	for _, tok := range toks {
		if d, ok := dateWord(tok, now); ok && !haveDay {
			day, haveDay = d, true
		} else if t, ok := timeOfDay(tok); ok && !haveTime {
			hms, haveTime = t, true
		} else {
			return time.Time{}, false
		}
	}
	if !haveDay {
		day = now
	}
	y, m, d := day.Date()
	return time.Date(y, m, d, hms[0], hms[1], hms[2], 0, now.Location()), true
}

// offsetTime reads "N UNITS" as a time that far from now.
func offsetTime(words []string, now time.Time) (time.Time, bool) {
	if len(words) != 2 {
		return time.Time{}, false
	}
	n, ok := countWords[words[0]]
	if !ok {
		var err error
		if n, err = strconv.ParseFloat(words[0], 64); err != nil || n < 0 || n > 1e6 || math.IsNaN(n) {
			return time.Time{}, false
		}
	}
	unit, ok := offsetUnits[words[1]]
	if !ok || n*float64(unit) > 200*365*24*float64(time.Hour) {
		return time.Time{}, false // unknown unit, or past time.Duration's range
	}
	return now.Add(time.Duration(n * float64(unit))), true
}

// dateWord reads today/tomorrow/yesterday or YYYY-MM-DD.
func dateWord(w string, now time.Time) (time.Time, bool) {
	if off, ok := dayWords[w]; ok {
		return now.AddDate(0, 0, off), true
	}
	t, err := time.ParseInLocation("2006-01-02", w, now.Location())
	return t, err == nil
}

// timeOfDay reads HH:MM[:SS], H[:MM[:SS]]am|pm or a named time of day.
func timeOfDay(w string) ([3]int, bool) {
	if h, ok := hourWords[w]; ok {
		return [3]int{h, 0, 0}, true
	}
	ampm := ""
	if rest, ok := strings.CutSuffix(w, "am"); ok {
		w, ampm = rest, "am"
	} else if rest, ok := strings.CutSuffix(w, "pm"); ok {
		w, ampm = rest, "pm"
	}
	parts := strings.Split(w, ":")
	if len(parts) > 3 || (ampm == "" && len(parts) < 2) {
		return [3]int{}, false
	}
	var hms [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (i > 0 && (len(p) != 2 || n > 59)) {
			return [3]int{}, false
		}
		hms[i] = n
	}
	switch {
	case ampm == "" && hms[0] > 23, ampm != "" && (hms[0] < 1 || hms[0] > 12):
		return [3]int{}, false
	case ampm == "am" && hms[0] == 12:
		hms[0] = 0
	case ampm == "pm" && hms[0] != 12:
		hms[0] += 12
	}
	return hms, true
}
