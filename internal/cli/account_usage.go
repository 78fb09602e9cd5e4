package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// flux account view-usage-report: the usage history the accounting
// module writes per association and day, as flux-accounting's command
// of that name reports it (-s/--start, -e/--end, -u/--username,
// -b/--bank, -r/--report-type, -t/--time-unit).

// maxDateLen bounds a --start/--end value.
const maxDateLen = 64

// parseReportDate reads a --start or --end value: seconds since the
// epoch, YYYY-MM-DD (with HH:MM or HH:MM:SS after a space or a T),
// MM/DD/YYYY, YY/MM/DD (flux-accounting's), or -DURATION before now
// (-7d). Dates are in loc.
func parseReportDate(s string, now time.Time, loc *time.Location) (int64, error) {
	bad := func() (int64, error) {
		return 0, fmt.Errorf("%q: want seconds since the epoch, YYYY-MM-DD[ HH:MM[:SS]], MM/DD/YYYY, YY/MM/DD or -DURATION (e.g. -7d)", s)
	}
	if len(s) > maxDateLen {
		return 0, fmt.Errorf("a date of %d characters: at most %d", len(s), maxDateLen)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return bad()
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		d, err := fsd.ParseDuration(rest)
		if err != nil || d < 0 {
			return bad()
		}
		return now.Add(-d).Unix(), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.Trim(s, "0123456789.") == "" {
		if f > float64(1<<40) {
			return bad()
		}
		return int64(f), nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04",
		"2006-01-02T15:04:05", "01/02/2006", "06/01/02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t.Unix(), nil
		}
	}
	return bad()
}

// usageTimeUnits are -t/--time-unit's: the column's name and seconds.
var usageTimeUnits = map[string]struct {
	name string
	secs float64
}{"hour": {"corehour", 3600}, "min": {"coremin", 60}, "sec": {"coresec", 1}}

type usageReportOpts struct {
	start, end, unit string
	req              accounting.UsageReportRequest
	asJSON           bool
}

func newAccountViewUsageReportCmd() *cobra.Command {
	var o usageReportOpts
	cmd := &cobra.Command{
		Use:   "view-usage-report [-s DATE] [-e DATE] [-u USERNAME] [-b BANK] [-r byassociation|byuser|bybank] [-t hour|min|sec] [--daily]",
		Short: "Show the core time used per association, user or bank (users other than the owner and operators: their own)",
		Long: `Show the usage history the accounting module keeps: the jobs that ended
and the core time the jobs ran each day, per association (bank:user),
summed over the days from --start to --end (every day kept, to now, by
default) or day by day with --daily (at most 366 days). The accounting
module writes it at each fair-share pass ([accounting.fairshare] interval,
or flux account update-usage now). The owner and operators see every user;
other users see their own associations only.

DATE is seconds since the epoch, YYYY-MM-DD[ HH:MM[:SS]], MM/DD/YYYY,
YY/MM/DD or -DURATION before now (-7d); a day counts if it starts in
[--start, --end).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.parse(time.Now(), time.Local); err != nil {
				return usageError{err}
			}
			var resp accounting.UsageReportResponse
			if err := accountRPC("view-usage-report", o.req, &resp); err != nil {
				return err
			}
			if len(resp.Periods) == 0 {
				if err := o.known(); err != nil {
					return err
				}
			}
			if o.asJSON {
				return printJSON(cmd.OutOrStdout(), resp.Periods)
			}
			return printUsageReport(cmd.OutOrStdout(), resp.Periods, o.req, o.unit, time.Local)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.start, "start", "s", "", "the first `DATE` (default: the oldest day kept)")
	f.StringVarP(&o.end, "end", "e", "", "the `DATE` the report ends before (default: now)")
	nameVarP(f, &o.req.Username, "username", "u", "only `USERNAME`'s associations")
	nameVarP(f, &o.req.Bank, "bank", "b", "only the associations with `BANK`")
	f.StringVarP(&o.req.ReportType, "report-type", "r", accounting.ReportByAssociation, "rows per `TYPE`: byassociation, byuser or bybank")
	f.StringVarP(&o.unit, "time-unit", "t", "hour", "core time in `UNIT`: hour, min or sec")
	f.BoolVar(&o.req.Daily, "daily", false, "a row per day instead of the total")
	f.BoolVarP(&o.asJSON, "json", "j", false, "print JSON (core time in hours)")
	return cmd
}

// known refuses a --username or --bank that the database does not
// have, when the report is empty (a user deleted with --force may still
// have history, which is shown).
func (o *usageReportOpts) known() error {
	if o.req.Bank != "" {
		if err := knownBank("--bank", o.req.Bank); err != nil {
			return err
		}
	}
	if o.req.Username != "" {
		var resp accounting.AssociationsResponse
		err := accountRPC("view-user", accounting.NameRequest{Username: o.req.Username}, &resp)
		if flux.ErrnoOf(err) == syscall.ENOENT {
			return fmt.Errorf("--username=%s: user %s is not in the accounting database", o.req.Username, o.req.Username)
		}
	}
	return nil
}

// parse checks the options that need no instance.
func (o *usageReportOpts) parse(now time.Time, loc *time.Location) error {
	var err error
	if o.start != "" {
		if o.req.Start, err = parseReportDate(o.start, now, loc); err != nil {
			return fmt.Errorf("--start=%w", err)
		}
	}
	if o.end != "" {
		if o.req.End, err = parseReportDate(o.end, now, loc); err != nil {
			return fmt.Errorf("--end=%w", err)
		}
	}
	switch o.req.ReportType {
	case accounting.ReportByAssociation, accounting.ReportByUser, accounting.ReportByBank:
	default:
		return fmt.Errorf("--report-type=%q: want byassociation, byuser or bybank", o.req.ReportType)
	}
	if _, ok := usageTimeUnits[o.unit]; !ok {
		return fmt.Errorf("--time-unit=%q: want hour, min or sec", o.unit)
	}
	return nil
}

// printUsageReport prints the rows (flux-accounting's layout: the
// group, its jobs and core time, then a TOTAL line); --daily rows begin
// with their day.
func printUsageReport(out io.Writer, ps []accounting.UsagePeriod, req accounting.UsageReportRequest, unit string, loc *time.Location) error {
	u := usageTimeUnits[unit]
	group := map[string]string{accounting.ReportByAssociation: "bankuser", accounting.ReportByUser: "user", accounting.ReportByBank: "bank"}[req.ReportType]
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	if req.Daily {
		fmt.Fprint(tw, "day\t")
	}
	fmt.Fprintf(tw, "%s(%s)\tjobs\ttotal\n", group, u.name)
	var jobs int64
	var total float64
	for _, p := range ps {
		name := p.Username
		switch req.ReportType {
		case accounting.ReportByAssociation:
			name = p.Bank + ":" + p.Username
		case accounting.ReportByBank:
			name = p.Bank
		}
		if req.Daily {
			fmt.Fprintf(tw, "%s\t", time.Unix(p.Start, 0).In(loc).Format("2006-01-02"))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\n", name, p.Jobs, p.CoreHours*3600/u.secs)
		jobs += p.Jobs
		total += p.CoreHours
	}
	if req.Daily {
		fmt.Fprint(tw, "\t")
	}
	fmt.Fprintf(tw, "TOTAL\t%d\t%.2f\n", jobs, total*3600/u.secs)
	return tw.Flush()
}
