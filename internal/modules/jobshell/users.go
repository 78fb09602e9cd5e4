package jobshell

// Shells of users. In an instance run by root, a job's shells run as the
// job's user, so nothing a user controls (their tasks' output, PMI
// traffic, stdin) is handled by a root process. What the shell may not do
// as that user the module does for it: it makes the user's directory in
// the shell directory (u<UID>, the user's own, where the shell keeps its
// record and output spool, and finds broker.uri) and hands the shell a
// descriptor of it, since the shell directory and the state directory
// above it are root's and private; it makes the directory of the user's
// jobs' temporary directories in the run directory; it commits the
// output eventlogs (commit.go) and makes the cgroups of the user's jobs
// (cgroups.go). The module works in a user's directory without following
// what the user put there: a symbolic link, a FIFO or a huge file named
// like a record or broker.uri is ignored or replaced, never followed.

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/procfs"
	"github.com/fluxgo/fluxgo/internal/shellproc"
)

// userDir returns the shell directory of uid's shells: DIR/u<UID>, made
// (owned by uid, mode 0700) if need be, with the broker's URI in it.
func (m *manager) userDir(uid uint32) (string, error) {
	dir := filepath.Join(m.dir, "u"+strconv.FormatUint(uint64(uid), 10))
	if err := ownedDir(dir, uid, m.gidOf(uid)); err != nil {
		return "", fmt.Errorf("job-shell: the shell directory of userid %d: %w", uid, err)
	}
	if err := writeNoFollow(dir, shellproc.BrokerURIFile, []byte(m.uri+"\n")); err != nil {
		return "", fmt.Errorf("job-shell: %s: %w", filepath.Join(dir, shellproc.BrokerURIFile), err)
	}
	return dir, nil
}

// gidOf returns uid's primary group (the owner's own for the owner; -1
// when it cannot be found, which leaves the group as made).
func (m *manager) gidOf(uid uint32) int {
	if uid == m.owner {
		return os.Getegid()
	}
	if gid, ok := m.gids[uid]; ok {
		return gid
	}
	gid := -1
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if n, err := strconv.Atoi(u.Gid); err == nil {
			gid = n
		}
	}
	m.gids[uid] = gid // looked up once per user while the module runs
	return gid
}

// tmpParent makes the directory a guest shell makes its jobs'
// FLUX_JOB_TMPDIR in (the owner's shells use the run directory).
func (m *manager) tmpParent(uid uint32) error {
	if uid == m.owner || m.rundir == "" {
		return nil
	}
	dir := shellproc.TmpParent(m.rundir, uid)
	if err := ownedDir(dir, uid, m.gidOf(uid)); err != nil {
		return fmt.Errorf("job-shell: the temporary directory of userid %d's jobs: %w", uid, err)
	}
	return nil
}

// ownedDir makes dir a directory owned by uid of mode 0700. Its parent
// is the instance owner's, so what is there is what the module made, or
// was made by hand: anything but a directory is replaced.
func ownedDir(dir string, uid uint32, gid int) error {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
	case err == nil:
		if err := os.Remove(dir); err != nil {
			return err
		}
		fallthrough
	case errors.Is(err, os.ErrNotExist):
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	default:
		return err
	}
	if err := os.Lchown(dir, int(uid), gid); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// writeNoFollow writes name in dir (a user's) as a new file renamed into
// place: whatever the user put at either name is replaced, not followed.
func writeNoFollow(dir, name string, data []byte) error {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	tmp := name + ".new"
	unix.Unlinkat(dfd, tmp, 0)
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	_, werr := unix.Write(fd, data)
	unix.Close(fd)
	if werr != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return werr
	}
	return unix.Renameat(dfd, tmp, dfd, name)
}

// shellLog opens the shells.log of uid's directory dir for appending,
// or nil. The directory is the user's, so what is there is taken only if
// it is a regular file of the user's with no other link (never what a
// symbolic or hard link names: the module changes no owner of a file it
// did not make); anything else is replaced by a new file, made the
// user's.
func (m *manager) shellLog(dir string, uid uint32) *os.File {
	path := filepath.Join(dir, "shells.log")
	open := func(flags int) (int, *unix.Stat_t, error) {
		fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|flags, 0o600)
		if err != nil {
			return -1, nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, nil, err
		}
		return fd, &st, nil
	}
	fd, st, err := open(0)
	if err == nil && (st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || st.Uid != uid) {
		unix.Close(fd)
		err = syscall.EEXIST
	}
	if err != nil {
		unix.Unlink(path)
		if fd, _, err = open(unix.O_CREAT | unix.O_EXCL); err != nil {
			m.log.Warn("cannot open a shells' log", "path", path, "err", err)
			return nil
		}
		if err := unix.Fchown(fd, int(uid), m.gidOf(uid)); err != nil { // the file just made
			unix.Close(fd)
			return nil
		}
	}
	return os.NewFile(uintptr(fd), path)
}

// shellOf checks that a hello from userid describes a shell of userid:
// its service is the one that user's shell of that PID registers, and
// the process runs as that user.
func shellOf(userid uint32, hmUser uint32, pid int, svc string) error {
	if hmUser != userid {
		return fmt.Errorf("a shell of userid %d says it is userid %d's: %w", userid, hmUser, syscall.EPERM)
	}
	if svc != shellproc.ProcessService(userid, pid) {
		return fmt.Errorf("service %q is not that of userid %d's shell %d: %w", svc, userid, pid, syscall.EPERM)
	}
	uid, err := procfs.UID(pid)
	if err != nil || uid != userid {
		return fmt.Errorf("process %d is not a shell of userid %d: %w", pid, userid, syscall.EPERM)
	}
	return nil
}
