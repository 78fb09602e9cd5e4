package broker

import (
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// cpuProfile is a CPU profile being written for a broker.profile "cpu"
// request, answered when the profile stops.
type cpuProfile struct {
	req   *flux.Request
	file  *os.File
	timer *time.Timer
}

// defaultCPUProfile is how long a CPU profile runs without a duration.
const defaultCPUProfile = 30 * time.Second

// profile writes a runtime profile of this broker to a file, for
// diagnosing memory and CPU use (owner only): {name, path} with name one
// of pprof's profiles (heap, allocs, goroutine, block, mutex ...), or
// "cpu" {path, duration} which profiles CPU use for duration seconds
// (default 30) and answers when done, or "cpu-stop" which ends the CPU
// profile in progress early.
func (s *builtins) profile(r *flux.Request) {
	var req struct {
		Name     string  `json:"name"`
		Path     string  `json:"path"`
		Duration float64 `json:"duration"`
	}
	if r.Decode(&req) != nil || !requireOwner(r) {
		return
	}
	switch req.Name {
	case "cpu":
		s.startCPUProfile(r, req.Path, req.Duration)
		return
	case "cpu-stop":
		if s.cpu == nil {
			r.Errorf(syscall.ENOENT, "no CPU profile is running")
			return
		}
		s.stopCPUProfile()
		r.Respond(nil)
		return
	}
	p := pprof.Lookup(req.Name)
	if p == nil {
		r.Errorf(syscall.EINVAL, "no profile named %q (cpu, cpu-stop, heap, allocs, goroutine, block, mutex)", req.Name)
		return
	}
	if req.Name == "heap" {
		runtime.GC()
	}
	f, err := os.Create(req.Path)
	if err != nil {
		r.RespondError(err)
		return
	}
	defer f.Close()
	if err := p.WriteTo(f, 0); err != nil {
		r.RespondError(err)
		return
	}
	r.Respond(nil)
}

func (s *builtins) startCPUProfile(r *flux.Request, path string, seconds float64) {
	if s.cpu != nil {
		r.Errorf(syscall.EBUSY, "a CPU profile is already running")
		return
	}
	if seconds < 0 {
		r.Errorf(syscall.EINVAL, "duration %g is negative", seconds)
		return
	}
	d := defaultCPUProfile
	if seconds > 0 {
		d = time.Duration(seconds * float64(time.Second))
	}
	f, err := os.Create(path)
	if err != nil {
		r.RespondError(err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		r.Errorf(syscall.EBUSY, "start CPU profile: %v", err)
		return
	}
	cp := &cpuProfile{req: r, file: f}
	cp.timer = time.AfterFunc(d, func() {
		s.h.Post(func() {
			if s.cpu == cp {
				s.stopCPUProfile()
			}
		})
	})
	s.cpu = cp
}

// stopCPUProfile ends the running CPU profile and answers its request.
func (s *builtins) stopCPUProfile() {
	cp := s.cpu
	s.cpu = nil
	cp.timer.Stop()
	pprof.StopCPUProfile()
	if err := cp.file.Close(); err != nil {
		cp.req.RespondError(err)
		return
	}
	cp.req.Respond(nil)
}
