package builtin

import (
	"testing"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// TestBeginTimeValidate: a begin-time dependency whose value is not a
// timestamp is refused at submission with flux-core's message.
func TestBeginTimeValidate(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"1700000000.5", ""},
		{"0", ""},
		{"bogus", "Invalid begin-time=bogus"},
		{"-1", "Invalid begin-time=-1"},
		{"inf", "Invalid begin-time=inf"},
		{"NaN", "Invalid begin-time=NaN"},
		{"4102444800", ""}, // 2100
		// past a time.Duration's reach the job was released at once
		{"1e12", "Invalid begin-time=1e12: after 8589934592, the latest a job may be held until"},
		{"1e300", "Invalid begin-time=1e300: after 8589934592, the latest a job may be held until"},
	} {
		js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{})
		if err != nil {
			t.Fatal(err)
		}
		js.SetDependencies([]jobspec.Dependency{{Scheme: "begin-time", Value: c.value}})
		err = (&BeginTime{}).Validate(&jobtap.Job{Jobspec: js}, true)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("begin-time=%s refused: %v", c.value, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("begin-time=%s: %v, want %q", c.value, err, c.want)
		}
	}
}
