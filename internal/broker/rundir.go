package broker

import (
	"os"
	"path/filepath"
	"strings"
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
			// once they have
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
		case strings.HasPrefix(name, "shell-"):
			return true
		case strings.HasPrefix(name, "u") && e.IsDir() && holdsShellRecords(filepath.Join(dir, name)):
			return true
		}
	}
	return false
}
