package job

import (
	"fmt"
	"strings"
	"testing"
)

// benchJobs returns 1024 inactive jobs' objects, comma-separated, with
// the attributes flux jobs asks for by default.
func benchJobs() string {
	var sb strings.Builder
	for i := 0; i < 1024; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"userid":1000,"urgency":16,"priority":16,"t_submit":1764486000.%06d,`+
			`"t_depend":1764486000.1,"t_run":1764486000.2,"t_cleanup":1764486000.3,"t_inactive":1764486000.4,`+
			`"state":64,"name":"true","ntasks":1,"ncores":1,"duration":0,"nnodes":1,"ranks":"%d",`+
			`"nodelist":"node%d","success":true,"exception_occurred":false,"result":1,"waitstatus":0,`+
			`"annotations":{"sched":{"resource_summary":"rank%d/core0"}}}`, 60397977600000+i, i, i, i, i)
	}
	return sb.String()
}

// BenchmarkDecodeJobs decodes a job-list.list chunk of 1024 inactive
// jobs with the attributes flux jobs asks for by default.
func BenchmarkDecodeJobs(b *testing.B) {
	payload := []byte(`{"jobs":[` + benchJobs() + `]}`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := DecodeJobs(payload, func(*Info) { n++ }); err != nil || n != 1024 {
			b.Fatal(err, n)
		}
	}
}
