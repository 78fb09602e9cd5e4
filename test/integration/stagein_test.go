package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameTree fails the test unless the tree under dir is want (an
// archiveTree): every file, its type, permission bits and content.
func sameTree(t *testing.T, what string, want map[string]archiveNode, dir string) {
	t.Helper()
	got := archiveTree(t, dir)
	if reflect.DeepEqual(want, got) {
		return
	}
	for p, w := range want {
		if g, ok := got[p]; !ok || g.Mode != w.Mode || g.Data != w.Data {
			t.Errorf("%s: %s: got %v (len %d), want %v (len %d)", what, p, g.Mode, len(g.Data), w.Mode, len(w.Data))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s was not in the archive", what, p)
		}
	}
}

// TestStageIn: the stage-in shell option (flux-shell-options(7)) puts the
// files of flux archive archives into every node's FLUX_JOB_TMPDIR
// before the tasks start, or into stage-in.destination (on every node,
// or only the first with global:), selected by stage-in.names and
// stage-in.pattern.
func TestStageIn(t *testing.T) {
	e := start(t)
	src := archiveSource(t) // inline and multi-blob files, sparse, symlinks, read-only dir
	want := archiveTree(t, src)
	e.must("archive", "create", "-n", "data", "--chunksize=64K", "-C", src, ".")
	mainSrc := t.TempDir()
	os.WriteFile(filepath.Join(mainSrc, "hello"), []byte("Hello world!\n"), 0o644)
	e.must("archive", "create", "-C", mainSrc, "hello") // archive.main

	t.Run("every node's FLUX_JOB_TMPDIR", func(t *testing.T) {
		e := e.sub(t)
		out := t.TempDir()
		t.Cleanup(func() { makeWritable(out) })
		// each task copies what it found before the job's directory goes
		e.must("run", "-N2", "-n2", "-o", "stage-in.names=data", "sh", "-c",
			fmt.Sprintf(`cp -a "$FLUX_JOB_TMPDIR" %s/$(%s getattr rank)`, out, e.inst.Bin))
		ranks, _ := os.ReadDir(out)
		if len(ranks) != 2 {
			t.Fatalf("copies from %d nodes, want 2", len(ranks))
		}
		for _, r := range ranks {
			sameTree(t, "rank "+r.Name(), want, filepath.Join(out, r.Name()))
		}
	})

	t.Run("main by default, several names, the old tags", func(t *testing.T) {
		e := e.sub(t)
		if got := e.must("run", "-N1", "-o", "stage-in", "cat", "{{tmpdir}}/hello"); got != "Hello world!" {
			t.Errorf("-o stage-in: %q", got)
		}
		for _, opt := range []string{"stage-in.names=data,main", "stage-in.tags=data,main"} {
			got := e.must("run", "-N1", "-o", opt, "sh", "-c", `cat $FLUX_JOB_TMPDIR/hello $FLUX_JOB_TMPDIR/README`)
			if got != "Hello world!\nstage me" {
				t.Errorf("-o %s: %q", opt, got)
			}
		}
	})

	t.Run("pattern", func(t *testing.T) {
		e := e.sub(t)
		got := e.must("run", "-N2", "-n2", "-o", "stage-in.names=data,main", "-o", "stage-in.pattern=data/*",
			"sh", "-c", `cd $FLUX_JOB_TMPDIR && find . -type f | sort | tr '\n' ' '`)
		line := "./data/big.dat ./data/deep/er/x ./data/empty ./data/small.bin ./data/sparse"
		if got != line+" "+line {
			t.Errorf("files staged with pattern data/*:\n%s\nwant on each node\n%s", got, line)
		}
	})

	t.Run("destination", func(t *testing.T) {
		e := e.sub(t)
		local := t.TempDir()
		t.Cleanup(func() { makeWritable(local) })
		// into an existing directory, a second time over the first copy
		for i := 0; i < 2; i++ {
			e.must("run", "-N1", "-o", "stage-in.names=data", "-o", "stage-in.destination=local:"+local, "true")
			sameTree(t, "local:", want, local)
		}
		os.WriteFile(filepath.Join(local, "README"), []byte("changed"), 0o644)
		e.must("run", "-N1", "-o", "stage-in.names=data", "-o", "stage-in.destination="+local, "true")
		sameTree(t, "no scope", want, local)

		// global: the first node extracts for all, before any task runs
		global := t.TempDir()
		t.Cleanup(func() { makeWritable(global) })
		id := e.must("run", "-N2", "-n2", "-o", "stage-in.names=data", "-o", "stage-in.destination=global:"+global,
			"sh", "-c", fmt.Sprintf(`test -f %s/data/big.dat && echo ok; test -z "$(ls -A $FLUX_JOB_TMPDIR)" && echo empty`, global))
		// two tasks' lines interleave in any order
		if lines := strings.Split(id, "\n"); len(lines) != 4 || strings.Count(id, "ok") != 2 || strings.Count(id, "empty") != 2 {
			t.Errorf("global: tasks saw %q", id)
		}
		sameTree(t, "global:", want, global)

		// relative to the job's working directory
		cwd := t.TempDir()
		os.Mkdir(filepath.Join(cwd, "in"), 0o755)
		e.must("run", "-N1", "--cwd", cwd, "-o", "stage-in.destination=in", "true")
		if b, _ := os.ReadFile(filepath.Join(cwd, "in", "hello")); string(b) != "Hello world!\n" {
			t.Errorf("relative destination: %q", b)
		}
	})

	t.Run("only the first node extracts with global:", func(t *testing.T) {
		e := e.sub(t)
		dir := t.TempDir()
		t.Cleanup(func() { makeWritable(dir) })
		// rank 1's shell would find the leader's files there; with local
		// scope both shells write (and the job still succeeds, overwriting)
		jobGlobal := e.submit("-N2", "-n2", "-o", "stage-in.names=data", "-o", "stage-in.destination=global:"+dir, "true")
		if r := e.result(jobGlobal); r != "COMPLETED" {
			t.Fatalf("global job: %s", r)
		}
		logged := func(rank, id string) bool {
			return strings.Contains(e.must("exec", "-r", rank, e.inst.Bin, "dmesg"), "stage-in done job="+id)
		}
		if !logged("0", jobGlobal.String()) || logged("1", jobGlobal.String()) {
			t.Errorf("global: stage-in on rank 0: %v, on rank 1: %v; want only rank 0", logged("0", jobGlobal.String()), logged("1", jobGlobal.String()))
		}
	})
}

// TestStageInErrors: a stage-in that cannot be done fails the job before
// its tasks run, with an exception naming the archive or option and what
// is wrong.
func TestStageInErrors(t *testing.T) {
	e := start(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644)
	e.must("archive", "create", "-n", "ok", "-C", src, "f")
	e.must("kvs", "put", "archive.notjson=hello")
	e.must("kvs", "put", `archive.abs=[{"path":"/etc/staged","mode":33188,"size":1,"encoding":"utf-8","data":"x"}]`)
	e.must("kvs", "put", `archive.noblob=[{"path":"x","mode":33188,"size":5,"encoding":"blobvec","data":[[0,5,"sha1-0000000000000000000000000000000000000000"]]}]`)
	notDir := filepath.Join(src, "f")

	tests := []struct {
		name string
		opts []string
		want string
	}{
		{"unknown archive", []string{"-o", "stage-in.names=ok,nosuch"}, `stage-in: archive "nosuch" does not exist (no KVS key archive.nosuch`},
		{"no main archive", []string{"-o", "stage-in"}, `stage-in: archive "main" does not exist`},
		{"unknown option", []string{"-o", "stage-in.badopt"}, "stage-in.badopt: unknown option"},
		{"bad scope", []string{"-o", "stage-in.destination=wrong:/tmp"}, `stage-in.destination=wrong:/tmp: the scope "wrong" is neither local nor global`},
		{"missing destination", []string{"-o", "stage-in.names=ok", "-o", "stage-in.destination=/noexist"}, "stage-in: destination /noexist: no such file or directory"},
		{"destination a file", []string{"-o", "stage-in.names=ok", "-o", "stage-in.destination=" + notDir}, "stage-in: destination " + notDir + ": not a directory"},
		{"empty pattern", []string{"-o", "stage-in.names=ok", "-o", "stage-in.pattern="}, `stage-in.pattern="": expected a non-empty glob pattern`},
		{"names not strings", []string{"--setattr=system.shell.options.stage-in.names=[1]"}, "stage-in.names: 1 is not an archive name"},
		{"not an archive", []string{"-o", "stage-in.names=notjson"}, `stage-in: archive "notjson": not an RFC 37 archive`},
		{"unsafe path", []string{"-o", "stage-in.names=abs"}, `stage-in: archive "abs": /etc/staged: refusing to extract an absolute path`},
		{"missing blob", []string{"-o", "stage-in.names=noblob"}, `stage-in: archive "noblob": x: loading blob sha1-0000000000000000000000000000000000000000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.sub(t)
			mark := filepath.Join(t.TempDir(), "ran")
			args := append(append([]string{"run", "-N2", "-n2"}, tt.opts...), "touch", mark)
			r := e.fail(tt.want, args...)
			if !strings.Contains(r.Stderr, " type=exec severity=0 ") {
				t.Errorf("no exec exception on stderr (a shell that failed by itself is not a node failure): %q", r.Stderr)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Errorf("a task ran")
			}
		})
	}
	if _, err := os.Stat("/etc/staged"); err == nil {
		t.Errorf("/etc/staged was written")
	}

	t.Run("another user's job", func(t *testing.T) {
		e := e.sub(t)
		if !canRunAsGuest(e) {
			t.Skip("needs root to run a client as another user")
		}
		// the archives are the instance owner's, as in flux-core
		r := e.asGuest("run", "-o", "stage-in.names=ok", "true")
		if r.Code == 0 || !strings.Contains(r.Stderr, "stage-in: the job runs as userid 65534, but flux archive's archives are for the instance owner's jobs") {
			t.Errorf("guest job with stage-in: %+v", r)
		}
	})
}
