package kvs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// These tests run real `flux start -s N` instances (real broker
// processes, the real content store) and the real flux kvs command.

func rankURI(inst *testinstance.Instance, rank int) string {
	return strings.Replace(inst.URI, "/0/local", fmt.Sprintf("/%d/local", rank), 1)
}

// runAt runs the flux command against the broker of rank.
func runAt(t *testing.T, inst *testinstance.Instance, rank int, args ...string) testinstance.Result {
	t.Helper()
	return runAs(t, inst.Bin, rankURI(inst, rank), nil, "", args...)
}

func runAs(t *testing.T, bin, uri string, cred *syscall.Credential, stdin string, args ...string) testinstance.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLUX_URI=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "FLUX_URI="+uri)
	cmd.Stdin = strings.NewReader(stdin)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := testinstance.Result{Stdout: out.String(), Stderr: errb.String()}
	if cmd.ProcessState != nil {
		res.Code = cmd.ProcessState.ExitCode()
	} else if err != nil {
		t.Fatalf("flux %s: %v", strings.Join(args, " "), err)
	}
	return res
}

func mustAt(t *testing.T, inst *testinstance.Instance, rank int, args ...string) string {
	t.Helper()
	r := runAt(t, inst, rank, args...)
	if r.Code != 0 {
		t.Fatalf("rank %d: flux %s: exit %d\n%s%s", rank, strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func openAt(t *testing.T, inst *testinstance.Instance, rank int) *flux.Handle {
	t.Helper()
	h, err := flux.Open(rankURI(inst, rank))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestIntegrationCrossRank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	t0 := time.Now()
	inst := testinstance.Start(t, testinstance.Options{Size: 4})
	t.Logf("started in %v", time.Since(t0))
	// rank 3 writes, rank 0 reads (and rank 3 reads its own write)
	mustAt(t, inst, 3, "kvs", "put", "x.y=from-three")
	if out := mustAt(t, inst, 3, "kvs", "get", "x.y"); out != "from-three\n" {
		t.Errorf("rank 3 reads its write: %q", out)
	}
	if out := mustAt(t, inst, 0, "kvs", "get", "x.y"); out != "from-three\n" {
		t.Errorf("rank 0 get: %q", out)
	}
	// rank 0 writes, rank 3 reads once it reached the version
	seq := strings.TrimSpace(mustAt(t, inst, 0, "kvs", "put", "-s", "x.z=from-zero"))
	mustAt(t, inst, 3, "kvs", "wait", seq)
	if out := mustAt(t, inst, 3, "kvs", "get", "-l", "x.z"); out != "x.z=from-zero\n" {
		t.Errorf("rank 3 get: %q", out)
	}
	if out := mustAt(t, inst, 2, "kvs", "ls", "x"); out != "y    z\n" {
		t.Errorf("ls on rank 2: %q", out)
	}
	r := runAt(t, inst, 1, "kvs", "get", "x.none")
	if r.Code != 1 || r.Stderr != "flux-kvs: x.none: No such file or directory\n" {
		t.Errorf("missing key: %d %q", r.Code, r.Stderr)
	}

	t.Logf("cli part done at %v", time.Since(t0))
	// a fence of 4 participants, one per rank, completes once for all
	var wg sync.WaitGroup
	res := make([]kvs.CommitResult, 4)
	errs := make([]error, 4)
	for rank := 0; rank < 4; rank++ {
		h := openAt(t, inst, rank)
		wg.Add(1)
		go func(rank int) {
			defer wg.Done()
			var txn kvs.Txn
			txn.Put(fmt.Sprintf("fence.r%d", rank), []byte(strconv.Itoa(rank)))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res[rank], errs[rank] = kvs.Fence(ctx, h, "", "itest-fence", 4, 0, &txn)
		}(rank)
	}
	wg.Wait()
	for rank := range res {
		if errs[rank] != nil || res[rank] != res[0] {
			t.Fatalf("fence participant %d: %+v %v (participant 0: %+v)", rank, res[rank], errs[rank], res[0])
		}
	}
	if out := mustAt(t, inst, 0, "kvs", "dir", "fence"); out != "fence.r0 = 0\nfence.r1 = 1\nfence.r2 = 2\nfence.r3 = 3\n" {
		t.Errorf("fence dir: %q", out)
	}
}

// An eventlog watched on rank 2 shows every appended event exactly once,
// in order, while rank 0 appends as fast as it can.
func TestIntegrationEventlogWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 4})
	const n = 500
	mustAt(t, inst, 0, "kvs", "eventlog", "append", "log.ev", "ev0")
	done := make(chan testinstance.Result, 1)
	go func() {
		done <- runAt(t, inst, 2, "kvs", "eventlog", "get", "-w", "-c", strconv.Itoa(n), "log.ev")
	}()
	h := openAt(t, inst, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := 1; i < n; {
		var txn kvs.Txn
		for j := 0; j < 1+i%3 && i < n; j++ { // 1-3 events per commit
			txn.Append("log.ev", []byte(fmt.Sprintf(`{"timestamp":%d.5,"name":"ev%d"}`+"\n", 1700000000+i, i)))
			i++
		}
		if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
			t.Fatal(err)
		}
	}
	var r testinstance.Result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("eventlog watch did not see all events")
	}
	if r.Code != 0 {
		t.Fatalf("watch exit %d: %s", r.Code, r.Stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("watch printed %d events, want %d", len(lines), n)
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 || f[1] != fmt.Sprintf("ev%d", i) {
			t.Fatalf("event %d is %q", i, l)
		}
	}
}

// A second `flux start -Sstatedir=DIR` comes back with every key.
func TestIntegrationRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	statedir := t.TempDir()
	opts := testinstance.Options{Size: 2, Attrs: map[string]string{"statedir": statedir}}
	inst := testinstance.Start(t, opts)
	h := openAt(t, inst, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var txn kvs.Txn
	for i := 0; i < 1000; i++ {
		txn.Put(fmt.Sprintf("keep.d%d.k%d", i%10, i), []byte(strconv.Itoa(i)))
	}
	txn.Put("keep.big", bytes.Repeat([]byte("x"), 100000))
	if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		mustAt(t, inst, 0, "kvs", "eventlog", "append", "keep.log", fmt.Sprintf("e%d", i))
	}
	mustAt(t, inst, 0, "kvs", "link", "keep.d3", "keep.link")
	if code := inst.Stop(); code != 0 {
		t.Fatalf("first instance exit %d: %s", code, inst.Stderr())
	}

	inst2 := testinstance.Start(t, opts)
	h2 := openAt(t, inst2, 1)
	for i := 0; i < 1000; i += 37 {
		v, err := kvs.Get(ctx, h2, "", fmt.Sprintf("keep.d%d.k%d", i%10, i))
		if err != nil || v != strconv.Itoa(i) {
			t.Fatalf("k%d after restart: %q %v", i, v, err)
		}
	}
	if out := mustAt(t, inst2, 1, "kvs", "get", "keep.link.k3"); out != "3\n" {
		t.Errorf("link after restart: %q", out)
	}
	if out := mustAt(t, inst2, 0, "kvs", "eventlog", "get", "keep.log"); strings.Count(out, "\n") != 10 {
		t.Errorf("eventlog after restart: %q", out)
	}
	big, err := kvs.GetRaw(ctx, h2, "", "keep.big")
	if err != nil || len(big) != 100000 {
		t.Errorf("big value after restart: %d bytes, %v", len(big), err)
	}
	// flux dump / restore round trip on the restored instance
	arch := filepath.Join(t.TempDir(), "kvs.tgz")
	mustAt(t, inst2, 0, "dump", "-q", arch)
	mustAt(t, inst2, 0, "restore", "-q", "--key=copy", arch)
	if out := mustAt(t, inst2, 0, "kvs", "get", "copy.keep.d5.k15"); out != "15\n" {
		t.Errorf("restored archive: %q", out)
	}
	if out := mustAt(t, inst2, 0, "kvs", "readlink", "copy.keep.link"); out != "keep.d3\n" {
		t.Errorf("restored link: %q", out)
	}
}

// kill -9 of the rank 0 broker during a commit storm: the next start
// with the same statedir comes back at a consistent root. Each writer
// commits k<i>=i and counter=i in one transaction, so a consistent root
// with counter=c has every k<=c and no k>c.
func TestIntegrationCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	statedir := t.TempDir()
	opts := testinstance.Options{Size: 2, Attrs: map[string]string{"statedir": statedir},
		Args: []string{"--test-exit-timeout=2s"}}
	inst := testinstance.Start(t, opts)
	const writers = 8
	var stop atomic.Bool
	var wg sync.WaitGroup
	acked := make([]int, writers)
	var commits [writers]atomic.Int64
	for w := 0; w < writers; w++ {
		h := openAt(t, inst, w%2)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ctx := context.Background()
			for i := 1; !stop.Load(); i++ {
				var txn kvs.Txn
				txn.Put(fmt.Sprintf("storm.w%d.k%d", w, i), []byte(strconv.Itoa(i)))
				txn.Put(fmt.Sprintf("storm.w%d.counter", w), []byte(strconv.Itoa(i)))
				txn.Append(fmt.Sprintf("storm.w%d.log", w), []byte(fmt.Sprintf("%d\n", i)))
				if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
					return // the broker died
				}
				acked[w] = i
				commits[w].Store(int64(i))
			}
		}(w)
	}
	// the crash comes in the middle of the storm: once every writer has
	// had 200 commits acknowledged, and past the first periodic
	// checkpoints (3 s), so that some commits are durable and some not
	begin := time.Now()
	for deadline := begin.Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		least := commits[0].Load()
		for w := range commits {
			least = min(least, commits[w].Load())
		}
		if least >= 200 && time.Since(begin) >= 3*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writers had only %d commits each after 60 s", least)
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(mustAt(t, inst, 0, "getattr", "broker.pid")))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	inst.Stop() // ends the initial program, whose broker is gone
	wg.Wait()

	inst2 := testinstance.Start(t, opts)
	h := openAt(t, inst2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	total := 0
	for w := 0; w < writers; w++ {
		c := 0
		v, err := kvs.Get(ctx, h, "", fmt.Sprintf("storm.w%d.counter", w))
		if err == nil {
			if c, err = strconv.Atoi(v); err != nil {
				t.Fatalf("writer %d counter %q", w, v)
			}
		} else if !isENOENT(err) {
			t.Fatalf("writer %d counter: %v", w, err)
		}
		if c > acked[w] {
			t.Errorf("writer %d: restored counter %d beyond the last acknowledged commit %d", w, c, acked[w])
		}
		for i := 1; i <= c; i++ {
			v, err := kvs.Get(ctx, h, "", fmt.Sprintf("storm.w%d.k%d", w, i))
			if err != nil || v != strconv.Itoa(i) {
				t.Fatalf("writer %d: counter %d but k%d = %q, %v", w, c, i, v, err)
			}
		}
		if _, err := kvs.Get(ctx, h, "", fmt.Sprintf("storm.w%d.k%d", w, c+1)); !isENOENT(err) {
			t.Fatalf("writer %d: counter %d but k%d exists (%v)", w, c, c+1, err)
		}
		if c > 0 {
			log, err := kvs.Get(ctx, h, "", fmt.Sprintf("storm.w%d.log", w))
			if err != nil || strings.Count(log, "\n") != c {
				t.Fatalf("writer %d: counter %d but log has %d lines (%v)", w, c, strings.Count(log, "\n"), err)
			}
		}
		total += c
		t.Logf("writer %d: %d acknowledged, %d restored", w, acked[w], c)
	}
	if total == 0 {
		t.Errorf("nothing survived the crash (checkpoints are periodic: expected the commits of ~3s)")
	}
	// the restored KVS takes new commits
	mustAt(t, inst2, 0, "kvs", "put", "after.crash=1")
	mustAt(t, inst2, 0, "kvs", "dir", "-R", "storm")
}

func isENOENT(err error) bool {
	var fe *flux.Error
	if e, ok := err.(*flux.Error); ok {
		fe = e
	}
	return fe != nil && fe.Errno == syscall.ENOENT
}

// A guest (uid 65534, the instance owned by root) may use a namespace it
// owns and nothing else.
func TestIntegrationGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	bin := guestBinary(t, inst)
	mustAt(t, inst, 0, "kvs", "namespace", "create", "-o", "65534", "guestns")
	mustAt(t, inst, 0, "kvs", "put", "secret=owner-only")
	guest := &syscall.Credential{Uid: 65534, Gid: 65534}
	for rank := 0; rank < 2; rank++ {
		uri := rankURI(inst, rank)
		if r := runAs(t, bin, uri, guest, "", "kvs", "put", "-N", "guestns", fmt.Sprintf("mine.r%d=1", rank)); r.Code != 0 {
			t.Fatalf("rank %d: guest put in own namespace: %s", rank, r.Stderr)
		}
		if r := runAs(t, bin, uri, guest, "", "kvs", "get", "-N", "guestns", fmt.Sprintf("mine.r%d", rank)); r.Stdout != "1\n" {
			t.Fatalf("rank %d: guest get in own namespace: %q %s", rank, r.Stdout, r.Stderr)
		}
		r := runAs(t, bin, uri, guest, "", "kvs", "get", "secret")
		if r.Code == 0 || !strings.Contains(r.Stderr, "may not access") {
			t.Errorf("rank %d: guest read of primary: exit %d %q", rank, r.Code, r.Stderr)
		}
		r = runAs(t, bin, uri, guest, "", "kvs", "put", "intruder=1")
		if r.Code == 0 || !strings.Contains(r.Stderr, "may not access") {
			t.Errorf("rank %d: guest write to primary: exit %d %q", rank, r.Code, r.Stderr)
		}
		r = runAs(t, bin, uri, guest, "", "kvs", "link", "-N", "guestns", "x", "l")
		if r.Code == 0 || !strings.Contains(r.Stderr, "guests may not commit symlink") {
			t.Errorf("rank %d: guest symlink: exit %d %q", rank, r.Code, r.Stderr)
		}
		r = runAs(t, bin, uri, guest, "", "kvs", "namespace", "create", "guest2")
		if r.Code == 0 {
			t.Errorf("rank %d: guest created a namespace", rank)
		}
	}
	if out := mustAt(t, inst, 0, "kvs", "ls", "-N", "guestns", "mine"); out != "r0    r1\n" {
		t.Errorf("owner view of guest namespace: %q", out)
	}
}

// guestBinary copies the flux binary where another user can run it and
// opens the path to the broker sockets.
func guestBinary(t *testing.T, inst *testinstance.Instance) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	data, err := os.ReadFile(inst.Bin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "flux")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	sock := strings.TrimPrefix(inst.URI, "local://")
	for d := filepath.Dir(filepath.Dir(sock)); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	for r := 0; r < 2; r++ {
		d := filepath.Dir(strings.TrimPrefix(rankURI(inst, r), "local://"))
		if fi, err := os.Stat(d); err == nil {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	return bin
}
