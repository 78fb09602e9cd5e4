package shellproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// A shell process runs its user's jobs one after another, and most leave
// their FLUX_JOB_TMPDIR empty. Making and removing a directory costs a
// journaled file system about 0.3 ms per job (rmdir the most; measured on
// ext4), a rename 0.02 ms: so the empty directory of a job that ended is
// kept under a spare name and renamed for the next job. Only an empty
// directory, with the mode and owner a new one would have, is reused.

// makeTmpdir makes the job's temporary directory on this node,
// <rundir>/jobtmp-<rank>-<id f58>, owned by the job's user and private
// to it (flux-environment(7): FLUX_JOB_TMPDIR). Everything in it goes
// when the job's tasks here have ended: the files tasks leave there,
// and the rundir of a nested broker killed before it could clean up.
func (j *job) makeTmpdir() error {
	dir := filepath.Join(j.x.tmpParent(), fmt.Sprintf("jobtmp-%d-%s", j.x.rank, j.id.F58(true)))
	uid := os.Geteuid()
	if j.cred != nil {
		uid = int(j.cred.Uid)
	}
	if j.x.reuseTmpdir(dir, uid) {
		j.tmpdir = dir
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("FLUX_JOB_TMPDIR: %w", err)
	}
	j.tmpdir = dir
	if j.cred != nil {
		if err := os.Chown(dir, int(j.cred.Uid), int(j.cred.Gid)); err != nil {
			j.removeTmpdir()
			return fmt.Errorf("FLUX_JOB_TMPDIR: %w", err)
		}
	}
	return nil
}

// TmpParent is where the job-shell module makes the directory in which
// a guest shell (running as userid) makes its jobs' temporary
// directories: the run directory is the instance owner's.
func TmpParent(rundir string, userid uint32) string {
	return filepath.Join(rundir, fmt.Sprintf("jobtmp-u%d", userid))
}

// tmpParent is the directory of this shell's jobs' temporary
// directories.
func (x *host) tmpParent() string {
	if x.guest {
		return TmpParent(x.rundir, uint32(os.Geteuid()))
	}
	return x.rundir
}

// reuseTmpdir renames the spare directory to dir if it is still what a
// new one for uid would be: an empty directory of mode 0700 owned by uid.
func (x *host) reuseTmpdir(dir string, uid int) bool {
	spare := x.spareTmp
	if spare == "" {
		return false
	}
	x.spareTmp = ""
	if os.Rename(spare, dir) != nil {
		os.RemoveAll(spare)
		return false
	}
	fi, err := os.Lstat(dir)
	if err == nil && fi.IsDir() && fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) == 0o700 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && emptyDir(dir) {
			return true
		}
	}
	os.RemoveAll(dir)
	return false
}

// emptyDir reports whether dir has no entries. Plain system calls: an
// os.File would put the directory in the runtime's poller (two fcntl
// and two epoll_ctl calls), twice a job.
func emptyDir(dir string) bool {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var buf [4096]byte
	for {
		n, err := syscall.Getdents(fd, buf[:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		if n <= 0 {
			return true // only . and .. (or nothing)
		}
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil) // . and .. left out
		if len(names) > 0 {
			return false
		}
	}
}

// removeTmpdir removes the job's temporary directory, or keeps it as the
// spare if it is empty and there is none.
func (j *job) removeTmpdir() {
	if j.tmpdir == "" {
		return
	}
	x := j.x
	if x.spareTmp == "" && emptyDir(j.tmpdir) {
		spare := filepath.Join(x.tmpParent(), fmt.Sprintf("spare-tmp-%d.%d", x.rank, os.Getpid()))
		if os.Rename(j.tmpdir, spare) == nil {
			x.spareTmp = spare
			j.tmpdir = ""
			return
		}
	}
	// mostly left empty: one rmdir, and a walk only when that fails
	if err := syscall.Rmdir(j.tmpdir); err != nil && !errors.Is(err, syscall.ENOENT) {
		if err := os.RemoveAll(j.tmpdir); err != nil {
			x.log.Warn("cannot remove the job's temporary directory", "job", j.id.String(), "err", err)
		}
	}
	j.tmpdir = ""
}

// dropSpareTmp removes the spare directory (the shell exits).
func (x *host) dropSpareTmp() {
	if x.spareTmp != "" {
		os.Remove(x.spareTmp)
		x.spareTmp = ""
	}
}
