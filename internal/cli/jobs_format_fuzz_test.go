package cli

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// FuzzJobsFormat compiles flux jobs --format strings (a user's) and
// prints rows with them: an error or a line, never a panic.
func FuzzJobsFormat(f *testing.F) {
	for _, s := range []string{
		"{id.f58:>12} {t_submit!d:%b%d %R::>12} {sched.reason_pending:<10} {annotations.user.x}",
		"{id} {state} {result} {runtime!F} {nodelist} {ntasks:>5}", "sort:-t_submit {id}",
		"{name:<10.10+} {contextual_time!H} {status_abbrev:^3}", "{{}} {", "}", "{id:", "{id!}", "{id:%",
		"{t_inactive!d:%Y-%m-%dT%T}", "{expiration!D:h}", "{duration!F:>8}", "{inactive_reason}",
	} {
		f.Add(s)
	}
	var rows []jobRow
	payload := []byte(`{"jobs":[{"id":1234567890,"userid":0,"urgency":16,"priority":16,"t_submit":1796000000.5,` +
		`"t_depend":1796000000.6,"t_run":1796000001,"t_cleanup":1796000003,"t_inactive":1796000004,"state":64,` +
		`"name":"sim","cwd":"/tmp","queue":"batch","ntasks":4,"ncores":4,"nnodes":2,"ranks":"[0-1]",` +
		`"nodelist":"n[0-1]","expiration":1796003600,"duration":3600,"success":false,"result":2,` +
		`"exception_occurred":true,"exception_type":"cancel","exception_severity":0,"exception_note":"x",` +
		`"waitstatus":256,"annotations":{"user":{"x":1},"sched":{"reason_pending":"r"}}},` +
		`{"id":99,"userid":1000,"state":8,"t_submit":1796000000}]}`)
	if err := job.DecodeJobs(payload, func(j *job.Info) { rows = append(rows, jobRow{Info: j, now: 1796000100}) }); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, format string) {
		if len(format) > 1024 {
			return
		}
		of, err := compileFormat(format, jobFieldSource)
		if err != nil {
			return
		}
		if of.prepare(rows) != nil {
			return
		}
		of.header()
		for _, r := range rows {
			of.line(r)
		}
	})
}

// TestJobsFormatControlChars: a job name with a newline and an escape
// sequence (a guest's choice) cannot add a row or colours to the
// owner's listing.
func TestJobsFormatControlChars(t *testing.T) {
	var rows []jobRow
	payload := []byte(`{"jobs":[{"id":1234,"userid":1000,"state":8,"t_submit":1796000000,"name":"a\n    fFAKE root\u001b[31m"}]}`)
	if err := job.DecodeJobs(payload, func(j *job.Info) { rows = append(rows, jobRow{Info: j, now: 1796000100}) }); err != nil {
		t.Fatal(err)
	}
	out := formatRows(t, "{id.dec} {name}", rows, false)
	if want := "1234 a?    fFAKE root?[31m\n"; out != want {
		t.Fatalf("listing %q, want %q", out, want)
	}
}
