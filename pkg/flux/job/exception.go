package job

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
)

// Exception is the context of an exception event in a job's eventlog
// (RFC 21): its type, its severity (0 ends the job), the note, and who
// raised it.
type Exception struct {
	Type     string `json:"type"`
	Severity int    `json:"severity"`
	Note     string `json:"note"`
	Userid   uint32 `json:"userid"`
}

// Fatal reports whether the exception ends the job.
func (e Exception) Fatal() bool { return e.Severity == 0 }

// ExceptionOf decodes the context of an exception event.
func ExceptionOf(ev eventlog.Event) (Exception, error) {
	var e Exception
	if ev.Name != "exception" {
		return e, fmt.Errorf("%s event: not an exception", ev.Name)
	}
	if err := ev.DecodeContext(&e); err != nil {
		return e, fmt.Errorf("exception event: %w", err)
	}
	return e, nil
}
