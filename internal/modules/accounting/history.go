package accounting

import (
	"sort"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
)

// Usage history (issue 25): each fair-share pass also writes every
// association's usage per day (acct.UsagePeriod: the jobs that ended
// that day, and the core-hours the jobs ran that day, undecayed) to the
// database's usage_history table, where flux account view-usage-report
// reads it long after the jobs' decayed usage has gone to nothing.
//
// A pass reads the jobs that ran in the fair-share window (the last 10
// half-lives), so a day is written only when the window holds it whole
// (every job that ran in it ended inside the window). It rewrites the
// days that jobs archived since the last pass ran in (on the module's
// first pass: since the start of the newest day written; every day in
// the window when the history is empty): SetUsage replaces a day's totals,
// so a pass run again over the same archive writes the same rows.
// Days are the broker's local days.

// rewriteUsageWindow as usageMark makes the next pass take every job
// of the window for new, so that it rewrites every day the window holds
// (after edit-user --userid: the history under the old uid's name is
// gone). 0 would mean "not read yet".
const rewriteUsageWindow = 1e-9

type dayKey struct {
	user, bank string
	start      int64
}

// dayUsage adds jobs up per association and day.
type dayUsage struct {
	loc  *time.Location
	from int64   // the first day start kept
	mark float64 // jobs inactive at or after this are new
	sums map[dayKey]*acct.UsagePeriod
	// touched: the days new jobs ran in
	touched     map[int64]bool
	maxInactive float64
}

func newDayUsage(loc *time.Location, since, mark float64) *dayUsage {
	d := &dayUsage{loc: loc, mark: mark, sums: map[dayKey]*acct.UsagePeriod{}, touched: map[int64]bool{}}
	if since > 0 {
		d.from = d.dayStart(since)
		if float64(d.from) < since {
			d.from = d.next(d.from)
		}
	}
	return d
}

// dayStart is the start of the day holding t (seconds).
func (d *dayUsage) dayStart(t float64) int64 {
	y, m, dd := time.Unix(int64(t), 0).In(d.loc).Date()
	return time.Date(y, m, dd, 0, 0, 0, 0, d.loc).Unix()
}

// next is the start of the day after the one starting at start (days
// are 23 or 25 hours long where the clocks change).
func (d *dayUsage) next(start int64) int64 {
	y, m, dd := time.Unix(start, 0).In(d.loc).Date()
	return time.Date(y, m, dd+1, 0, 0, 0, 0, d.loc).Unix()
}

func (d *dayUsage) at(user, bank string, day int64) *acct.UsagePeriod {
	k := dayKey{user, bank, day}
	p := d.sums[k]
	if p == nil {
		p = &acct.UsagePeriod{Username: user, Bank: bank, Start: day}
		d.sums[k] = p
	}
	return p
}

// add charges a job of ncores cores that ran from run to end (and was
// archived inactive at inactive) to user's association with bank.
func (d *dayUsage) add(user, bank string, ncores int, run, end, inactive float64) {
	if !d.addTime(user, bank, ncores, run, end, inactive) {
		return
	}
	isNew := inactive >= d.mark
	if day := d.dayStart(end); day >= d.from {
		d.at(user, bank, day).Jobs++
		if isNew {
			d.touched[day] = true
		}
	}
}

// addTime charges the core-hours of a run (of a job archived inactive
// at inactive) to the days it ran in, without counting a job: add's
// work, and that of each earlier run of a requeued job. It reports
// whether the run counted.
func (d *dayUsage) addTime(user, bank string, ncores int, run, end, inactive float64) bool {
	if run <= 0 || end <= run || ncores <= 0 {
		return false
	}
	if acct.CheckName("user", user) != nil || acct.CheckName("bank", bank) != nil {
		return false // not an association the database could hold
	}
	isNew := inactive >= d.mark
	if inactive > d.maxInactive {
		d.maxInactive = inactive
	}
	for day := d.dayStart(max(run, float64(d.from))); float64(day) < end; day = d.next(day) {
		if day < d.from {
			continue
		}
		lo, hi := max(run, float64(day)), min(end, float64(d.next(day)))
		if hi > lo {
			d.at(user, bank, day).CoreHours += float64(ncores) * (hi - lo) / 3600
		}
		if isNew {
			d.touched[day] = true
		}
	}
	return true
}

// periods are the rows of the days new jobs ran in, by day, user, bank.
func (d *dayUsage) periods() []acct.UsagePeriod {
	out := []acct.UsagePeriod{}
	for k, p := range d.sums {
		if d.touched[k.start] {
			out = append(out, *p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.Username != b.Username {
			return a.Username < b.Username
		}
		return a.Bank < b.Bank
	})
	return out
}
