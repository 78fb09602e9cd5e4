package shell

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Cgroup control files are read and written with plain system calls:
// os.ReadFile and os.OpenFile put every file they open in the runtime's
// poller (cgroup files can be polled), which is two fcntl and two
// epoll_ctl calls around each one-line read or write, for every job.

// maxControlFile bounds what readControl reads (a cgroup.procs of many
// processes is the largest file read).
const maxControlFile = 1 << 20

// readControl reads a small file with open, read and close.
func readControl(path string) ([]byte, error) {
	fd, err := openControl(path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 256)
	for {
		if len(buf) > maxControlFile {
			return nil, fmt.Errorf("reading %s: larger than %d bytes", path, maxControlFile)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, cap(buf))...)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// writeControl writes value to a file that must exist, in one write.
func writeControl(path, value string) error {
	fd, err := openControl(path, syscall.O_WRONLY)
	if err != nil {
		return err
	}
	var n int
	for {
		n, err = syscall.Write(fd, []byte(value))
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	cerr := syscall.Close(fd)
	switch {
	case err != nil:
		return &os.PathError{Op: "write", Path: path, Err: err}
	case n != len(value):
		return &os.PathError{Op: "write", Path: path, Err: syscall.EIO}
	case cerr != nil:
		return &os.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

func openControl(path string, mode int) (int, error) {
	for {
		fd, err := syscall.Open(path, mode|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}
