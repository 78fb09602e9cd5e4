// Package shellrecord is a job shell's record in its shell directory
// (shell-PID: its PID, start time and user), read by the job-shell
// module and by the broker's run directory cleanup.
package shellrecord

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/procfs"
)

// Name is the name of a shell process's record in the shell
// directory.
func Name(pid int) string { return "shell-" + strconv.Itoa(pid) }

// Record is what a shell's record says: the process and when it started
// (a PID the kernel gave to another process since does not match).
type Record struct {
	PID       int
	StartTime uint64
	Userid    uint32
}

// String encodes the record.
func (r Record) String() string {
	return fmt.Sprintf("%d %d %d\n", r.PID, r.StartTime, r.Userid)
}

// Parse decodes a record.
func Parse(s string) (Record, error) {
	var r Record
	if _, err := fmt.Sscanf(strings.TrimSpace(s), "%d %d %d", &r.PID, &r.StartTime, &r.Userid); err != nil {
		return r, fmt.Errorf("shell record %q: %v", strings.TrimSpace(s), err)
	}
	return r, nil
}

// maxRecord bounds what is read of a shell record.
const maxRecord = 256

// Read reads a shell record: a regular file, not followed if a
// link (a user's directory may hold anything under that name), and small.
func Read(path string) (Record, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Record{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Record{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxRecord {
		return Record{}, fmt.Errorf("%s: not a shell record", path)
	}
	buf := make([]byte, maxRecord)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return Record{}, err
	}
	return Parse(string(buf[:n]))
}

// Alive reports whether the process a record names still runs.
func (r Record) Alive() bool {
	st, err := procfs.StartTime(r.PID)
	return err == nil && st == r.StartTime
}
