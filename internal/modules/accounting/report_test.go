package accounting

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	acct "github.com/fluxgo/fluxgo/internal/accounting"
)

func TestUsageFilter(t *testing.T) {
	now := time.Unix(1_000_000_000, 0)
	f, err := usageFilter(acct.UsageReportRequest{Username: "alice", ReportType: acct.ReportByBank, Start: 5}, now)
	want := acct.UsageFilter{Username: "alice", Since: 5, Until: now.Unix() + 1, Group: acct.GroupBank, Total: true}
	if err != nil || f != want {
		t.Errorf("usageFilter = %+v, %v; want %+v", f, err, want)
	}
	for _, c := range []struct {
		req  acct.UsageReportRequest
		want string
	}{
		{acct.UsageReportRequest{ReportType: "byqueue"}, `--report-type="byqueue"`},
		{acct.UsageReportRequest{Start: 10, End: 5}, "must be before --end"},
		{acct.UsageReportRequest{Start: -1}, "must be before --end"},
		{acct.UsageReportRequest{Daily: true, Start: 0, End: 400 * 86400}, "400 days from --start to --end: at most 366"},
	} {
		_, err := usageFilter(c.req, now)
		if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("usageFilter(%+v) = %v, want EINVAL naming %q", c.req, err, c.want)
		}
	}
}
