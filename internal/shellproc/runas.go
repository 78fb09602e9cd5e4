package shellproc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Files a job names (output files, its working directory) are opened
// with the job user's permissions, never the broker's: a broker running
// as root must not create or append to a file for a user who could not
// have done so, nor give the user a file they did not own. The
// filesystem identity (fsuid, fsgid and supplementary groups) of one OS
// thread is switched to the user for the operation and back; only that
// thread is affected (raw per-thread system calls, not the all-threads
// versions), and a thread whose identity could not be restored is
// discarded with its goroutine.

// asUser runs fn with the filesystem permissions of cred (nil: the
// broker's own).
func asUser(cred *syscall.Credential, fn func() error) error {
	if cred == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// no UnlockOSThread unless the identity is restored: the
		// goroutine's exit then ends the thread
		orig, err := unix.Getgroups()
		if err != nil {
			errc <- fmt.Errorf("getgroups: %w", err)
			return
		}
		groups := make([]int, 0, len(cred.Groups))
		for _, g := range cred.Groups {
			groups = append(groups, int(g))
		}
		switched := func() error {
			if err := unix.Setgroups(groups); err != nil {
				return fmt.Errorf("setgroups: %w", err)
			}
			if err := setfsid(unix.SetfsgidRetGid, int(cred.Gid)); err != nil {
				return fmt.Errorf("setfsgid %d: %w", cred.Gid, err)
			}
			if err := setfsid(unix.SetfsuidRetUid, int(cred.Uid)); err != nil {
				return fmt.Errorf("setfsuid %d: %w", cred.Uid, err)
			}
			return nil
		}()
		ferr := switched
		if switched == nil {
			ferr = fn()
		}
		restored := setfsid(unix.SetfsuidRetUid, os.Geteuid()) == nil &&
			setfsid(unix.SetfsgidRetGid, os.Getegid()) == nil &&
			unix.Setgroups(orig) == nil
		if restored {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// setfsid sets a thread's fsuid or fsgid with set and checks that it
// took (the system calls report failure only by not changing it).
func setfsid(set func(int) (int, error), id int) error {
	if _, err := set(id); err != nil {
		return err
	}
	if cur, _ := set(-1); cur != id {
		return errors.New("not permitted")
	}
	return nil
}

// openAsUser opens (creating if need be) a file for appending as cred.
func openAsUser(cred *syscall.Credential, path string) (*os.File, error) {
	var f *os.File
	err := asUser(cred, func() error {
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		return err
	})
	return f, err
}

// canEnter reports whether cred may make dir its working directory:
// resolving "dir/." needs search permission on dir and every directory
// above it, as chdir does.
func canEnter(cred *syscall.Credential, dir string) error {
	return asUser(cred, func() error {
		fd, err := unix.Open(dir+"/.", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "chdir", Path: dir, Err: err}
		}
		unix.Close(fd)
		return nil
	})
}
