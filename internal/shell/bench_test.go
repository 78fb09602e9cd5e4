package shell

import (
	"os"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// BenchmarkRawForkExec is the floor: fork, exec and reap /bin/true.
func BenchmarkRawForkExec(b *testing.B) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	fd := devnull.Fd()
	attr := &syscall.ProcAttr{Env: []string{"PATH=/usr/bin:/bin"}, Files: []uintptr{fd, fd, fd}}
	defer reportCPU(b)()
	for b.Loop() {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, attr)
		if err != nil {
			b.Fatal(err)
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
}

// BenchmarkShellTrue runs a one-task /bin/true job through the shell:
// environment, pipes, affinity, output capture and reaping.
func BenchmarkShellTrue(b *testing.B) {
	R, err := rset.Parse([]byte(`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`))
	if err != nil {
		b.Fatal(err)
	}
	js, _ := jobspec.FromCommand([]string{"/bin/true"}, jobspec.CommandOptions{NTasks: 1})
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	p, err := MakePlan(js, R, PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer reportCPU(b)()
	for b.Loop() {
		s, err := Start(Config{Jobspec: js, Plan: p, CPU: CPUAffinity{Mode: AffinityOn}, Output: func(Output) {}})
		if err != nil {
			b.Fatal(err)
		}
		<-s.Done()
		if s.Status() != 0 {
			b.Fatalf("status %d", s.Status())
		}
	}
}

// reportCPU reports the CPU time (this process and its children) per
// iteration: a figure the machine's load does not distort much.
func reportCPU(b *testing.B) func() {
	cpu := func() float64 {
		var self, kids syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &self)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
		return float64(self.Utime.Nano()+self.Stime.Nano()+kids.Utime.Nano()+kids.Stime.Nano()) / 1e6
	}
	start := cpu()
	return func() { b.ReportMetric((cpu()-start)/float64(b.N), "cpu-ms/op") }
}
