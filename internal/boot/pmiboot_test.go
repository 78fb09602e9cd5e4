package boot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/pmi"
)

// pmiGroup runs planPMI for size ranks against one in-process PMI
// server; hostOf names each rank's host.
func pmiGroup(t *testing.T, size int, hostOf func(r int) string, pp func(r int) pmiParams) ([]*Plan, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := &pmi.Server{Info: pmi.Info{Size: size, KVSName: "boot-test"}, KVS: pmi.NewMemKVS(size)}
	plans := make([]*Plan, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := 0; r < size; r++ {
		cc, sc := net.Pipe()
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.ServeConn(ctx, sc, r)
			sc.Close()
		}()
		go func() {
			defer wg.Done()
			h := fakeHost(hostOf(r))
			plans[r], errs[r] = planPMI(ctx, pmi.NewClient(cc, r, size), *h, pp(r))
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("PMI boot hung")
	}
	t.Cleanup(func() {
		for _, p := range plans {
			p.Cleanup()
		}
	})
	return plans, errs
}

func TestPMIBootOneHostUsesIPC(t *testing.T) {
	plans, errs := pmiGroup(t, 4, func(int) string { return "node0" }, func(int) pmiParams { return pmiParams{} })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, p := range plans {
		if p.Rank != uint32(r) || p.Size != 4 || p.Fanout != 2 || p.Method != "pmi" {
			t.Errorf("rank %d: %+v", r, p)
		}
		if strings.Join(p.Hostlist, ",") != "node0,node0,node0,node0" {
			t.Errorf("rank %d hostlist %v", r, p.Hostlist)
		}
	}
	// ranks 0 and 1 have children (fanout 2, size 4)
	for _, r := range []int{0, 1} {
		p := plans[r]
		if p.Rundir == "" || p.BindURI != "ipc://"+filepath.Join(p.Rundir, "tbon") {
			t.Errorf("rank %d: bind %q rundir %q", r, p.BindURI, p.Rundir)
		}
	}
	// leaves bind too: a broker joining later may connect below them
	for _, r := range []int{2, 3} {
		p := plans[r]
		if p.Rundir == "" || p.BindURI != "ipc://"+filepath.Join(p.Rundir, "tbon") {
			t.Errorf("leaf rank %d: bind %q rundir %q", r, p.BindURI, p.Rundir)
		}
	}
	if plans[1].ParentURI != plans[0].BindURI || plans[2].ParentURI != plans[0].BindURI || plans[3].ParentURI != plans[1].BindURI {
		t.Errorf("parents: %q %q %q", plans[1].ParentURI, plans[2].ParentURI, plans[3].ParentURI)
	}
	dir := plans[0].Rundir
	plans[0].Cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("rundir %s not removed: %v", dir, err)
	}
}

func TestPMIBootHostsNeedKey(t *testing.T) {
	_, errs := pmiGroup(t, 3, func(r int) string { return fmt.Sprintf("node%d", r) }, func(int) pmiParams { return pmiParams{} })
	for r, err := range errs {
		if !errors.Is(err, ErrNeedCert) || !strings.Contains(err.Error(), "-S tbon.cert=PATH") {
			t.Errorf("rank %d: %v, want ErrNeedCert naming tbon.cert", r, err)
		}
	}
}

func TestPMIBootHostsTCP(t *testing.T) {
	plans, errs := pmiGroup(t, 3, func(r int) string { return fmt.Sprintf("node%d", r) },
		func(int) pmiParams { return pmiParams{certPath: "/some/key", hint: "lo", fanout: 1} })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// fanout 1: a chain 0 <- 1 <- 2
	for _, r := range []int{0, 1} {
		if !strings.HasPrefix(plans[r].BindURI, "tcp://127.0.0.1:") || plans[r].Rundir != "" {
			t.Errorf("rank %d bind %q", r, plans[r].BindURI)
		}
	}
	if !strings.HasPrefix(plans[2].BindURI, "tcp://127.0.0.1:") || plans[1].ParentURI != plans[0].BindURI || plans[2].ParentURI != plans[1].BindURI {
		t.Errorf("chain: %+v %+v %+v", plans[0], plans[1], plans[2])
	}
	if plans[0].CertPath != "/some/key" || strings.Join(plans[2].Hostlist, ",") != "node0,node1,node2" {
		t.Errorf("plan %+v", plans[2])
	}
}

func TestPMIBootBadHintAbortsEveryone(t *testing.T) {
	_, errs := pmiGroup(t, 3, func(r int) string { return fmt.Sprintf("node%d", r) },
		func(r int) pmiParams {
			if r == 0 {
				return pmiParams{certPath: "/k", hint: "eth9"}
			}
			return pmiParams{certPath: "/k", hint: "lo"}
		})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "tbon.interface-hint=eth9") {
		t.Errorf("rank 0: %v", errs[0])
	}
	for r := 1; r < 3; r++ {
		if !errors.Is(errs[r], ErrPMI) {
			t.Errorf("rank %d: %v, want a PMI failure (the group was aborted)", r, errs[r])
		}
	}
}

func TestPMIBootSingleton(t *testing.T) {
	plans, errs := pmiGroup(t, 1, func(int) string { return "solo" }, func(int) pmiParams { return pmiParams{} })
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if p := plans[0]; p.Size != 1 || !strings.HasPrefix(p.BindURI, "ipc://") || p.Hostlist[0] != "solo" {
		t.Fatalf("%+v", p)
	}
}

// TestPMIBootJoiners: brokers joining a running instance (ranks 2 and 3
// of a new size 4, after an instance of 2 booted) boot through a PMI
// group of their own whose KVS holds the first brokers' keys: each
// finds its parent's URI there, rank 3 a leaf's of the instance booted.
func TestPMIBootJoiners(t *testing.T) {
	first, errs := pmiGroup(t, 2, func(int) string { return "node0" }, func(int) pmiParams { return pmiParams{} })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kvs := pmi.NewMemKVS(2) // the joiners' group: ranks 2 and 3
	for r, p := range first {
		kvs.Preput(hostKey(r), "node0")
		kvs.Preput(uriKey(r), p.BindURI)
	}
	s := &pmi.Server{Info: pmi.Info{Size: 4, KVSName: "boot-grow"}, KVS: kvs}
	plans := make([]*Plan, 4)
	var wg sync.WaitGroup
	for _, r := range []int{2, 3} {
		cc, sc := net.Pipe()
		wg.Add(2)
		go func() {
			defer wg.Done()
			s.ServeConn(ctx, sc, r)
			sc.Close()
		}()
		go func() {
			defer wg.Done()
			plans[r], errs[r-2] = planPMI(ctx, pmi.NewClient(cc, r, 4), *fakeHost("node0"), pmiParams{})
		}()
	}
	wg.Wait()
	t.Cleanup(func() { plans[2].Cleanup(); plans[3].Cleanup() })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if plans[2].Rank != 2 || plans[2].Size != 4 || plans[2].ParentURI != first[0].BindURI {
		t.Errorf("rank 2: %+v, want parent %s", plans[2], first[0].BindURI)
	}
	if plans[3].Rank != 3 || plans[3].Size != 4 || plans[3].ParentURI != first[1].BindURI {
		t.Errorf("rank 3: %+v, want parent %s (rank 1, a leaf at size 2)", plans[3], first[1].BindURI)
	}
}

// TestDecidePMIFromEnv: with no [bootstrap] table and PMI_FD in the
// environment, Decide boots through PMI (and [tbon] still applies).
func TestDecidePMIFromEnv(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	sf := os.NewFile(uintptr(fds[1]), "pmi-server")
	sc, err := net.FileConn(sf)
	sf.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	s := &pmi.Server{Info: pmi.Info{Size: 1, KVSName: "k"}, KVS: pmi.NewMemKVS(1)}
	served := make(chan error, 1)
	go func() { served <- s.ServeConn(context.Background(), sc, 0) }()
	env := map[string]string{"PMI_FD": strconv.Itoa(fds[0]), "PMI_RANK": "0", "PMI_SIZE": "1"}
	dir := writeConf(t, map[string]string{"tbon.toml": "[tbon]\nfanout = 5\n"})
	p, err := Decide(context.Background(), Options{ConfigPath: dir, Host: fakeHost("solo"),
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if p.Method != "pmi" || p.Size != 1 || p.Fanout != 5 {
		t.Fatalf("%+v", p)
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v (the broker should finalize)", err)
	}
}
