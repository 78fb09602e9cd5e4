package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/accounting"
)

func TestParseReportDate(t *testing.T) {
	loc := time.FixedZone("X", -7*3600)
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, loc)
	day := time.Date(2025, 1, 2, 0, 0, 0, 0, loc).Unix()
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"1735776000", 1735776000},
		{"1735776000.75", 1735776000},
		{"2025-01-02", day},
		{"2025-01-02 08:30", day + 8*3600 + 1800},
		{"2025-01-02T08:30:15", day + 8*3600 + 1815},
		{"01/02/2025", day},
		{"25/01/02", day},
		{"-7d", now.Add(-7 * 24 * time.Hour).Unix()},
		{"-1.5h", now.Add(-90 * time.Minute).Unix()},
	} {
		got, err := parseReportDate(c.in, now, loc)
		if err != nil || got != c.want {
			t.Errorf("parseReportDate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2025-13-01", "1e9", "-x", "--7d", "inf", "99999999999999999", strings.Repeat("1", 100)} {
		if _, err := parseReportDate(bad, now, loc); err == nil {
			t.Errorf("parseReportDate(%q) accepted", bad)
		}
	}
}

func FuzzParseReportDate(f *testing.F) {
	for _, s := range []string{"1735776000", "2025-01-02 08:30", "01/02/2025", "25/01/02", "-7d", "-1.5h", ""} {
		f.Add(s)
	}
	now := time.Unix(1735776000, 0)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseReportDate(s, now, time.UTC)
		if err == nil && (v < -1<<42 || v > 1<<42) {
			t.Fatalf("parseReportDate(%q) = %d: out of bounds", s, v)
		}
	})
}

func TestUsageReportOptions(t *testing.T) {
	now := time.Unix(1735776000, 0)
	for _, c := range []struct {
		o    usageReportOpts
		want string
	}{
		{usageReportOpts{start: "soon", unit: "hour", req: accounting.UsageReportRequest{ReportType: "byuser"}}, `--start="soon"`},
		{usageReportOpts{end: "x", unit: "hour", req: accounting.UsageReportRequest{ReportType: "byuser"}}, `--end="x"`},
		{usageReportOpts{unit: "hour", req: accounting.UsageReportRequest{ReportType: "byqueue"}}, `--report-type="byqueue"`},
		{usageReportOpts{unit: "day", req: accounting.UsageReportRequest{ReportType: "bybank"}}, `--time-unit="day"`},
	} {
		if err := c.o.parse(now, time.UTC); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

func TestPrintUsageReport(t *testing.T) {
	ps := []accounting.UsagePeriod{
		{Username: "alice", Bank: "physics", Start: 0, Jobs: 2, CoreHours: 1.5},
		{Username: "bob", Bank: "chem", Start: 86400, Jobs: 1, CoreHours: 0.25},
	}
	var b bytes.Buffer
	if err := printUsageReport(&b, ps, accounting.UsageReportRequest{ReportType: accounting.ReportByAssociation}, "min", time.UTC); err != nil {
		t.Fatal(err)
	}
	want := "bankuser(coremin)  jobs  total\n" +
		"physics:alice      2     90.00\n" +
		"chem:bob           1     15.00\n" +
		"TOTAL              3     105.00\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := printUsageReport(&b, ps[1:], accounting.UsageReportRequest{ReportType: accounting.ReportByBank, Daily: true}, "hour", time.UTC); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1970-01-02  chem") || !strings.HasPrefix(b.String(), "day         bank(corehour)") {
		t.Errorf("daily report:\n%s", b.String())
	}
}
