package shellproc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A guest's shell (a job's user other than the instance owner) is started
// by the job-shell module as root with --user: before it runs anything
// of its user's it becomes that user for good and starts again as a
// fresh program (DropTo). So it holds nothing of root's: no descriptor
// but stdin, stdout and stderr (its user's shells.log) and its
// directory (3), none of the broker's environment, and the kernel does
// not let its user trace it (a process that changed its identity is not
// dumpable).

// ShellEnv is the environment a guest's shell starts with (its tasks'
// comes from their jobspec).
func ShellEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "TZ", k == "LANG", strings.HasPrefix(k, "LC_"):
			env = append(env, kv)
		}
	}
	return env
}

// DropTo makes this process (root) userid's, with that user's groups,
// and executes argv again as that user with env: descriptors above 3
// are closed across the exec. It returns only on failure.
func DropTo(userid uint32, argv, env []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("--user %d: only root may start a shell for another user", userid)
	}
	cred, err := UserCredential(userid)
	if err != nil {
		return err
	}
	if err := closeOnExecAbove(3); err != nil {
		return err
	}
	groups := make([]int, len(cred.Groups))
	for i, g := range cred.Groups {
		groups[i] = int(g)
	}
	// all threads (Go's set*id calls are process-wide)
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(int(cred.Gid), int(cred.Gid), int(cred.Gid)); err != nil {
		return fmt.Errorf("setresgid %d: %w", cred.Gid, err)
	}
	if err := syscall.Setresuid(int(userid), int(userid), int(userid)); err != nil {
		return fmt.Errorf("setresuid %d: %w", userid, err)
	}
	if os.Getuid() != int(userid) || os.Geteuid() != int(userid) {
		return fmt.Errorf("--user %d: the identity did not change", userid)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	return syscall.Exec("/proc/self/exe", argv, env)
}

// closeOnExecAbove marks every descriptor above fd close-on-exec.
func closeOnExecAbove(fd int) error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n <= fd {
			continue
		}
		unix.FcntlInt(uintptr(n), unix.F_SETFD, unix.FD_CLOEXEC) // one just closed (the listing's own) fails
	}
	return nil
}
