package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/modules/kvs/kvstest"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

func TestKVPrintf(t *testing.T) {
	tests := []struct {
		val    string
		maxcol int
		want   string
	}{
		{"short", 80, "k = short\n"},
		{"0123456789abcdef", 12, "k = 01234...\n"},
		{"line1\nline2", 80, "k = line1...\n"},
		{"line1\n", 80, "k = line1\n"},
		{"bin\x01ary", 80, "k = bin...\n"},
		{"0123456789abcdef", 0, "k = 0123456789abcdef\n"},
		{"0123456789", 3, "k = 0123456789\n"},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		kvPrintf(&b, "k", tc.maxcol, tc.val)
		if b.String() != tc.want {
			t.Errorf("kvPrintf(%q, %d) = %q, want %q", tc.val, tc.maxcol, b.String(), tc.want)
		}
	}
}

func TestListColumns(t *testing.T) {
	names := []string{"a", "bbb", "cc", "d"}
	for width, want := range map[int]string{
		80: "a      bbb    cc     d\n",
		14: "a      bbb\ncc     d\n",
		1:  "a\nbbb\ncc\nd\n",
		0:  "a      bbb    cc     d\n",
	} {
		var b bytes.Buffer
		listColumns(&b, names, names, width)
		if b.String() != want {
			t.Errorf("width %d: %q, want %q", width, b.String(), want)
		}
	}
}

func TestErrText(t *testing.T) {
	if got := errText(flux.NewError(syscall.ENOENT, "")); got != "No such file or directory" {
		t.Errorf("bare errno: %q", got)
	}
	if got := errText(flux.NewError(syscall.EPERM, "uid 5 may not")); got != "uid 5 may not" {
		t.Errorf("message: %q", got)
	}
}

func TestPrintEvent(t *testing.T) {
	e := eventlog.Event{Timestamp: 1700000000.25, Name: "start", Context: []byte(`{ "a" : 1 }`)}
	var b bytes.Buffer
	printEvent(&b, e, false)
	printEvent(&b, eventlog.Event{Timestamp: 2.5, Name: "x"}, false)
	printEvent(&b, e, true)
	want := "1700000000.250000 start {\"a\":1}\n2.500000 x\n{\"timestamp\":1700000000.25,\"name\":\"start\",\"context\":{\"a\":1}}\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

// The subcommands' logic against an in-process KVS.
func TestKVSCommands(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	var out bytes.Buffer
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		if out.String() != want {
			t.Errorf("output %q, want %q", out.String(), want)
		}
		out.Reset()
	}

	must(kvsPut(ctx, h, kvsPutOptions{out: kvsCommitOutput{sequence: true}},
		[]string{"test.a=42", "test.b=", "dir.sub.x=1", "dir.y=two"}, nil, &out))
	check("1\n")
	must(kvsGet(ctx, h, kvsGetOptions{}, []string{"test.a"}, &out))
	check("42\n")
	must(kvsGet(ctx, h, kvsGetOptions{label: true}, []string{"test.a", "test.b"}, &out))
	check("test.a=42\ntest.b=")
	must(kvsGet(ctx, h, kvsGetOptions{treeobj: true}, []string{"test.a"}, &out))
	check("{\"data\":\"NDI=\",\"type\":\"val\",\"ver\":1}\n")
	err := kvsGet(ctx, h, kvsGetOptions{}, []string{"nope"}, &out)
	if err == nil || err.Error() != "nope: No such file or directory" {
		t.Errorf("missing key error %v", err)
	}
	must(kvsPut(ctx, h, kvsPutOptions{raw: true}, []string{"raw=-"}, strings.NewReader("a\x00b"), &out))
	must(kvsGet(ctx, h, kvsGetOptions{raw: true}, []string{"raw"}, &out))
	check("a\x00b")
	must(kvsPut(ctx, h, kvsPutOptions{appendData: true}, []string{"raw=c"}, nil, &out))
	must(kvsGet(ctx, h, kvsGetOptions{raw: true}, []string{"raw"}, &out))
	check("a\x00bc")

	must(kvsDir(ctx, h, kvsDirOptions{recursive: true}, "dir", 80, &out))
	check("dir.sub.x = 1\ndir.y = two\n")
	must(kvsDir(ctx, h, kvsDirOptions{}, "dir", 80, &out))
	check("dir.sub.\ndir.y = two\n")
	var errw bytes.Buffer
	must(kvsLs(ctx, h, kvsLsOptions{recursive: true}, []string{"dir"}, 80, &out, &errw))
	check("dir:\nsub    y\n\ndir.sub:\nx\n")
	must(kvsLs(ctx, h, kvsLsOptions{classify: true}, []string{"dir", "test.a"}, 80, &out, &errw))
	check("test.a\n\ndir:\nsub.   y\n")
	if err := kvsLs(ctx, h, kvsLsOptions{}, []string{"nope", "test"}, 80, &out, &errw); err == nil {
		t.Error("ls of a missing key succeeded")
	}
	check("a    b\n")
	if errw.String() != "nope: No such file or directory\n" {
		t.Errorf("ls stderr %q", errw.String())
	}

	must(kvsUnlink(ctx, h, kvsUnlinkOptions{force: true}, []string{"test.a", "never"}, &out))
	if err := kvsUnlink(ctx, h, kvsUnlinkOptions{}, []string{"dir"}, &out); err == nil ||
		!strings.Contains(err.Error(), "Directory not empty") {
		t.Errorf("unlink of non-empty dir: %v", err)
	}
	must(kvsUnlink(ctx, h, kvsUnlinkOptions{recursive: true}, []string{"dir"}, &out))
	if _, err := kvs.Get(ctx, h, "", "dir.y"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("unlink -R left dir.y: %v", err)
	}

	must(kvsNamespaceList(ctx, h, &out))
	check("NAMESPACE                                 OWNER      FLAGS\nprimary                              " +
		strings.Repeat(" ", 10-len(itoa(os.Getuid()))) + itoa(os.Getuid()) + " 0x00000000\n")
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

func TestKVSEventlogCommands(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	appendEv := func(name string) {
		var txn kvs.Txn
		line, _ := eventlog.Encode(eventlog.Event{Timestamp: 100.5, Name: name})
		txn.Append("log", line)
		if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
			t.Fatal(err)
		}
	}
	appendEv("first")
	appendEv("second")
	var out bytes.Buffer
	if err := kvsEventlogGet(ctx, h, kvsEventlogGetOptions{}, "log", &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "100.500000 first\n100.500000 second\n" {
		t.Errorf("eventlog get: %q", out.String())
	}
	// wait-event sees an event appended later; -c stops a watch
	done := make(chan error, 1)
	var wout bytes.Buffer
	go func() {
		done <- kvsWaitEvent(ctx, h, kvsWaitEventOptions{verbose: true}, "log", "third", &wout)
	}()
	// the watch is set before the event comes
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var st struct {
			Watchers int `json:"watchers"`
		}
		if err := h.Call(ctx, "kvs-watch.stats-get", flux.NodeidAny, nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.Watchers > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("wait-event set no watch in 10 s")
		}
	}
	appendEv("third")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if wout.String() != "100.500000 first\n100.500000 second\n100.500000 third\n" {
		t.Errorf("wait-event -v: %q", wout.String())
	}
	out.Reset()
	if err := kvsEventlogGet(ctx, h, kvsEventlogGetOptions{watch: true, count: 2}, "log", &out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n") != 2 {
		t.Errorf("eventlog get -w -c 2: %q", out.String())
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := kvsWaitEvent(tctx, h, kvsWaitEventOptions{timeout: "0.2"}, "log", "never", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("wait-event timeout: %v", err)
	}
}

func TestDumpRestore(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	ctx := brokertest.Ctx(t)
	var txn kvs.Txn
	txn.Put("a.b", []byte("1"))
	txn.Put("a.big", bytes.Repeat([]byte("z"), 500))
	txn.Append("a.log", []byte("x"))
	txn.Append("a.log", []byte("y"))
	txn.Symlink("a.link", "ns", "t.k")
	if _, err := kvs.Commit(ctx, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.tar")
	var errw bytes.Buffer
	if err := runDump(ctx, h, dumpOptions{}, path, io.Discard, &errw); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	tr := tar.NewReader(f)
	var names []string
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		entry := hdr.Name
		if hdr.Typeflag == tar.TypeSymlink {
			entry += " -> " + hdr.Linkname
		}
		names = append(names, entry)
	}
	f.Close()
	if got := strings.Join(names, ","); got != "a/b,a/big,a/link -> ns::t.k,a/log" {
		t.Errorf("archive holds %s", got)
	}
	if err := runRestore(ctx, h, dumpOptions{key: "copy", quiet: true}, path, nil, &errw); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"copy.a.b": "1", "copy.a.log": "xy", "copy.a.big": strings.Repeat("z", 500)} {
		if v, err := kvs.Get(ctx, h, "", key); err != nil || v != want {
			t.Errorf("%s = %q, %v", key, v, err)
		}
	}
	if target, ns, err := kvs.Readlink(ctx, h, "", "copy.a.link"); err != nil || target != "t.k" || ns != "ns" {
		t.Errorf("restored link %q %q %v", target, ns, err)
	}
	if err := runRestore(ctx, h, dumpOptions{}, path, nil, &errw); err == nil {
		t.Error("restore without --key or --checkpoint succeeded")
	}
}
