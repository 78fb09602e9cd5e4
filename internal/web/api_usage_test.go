package web

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseUsageQuery(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	get := func(q string) func(string) string {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		return v.Get
	}
	q, err := parseUsageQuery(get(""), now)
	if err != nil || q.bin != "day" || q.until != 1_800_000_000 || q.until-q.since != 7*86400 {
		t.Errorf("defaults: %+v %v", q, err)
	}
	q, err = parseUsageQuery(get("until=1000000&bin=hour"), now)
	if err != nil || q.since != 1000000-7*86400 || q.bin != "hour" {
		t.Errorf("until only: %+v %v", q, err)
	}
	for in, want := range map[string]string{
		"bin=week":                       `bin="week": want hour or day`,
		"since=abc":                      `since="abc": want a time in Unix seconds`,
		"since=NaN":                      `since="NaN"`,
		"until=-5":                       `until="-5"`,
		"since=2000&until=1000":          "must come after since",
		"since=0&until=100000000":        "the limit is 366 days",
		"since=0&until=8640000&bin=hour": "holds 2400 hour bins: the limit is 1000",
	} {
		_, err := parseUsageQuery(get(in), now)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}

func FuzzParseUsageQuery(f *testing.F) {
	f.Add("1000", "90000", "hour")
	f.Add("", "", "")
	f.Add("1e300", "-0", "day")
	f.Fuzz(func(t *testing.T, since, until, bin string) {
		v := map[string]string{"since": since, "until": until, "bin": bin}
		q, err := parseUsageQuery(func(k string) string { return v[k] }, time.Unix(1_800_000_000, 0))
		if err != nil {
			return
		}
		if q.until <= q.since || q.until-q.since > maxUsageRange.Seconds() || (q.bin != "hour" && q.bin != "day") {
			t.Fatalf("accepted %q %q %q as %+v", since, until, bin, q)
		}
	})
}
