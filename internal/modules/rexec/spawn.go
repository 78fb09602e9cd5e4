package rexec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// spawner runs process launches on a few OS threads that live as long
// as the module, so the Serve goroutine never waits for a fork and exec
// (nor for the file system lookups before them) and launches proceed in
// parallel on multi-core nodes.
//
// PR_SET_PDEATHSIG fires when the thread that forked a child exits, not
// the process, so forking from whatever thread the Go scheduler picked
// could kill a child early; the workers are locked to their threads, so
// the death signal means "the module or the broker is gone". When the
// module stops, each thread exits with its goroutine (never unlocked)
// and any child still alive gets SIGKILL.
type spawner struct {
	jobs chan func()
	wg   sync.WaitGroup
}

// maxSpawners bounds the launch threads.
const maxSpawners = 4

func newSpawner() *spawner {
	n := min(runtime.NumCPU(), maxSpawners)
	sp := &spawner{jobs: make(chan func(), 256)}
	sp.wg.Add(n)
	for range n {
		go sp.worker()
	}
	return sp
}

func (sp *spawner) worker() {
	runtime.LockOSThread()
	defer sp.wg.Done()
	for job := range sp.jobs {
		job()
	}
}

// do queues job for a launch thread (blocking only when 256 launches
// are already waiting). Call from one goroutine, never after stop.
func (sp *spawner) do(job func()) { sp.jobs <- job }

// stop runs the queued jobs and ends the threads.
func (sp *spawner) stop() {
	close(sp.jobs)
	sp.wg.Wait()
}

// defaultPath is searched when a command's environment has no PATH (the
// execvp(3) default).
const defaultPath = "/bin:/usr/bin"

// lookPath finds an executable the way execvp(3) does, in the command's
// PATH: a name with a slash is used as is (relative to the command's
// working directory); otherwise the first executable regular file named
// file in a PATH directory. A match that is not executable makes the
// error EACCES rather than ENOENT.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	if path == "" {
		path = defaultPath
	}
	var errno error = syscall.ENOENT
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
		errno = syscall.EACCES
	}
	return "", errno
}

// errnoOf extracts the errno from an os error, for the error response.
func errnoOf(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT
	}
	return syscall.EINVAL
}
