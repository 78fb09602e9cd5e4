package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// The command tests run against real brokers inside the test process
// (broker.New + Run, wired as flux start wires them), with a test module
// compiled in. internal/broker's cli_integration_test.go covers the same
// commands through the flux binary.

// testmod is a module for the command tests: it answers testmod.ping (as
// every module does, see broker.moduleHost) and registers one more
// service, testmod-extra.
type testmod struct{}

func (testmod) Name() string { return "testmod" }

func (testmod) Run(ctx context.Context, h *flux.Handle, args []string) error {
	for _, a := range args {
		if strings.HasPrefix(a, "bad=") {
			return fmt.Errorf("module argument %q: refused", a)
		}
	}
	h.HandleFunc("testmod-extra.hello", func(r *flux.Request) { r.Respond(map[string]any{"args": args}) })
	if err := h.RegisterService(ctx, "testmod-extra"); err != nil {
		return err
	}
	return h.Serve(ctx)
}

// testBrokers is an in-process instance.
type testBrokers struct {
	brokers []*broker.Broker
	done    []chan int
	uri     string
}

// startBrokers runs size brokers (fanout 2) named node0..node<size-1>,
// with testmod compiled in and, when load is set, loaded on rank 0. It
// returns once rank 0 is in the run state; the instance shuts down when
// the test ends.
func startBrokers(t *testing.T, size int, load bool) *testBrokers {
	t.Helper()
	dir, err := os.MkdirTemp("", "fgcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	reg := module.NewRegistry()
	if err := reg.Register("testmod", func() module.Module { return testmod{} }); err != nil {
		t.Fatal(err)
	}
	var mods []broker.ModuleSpec
	if load {
		mods = []broker.ModuleSpec{{Name: "testmod", Ranks: "0"}}
	}
	hosts := make([]string, size)
	for i := range hosts {
		hosts[i] = "node" + strconv.Itoa(i)
	}
	tb := &testBrokers{}
	for r := 0; r < size; r++ {
		cfg := broker.Config{
			Rank:           uint32(r),
			Size:           uint32(size),
			Fanout:         2,
			Rundir:         filepath.Join(dir, strconv.Itoa(r)),
			Hostlist:       hosts,
			Registry:       reg,
			Modules:        mods,
			TBONTimeout:    5 * time.Second,
			ConnectTimeout: 10 * time.Second,
			LogStderrLevel: -1,
		}
		if r > 0 {
			cfg.ParentURI = "ipc://" + filepath.Join(dir, strconv.Itoa((r-1)/2), "tbon")
		}
		b, err := broker.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() {
			code, err := b.Run()
			if err != nil {
				t.Errorf("broker %d: %v", r, err)
			}
			done <- code
		}()
		tb.brokers = append(tb.brokers, b)
		tb.done = append(tb.done, done)
	}
	tb.uri = tb.brokers[0].LocalURI()
	t.Cleanup(tb.stop)
	h := tb.handle(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		state, err := attrAt(context.Background(), h, flux.NodeidAny, "broker.state")
		if err == nil && state == "run" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 did not reach the run state in 20s (state %q, err %v)", state, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return tb
}

// handle connects to rank 0; it is closed when the test ends.
func (tb *testBrokers) handle(t *testing.T) *flux.Handle {
	t.Helper()
	h, err := flux.Open(tb.uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func (tb *testBrokers) stop() {
	tb.brokers[0].Shutdown(0)
	for _, d := range tb.done {
		select {
		case <-d:
		case <-time.After(30 * time.Second):
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func listModules(t *testing.T, h *flux.Handle, long bool) string {
	t.Helper()
	var resp flux.ModuleList
	if err := h.Call(testCtx(t), "module.list", flux.NodeidAny, nil, &resp); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeModuleList(&out, resp.Mods, long)
	return out.String()
}

func TestModuleLifecycle(t *testing.T) {
	tb := startBrokers(t, 1, false)
	h := tb.handle(t)
	ctx := testCtx(t)

	header := "Module                   Idle  S Service\n"
	if got := listModules(t, h, false); got != header {
		t.Fatalf("list with nothing loaded:\n%q", got)
	}
	if err := moduleLoad(ctx, h, flux.NodeidAny, "testmod", []string{"a=1", "--b"}); err != nil {
		t.Fatal(err)
	}
	// module.load answers once the module runs; it registers
	// testmod-extra a moment later.
	want := header + "testmod                     0  R testmod-extra\n"
	var got string
	waitFor(t, "testmod-extra", func() bool {
		got = listModules(t, h, false)
		return strings.Contains(got, "testmod-extra")
	})
	if got != want {
		t.Errorf("list:\n got %q\nwant %q", got, want)
	}
	if got := listModules(t, h, true); !strings.Contains(got, "Path\n") || !strings.Contains(got, "builtin:testmod") {
		t.Errorf("list --long has no path:\n%s", got)
	}
	var hello struct {
		Args []string `json:"args"`
	}
	if err := h.Call(ctx, "testmod-extra.hello", flux.NodeidAny, nil, &hello); err != nil || strings.Join(hello.Args, " ") != "a=1 --b" {
		t.Errorf("module args: %v %v", hello.Args, err)
	}
	if err := moduleLoad(ctx, h, flux.NodeidAny, "testmod", nil); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("second load: got %v, want EEXIST", err)
	}
	if err := moduleLoad(ctx, h, flux.NodeidAny, "nosuch", nil); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("load of unknown module: got %v, want ENOENT", err)
	}

	var out bytes.Buffer
	if err := moduleStats(ctx, h, flux.NodeidAny, "testmod", moduleStatsOptions{scale: 1}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "{") || !strings.Contains(out.String(), `"name":"testmod"`) {
		t.Errorf("stats: %s", out.String())
	}
	out.Reset()
	if err := moduleStats(ctx, h, flux.NodeidAny, "testmod", moduleStatsOptions{parse: "name", scale: 1}, &out); err != nil || out.String() != "\"testmod\"\n" {
		t.Errorf("stats --parse=name: %q %v", out.String(), err)
	}
	out.Reset()
	if err := moduleStats(ctx, h, flux.NodeidAny, "testmod", moduleStatsOptions{rusage: true, parse: "maxrss", typ: "int", scale: 1}, &out); err != nil {
		t.Errorf("stats -R: %v", err)
	} else if n, err := strconv.Atoi(strings.TrimSpace(out.String())); err != nil || n <= 0 {
		t.Errorf("stats -R -p maxrss: %q", out.String())
	}

	if err := moduleRemove(ctx, h, flux.NodeidAny, "testmod", false); err != nil {
		t.Fatal(err)
	}
	if got := listModules(t, h, false); got != header {
		t.Errorf("list after remove:\n%s", got)
	}
	if err := moduleRemove(ctx, h, flux.NodeidAny, "testmod", false); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("remove of unloaded module: got %v, want ENOENT", err)
	}
	if err := moduleRemove(ctx, h, flux.NodeidAny, "testmod", true); err != nil {
		t.Errorf("remove --force of unloaded module: %v", err)
	}
	if err := moduleStats(ctx, h, flux.NodeidAny, "testmod", moduleStatsOptions{scale: 1}, &out); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stats of unloaded module: got %v, want ENOENT", err)
	}
}

// TestModuleRank sends module requests to another broker with --rank.
func TestModuleRank(t *testing.T) {
	tb := startBrokers(t, 2, true)
	h := tb.handle(t)
	ctx := testCtx(t)
	if err := moduleLoad(ctx, h, 1, "testmod", nil); err != nil {
		t.Fatal(err)
	}
	var resp flux.ModuleList
	if err := h.Call(ctx, "module.list", 1, nil, &resp); err != nil || len(resp.Mods) != 1 {
		t.Fatalf("module.list on rank 1: %+v %v", resp, err)
	}
	if err := moduleRemove(ctx, h, 1, "testmod", false); err != nil {
		t.Fatal(err)
	}
	// rank 0's copy is untouched
	if !strings.Contains(listModules(t, h, false), "testmod") {
		t.Error("removing on rank 1 removed rank 0's module")
	}
}

func TestWriteModuleList(t *testing.T) {
	mods := []flux.ModuleInfo{
		{Name: "zeta", Idle: 12345, Status: 2, Services: []string{"zeta"}, Path: "builtin:zeta"},
		{Name: "kvs", Idle: 3, Status: 0, Services: []string{"kvs", "kvs-watch", "content"}, Path: "builtin:kvs"},
	}
	var out bytes.Buffer
	writeModuleList(&out, mods, false)
	want := "Module                   Idle  S Service\n" +
		"kvs                         3  I content,kvs-watch\n" +
		"zeta                     idle  R\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSelectStat(t *testing.T) {
	payload := []byte(`{"a":{"b":3,"f":1.5,"s":"x"},"n":10}`)
	tests := []struct {
		name string
		o    moduleStatsOptions
		want string
		err  bool
	}{
		{"whole", moduleStatsOptions{scale: 1}, `{"a":{"b":3,"f":1.5,"s":"x"},"n":10}`, false},
		{"object", moduleStatsOptions{parse: "a", scale: 1}, `{"b":3,"f":1.5,"s":"x"}`, false},
		{"int", moduleStatsOptions{parse: "a.b", scale: 1}, "3", false},
		{"double", moduleStatsOptions{parse: "a.f", scale: 1}, "1.5", false},
		{"as double", moduleStatsOptions{parse: "n", typ: "double", scale: 1}, "10.000000", false},
		{"as int", moduleStatsOptions{parse: "a.f", typ: "int", scale: 1}, "1", false},
		{"scaled", moduleStatsOptions{parse: "n", scale: 0.5}, "5", false},
		{"string", moduleStatsOptions{parse: "a.s", scale: 1}, `"x"`, false},
		{"missing", moduleStatsOptions{parse: "a.zz", scale: 1}, "", true},
		{"through a number", moduleStatsOptions{parse: "n.x", scale: 1}, "", true},
		{"type of a string", moduleStatsOptions{parse: "a.s", typ: "int", scale: 1}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectStat(payload, tt.o)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModuleCommandErrors(t *testing.T) {
	t.Setenv("FLUX_URI", "")
	for _, args := range [][]string{
		{"module", "load"},
		{"module", "remove"},
		{"module", "stats", "-t", "float", "x"},
		{"module", "list", "-r", "nonsense"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, strings.NewReader(""), &out, &errb); code == 0 {
			t.Errorf("%v: exit 0, want failure", args)
		} else if errb.Len() == 0 {
			t.Errorf("%v: no error message", args)
		}
	}
}

// TestModuleDebug: flux module debug reads and changes a module's debug
// flags (the NAME.debug service every module answers), printing them as
// flux-core's does.
func TestModuleDebug(t *testing.T) {
	tb := startBrokers(t, 1, true)
	t.Setenv("FLUX_URI", tb.uri)
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(append([]string{"module", "debug"}, args...), strings.NewReader(""), &out, &errb)
		return out.String(), errb.String(), code
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"testmod"}, "0x0\n"},
		{[]string{"--setbit", "0x2", "testmod"}, "0x2\n"},
		{[]string{"--setbit=1", "testmod"}, "0x3\n"},
		{[]string{"--clearbit", "0x1", "testmod"}, "0x2\n"},
		{[]string{"--set", "0xff00", "testmod"}, "0xff00\n"},
		{[]string{"-c", "0x1000", "testmod"}, "0xef00\n"},
		{[]string{"--clear", "testmod"}, "0x0\n"},
		{[]string{"--set", "4", "testmod"}, "0x4\n"},
		{[]string{"-C", "testmod"}, "0x0\n"},
	} {
		out, errs, code := run(tt.args...)
		if code != 0 || out != tt.want {
			t.Errorf("flux module debug %v: exit %d, %q (stderr %q), want %q", tt.args, code, out, errs, tt.want)
		}
	}
	if _, errs, code := run("--set", "zz", "testmod"); code == 0 || !strings.Contains(errs, `--set="zz"`) {
		t.Errorf("--set zz: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := run("nosuch"); code == 0 || !strings.Contains(errs, "nosuch.debug") {
		t.Errorf("debug of an unloaded module: exit %d, stderr %q", code, errs)
	}
}

// TestModuleLoadFailsAtStart: a module that refuses its arguments as it
// starts makes flux module load fail with its reason, and is not left
// loaded; the same module loads with good arguments afterwards.
func TestModuleLoadFailsAtStart(t *testing.T) {
	tb := startBrokers(t, 1, false)
	t.Setenv("FLUX_URI", tb.uri)
	var out, errb bytes.Buffer
	if code := Main([]string{"module", "load", "testmod", "bad=1"}, strings.NewReader(""), &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), `module argument "bad=1": refused`) {
		t.Fatalf("load with a refused argument: exit %d, stderr %q", code, errb.String())
	}
	h := tb.handle(t)
	if got := listModules(t, h, false); strings.Contains(got, "testmod") {
		t.Fatalf("the failed module is listed:\n%s", got)
	}
	errb.Reset()
	if code := Main([]string{"module", "reload", "-f", "testmod", "bad=2"}, strings.NewReader(""), &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), `"bad=2"`) {
		t.Fatalf("reload with a refused argument: exit %d, stderr %q", code, errb.String())
	}
	if err := moduleLoad(testCtx(t), h, flux.NodeidAny, "testmod", []string{"good"}); err != nil {
		t.Fatalf("load after the failures: %v", err)
	}
}
