package joblist

import (
	"encoding/json"
	"testing"
)

// FuzzConstraint compiles RFC 31 constraints as job-list takes them from
// any user and matches them against records: an error or a match, never a
// panic or a hang.
func FuzzConstraint(f *testing.F) {
	for _, s := range []string{
		`{"userid":[42]}`, `{"name":["foo","bar"]}`, `{"states":["running","inactive"]}`,
		`{"results":["failed"]}`, `{"hostlist":["node[1-4]"]}`, `{"ranks":["1-3"]}`,
		`{"t_submit":[">=100"]}`, `{"t_inactive":["<300.5"]}`, `{"queue":["batch"]}`,
		`{"and":[{"userid":[42]},{"not":[{"name":["foo"]}]}]}`, `{"or":[{"states":[8]},{"results":[2]}]}`,
		`{"not":[{"not":[{"not":[{}]}]}]}`, `{}`, `[]`, `null`, `{"bogus":[1]}`,
	} {
		f.Add([]byte(s))
	}
	recs := testRecords()
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		c, err := compileConstraint(raw)
		if err != nil {
			return
		}
		for _, r := range recs {
			c.match(r)
		}
	})
}
