package shellproc

import (
	"os"
)

// spoolMemory is how much of a job's output log a leader shell keeps in
// memory; the rest goes to a file in the shell directory.
const spoolMemory = 1 << 20

// spool keeps a copy of everything a leader shell wrote of a job's
// output log, so that it can write it all again.
type spool struct {
	path string
	mem  []byte
	f    *os.File
	err  error // the first write to the file that failed
}

// write appends b to the copy.
func (s *spool) write(b []byte) {
	if len(b) == 0 || s.err != nil {
		return
	}
	if s.f == nil && len(s.mem)+len(b) <= spoolMemory {
		s.mem = append(s.mem, b...)
		return
	}
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			s.err = err
			return
		}
		s.f = f
		if _, err := f.Write(s.mem); err != nil {
			s.err = err
			return
		}
		s.mem = nil
	}
	if _, err := s.f.Write(b); err != nil {
		s.err = err
	}
}

// bytes returns the whole copy.
func (s *spool) bytes() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.f == nil {
		return s.mem, nil
	}
	return os.ReadFile(s.path)
}

// remove drops the copy.
func (s *spool) remove() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.path)
		s.f = nil
	}
	s.mem = nil
}
