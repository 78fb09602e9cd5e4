package broker

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/fluxgo/fluxgo/internal/shellrecord"
)

// RemoveRundir removes a broker's run directory, but for what running
// jobs still use: the FLUX_JOB_TMPDIR of each job whose shell outlives
// the broker (jobtmp-*), and a shell directory (shells) holding the
// record of a shell still running. The directory itself goes once empty;
// a shell removes its job's directory when the job ends.
func RemoveRundir(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, "jobtmp-u"):
			// a guest shell's directory of its jobs' directories: it goes
			// once they have (a spare one a killed shell left goes now)
			if spares, _ := filepath.Glob(filepath.Join(path, "spare-tmp-*")); len(spares) > 0 {
				for _, sp := range spares {
					os.Remove(sp)
				}
			}
			os.Remove(path)
			continue
		case strings.HasPrefix(name, "jobtmp-"):
			continue
		case name == "shells" && holdsShellRecords(path):
			continue
		}
		os.RemoveAll(path)
	}
	os.Remove(dir)
}

// holdsShellRecords reports whether a shell directory still lists shells
// (in the directory of each user, u<UID>).
func holdsShellRecords(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, "shell-") && liveRecord(filepath.Join(dir, name)):
			return true
		case strings.HasPrefix(name, "u") && e.IsDir() && holdsShellRecords(filepath.Join(dir, name)):
			return true
		}
	}
	return false
}

// liveRecord reports whether a shell record names a process still
// running: one planted by a user, or left by a shell that was killed,
// does not keep a run directory.
func liveRecord(path string) bool {
	rec, err := shellrecord.Read(path)
	return err == nil && rec.Alive()
}
