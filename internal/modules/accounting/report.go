package accounting

import (
	"context"
	"fmt"
	"os/user"
	"strconv"
	"syscall"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// view-usage-report (flux account view-usage-report): the usage history
// (history.go) of a user, a bank or an association over a range of
// days. The owner and operators may see every user's; other users see
// their own.

// callerName is the requestor's user name: the database's for their
// uid, else this host's ("" if neither knows it).
func (s *server) callerName(ctx context.Context, uid uint32) string {
	as, err := s.associations(ctx, "")
	if err == nil {
		for _, a := range as {
			if a.Userid == uid {
				return a.Username
			}
		}
	}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return ""
}

// usageFilter checks a report request and turns it into the store's
// filter; now bounds an open end.
func usageFilter(req acct.UsageReportRequest, now time.Time) (acct.UsageFilter, error) {
	f := acct.UsageFilter{Username: req.Username, Bank: req.Bank, Since: req.Start, Until: req.End, Total: !req.Daily}
	switch req.ReportType {
	case "", acct.ReportByAssociation:
		f.Group = acct.GroupAssociation
	case acct.ReportByUser:
		f.Group = acct.GroupUser
	case acct.ReportByBank:
		f.Group = acct.GroupBank
	default:
		return f, flux.NewError(syscall.EINVAL, fmt.Sprintf("view-usage-report: --report-type=%q: want byassociation, byuser or bybank", req.ReportType))
	}
	if f.Until <= 0 {
		f.Until = now.Unix() + 1
	}
	if f.Since < 0 || f.Since >= f.Until {
		return f, flux.NewError(syscall.EINVAL, fmt.Sprintf("view-usage-report: --start (%d) must be before --end (%d)", f.Since, f.Until))
	}
	if req.Daily && f.Until-f.Since > acct.MaxDailyReportDays*86400 {
		return f, flux.NewError(syscall.EINVAL, fmt.Sprintf("view-usage-report --daily: %d days from --start to --end: at most %d",
			(f.Until-f.Since+86399)/86400, acct.MaxDailyReportDays))
	}
	return f, nil
}

func (s *server) viewUsageReport(ctx context.Context, r *flux.Request) {
	var req acct.UsageReportRequest
	if r.Decode(&req) != nil {
		return
	}
	f, err := usageFilter(req, time.Now())
	if err != nil {
		r.RespondError(err)
		return
	}
	if !r.IsOperator() {
		me := s.callerName(ctx, r.Userid())
		switch {
		case req.Username != "" && req.Username != me:
			r.Errorf(syscall.EPERM, "view-usage-report -u %s: only the instance owner and operators may see other users' usage", req.Username)
			return
		case me == "":
			r.Respond(acct.UsageReportResponse{Periods: []acct.UsagePeriod{}})
			return
		}
		f.Username = me
	}
	us, ok := s.store.(acct.UsageStore)
	if !ok {
		r.Respond(acct.UsageReportResponse{Periods: []acct.UsagePeriod{}})
		return
	}
	ps, err := us.UsageHistory(ctx, f)
	if err != nil {
		r.Errorf(syscall.EIO, "view-usage-report: %v", err)
		return
	}
	r.Respond(acct.UsageReportResponse{Periods: ps})
}
