package policy

import (
	"testing"
)

// FuzzParse reads instance configurations (JSON, as config.get gives
// them) the way the job manager, job-ingest and sched-simple do: an
// error that names the key, or a configuration, never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"policy":{"limits":{"duration":"1h","job-size":{"max":{"nnodes":4}}}}}`,
		`{"queues":{"batch":{"requires":["batch"],"policy":{"limits":{"duration":"2h"}}},"debug":{"preemptible":true}}}`,
		`{"policy":{"jobspec":{"defaults":{"system":{"queue":"batch","duration":"10m"}}}}}`,
		`{"ingest":{"max-jobspec-size":"1M"}}`, `{"ingest":{"max-jobspec-size":12}}`,
		`{"accounting":{"banks":{"a":{"users":["x"]}}}}`, `{"reservations":{"r":{"start":"now","duration":"1h","nodes":1}}}`,
		`{"queues":[]}`, `{"policy":null}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, conf []byte) {
		Parse(conf)
	})
}
