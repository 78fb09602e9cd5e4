// Package pgtest starts a real PostgreSQL server for tests: initdb in a
// fresh directory, pg_ctl start listening only on a unix socket there,
// run as the postgres user (the server refuses to run as root).
package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
)

// BinDir is where Debian's postgresql-15 package puts the server.
const BinDir = "/usr/lib/postgresql/15/bin"

// Server is one running PostgreSQL server.
type Server struct {
	dir   string
	URL   string // for pgx: the "postgres" database over the socket
	runAs string
}

// Start starts a server in a new directory under base (which the
// postgres user must be able to reach, as os.TempDir()); the reason it
// could not (not root, no binaries, no postgres user) is returned as
// skip, any other failure as err.
func Start(base string) (s *Server, skip string, err error) {
	if os.Geteuid() != 0 {
		return nil, "PostgreSQL tests need root (to run the server as the postgres user)", nil
	}
	if _, err := os.Stat(filepath.Join(BinDir, "initdb")); err != nil {
		return nil, "PostgreSQL server binaries not installed (" + BinDir + "; scripts/deps.sh installs them)", nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, "no postgres user", nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp(base, "pg")
	if err != nil {
		return nil, "", err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, "", err
	}
	s = &Server{dir: dir, runAs: "postgres"}
	data := filepath.Join(dir, "data")
	if out, err := s.run(filepath.Join(BinDir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"); err != nil {
		return nil, "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories=%s -c fsync=off -c max_connections=50", dir)
	if out, err := s.run(filepath.Join(BinDir, "pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		return nil, "", fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	s.URL = fmt.Sprintf("host=%s port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	return s, "", nil
}

// CreateDB makes database name and returns its URL.
func (s *Server) CreateDB(name string) (string, error) {
	if out, err := s.run(filepath.Join(BinDir, "createdb"), "-h", s.dir, "-U", "postgres", name); err != nil {
		return "", fmt.Errorf("createdb %s: %v: %s", name, err, out)
	}
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=%s sslmode=disable", s.dir, name), nil
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() error {
	out, err := s.run(filepath.Join(BinDir, "pg_ctl"), "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "stop")
	os.RemoveAll(s.dir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

func (s *Server) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command("runuser", append([]string{"-u", s.runAs, "--", prog}, args...)...)
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}
