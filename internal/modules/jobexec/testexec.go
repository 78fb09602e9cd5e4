package jobexec

import (
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/valuekind"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

// testExec "runs" jobs without processes, as flux-core's test executor
// does: attributes.system.exec.test {run_duration: FSD (default 0),
// wait_status: int, mock_exception: "init"|"run"}.
type testExec struct{}

type testConfig struct {
	RunDuration   any    `json:"run_duration"`
	WaitStatus    int    `json:"wait_status"`
	MockException string `json:"mock_exception"`
}

// testRun returns a test job's settings and run duration.
func testRun(j *execJob) (*testConfig, time.Duration, error) {
	cfg := j.info.test
	if cfg == nil {
		cfg = &testConfig{}
	}
	d, err := cfg.duration()
	return cfg, d, err
}

func (t *testExec) start(j *execJob) error {
	cfg, d, err := testRun(j)
	if err != nil {
		return err
	}
	if cfg.MockException == "init" {
		j.exception("exec", 0, "mock initialization exception generated")
		j.finish(1 << 8)
		j.release()
		return nil
	}
	j.start()
	if cfg.MockException == "run" {
		j.exception("exec", 0, "mock run exception generated")
		j.finish(int(syscall.SIGKILL))
		j.release()
		return nil
	}
	j.aux = cfg
	done := func() {
		if j.finished {
			return
		}
		j.finish(cfg.WaitStatus)
		j.release()
	}
	if d <= 0 {
		done()
		return nil
	}
	j.after(d, done)
	return nil
}

// duration reads run_duration.
func (cfg *testConfig) duration() (time.Duration, error) {
	switch v := cfg.RunDuration.(type) {
	case nil:
		return 0, nil
	case float64:
		return fsd.ToDuration(v), nil
	case string:
		d, err := fsd.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("exec.test.run_duration: %v", err)
		}
		return d, nil
	}
	return 0, fmt.Errorf("exec.test.run_duration: want an FSD string or number, not %s", valuekind.Of(cfg.RunDuration))
}

// signal ends a test job as if its processes died of sig (any signal
// but SIGCONT/SIGSTOP-like ones "kills" a simulated job).
func (t *testExec) signal(j *execJob, sig syscall.Signal) {
	if j.finished || sig == 0 {
		return
	}
	j.finish(int(sig))
	j.release()
}
