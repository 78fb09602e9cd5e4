package broker

import (
	"errors"
	"strconv"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

func TestBrokerMapping(t *testing.T) {
	for _, tt := range []struct {
		hosts []string
		want  string
	}{
		{[]string{"vm", "vm", "vm", "vm"}, "[[0,1,4,1]]"},
		{[]string{"a", "b", "c"}, "[[0,3,1,1]]"},
		{[]string{"a", "a", "b", "b"}, "[[0,2,2,1]]"},
		{[]string{"a"}, "[[0,1,1,1]]"},
	} {
		if got := brokerMapping(tt.hosts); got != tt.want {
			t.Errorf("brokerMapping(%v) = %s, want %s", tt.hosts, got, tt.want)
		}
	}
}

// TestLogAttrs: log-level, log-stderr-level and log-ring-size are
// attributes flux setattr changes at runtime, and they take effect.
func TestLogAttrs(t *testing.T) {
	b := &Broker{attrs: newAttrTable(), ring: newLogRing(1024, 0)}
	b.ring.stderr = nil
	b.initLogAttrs()
	get := func(name string) string {
		t.Helper()
		v, _, err := b.attrs.get(name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for name, want := range map[string]string{"log-level": "7", "log-stderr-level": "3", "log-ring-size": "1024"} {
		if got := get(name); got != want {
			t.Errorf("%s = %q, want default %q", name, got, want)
		}
	}

	if err := b.attrs.userSet("log-level", "3"); err != nil {
		t.Fatal(err)
	}
	b.ring.append(flux.LogEntry{Severity: sevInfo, Message: "dropped"})
	b.ring.append(flux.LogEntry{Severity: sevErr, Message: "kept"})
	if s := b.ring.snapshot(); len(s) != 1 || s[0].Message != "kept" {
		t.Errorf("log-level 3 kept %+v", s)
	}
	if err := b.attrs.userSet("log-level", "-1"); err != nil {
		t.Fatal(err)
	}
	b.ring.append(flux.LogEntry{Severity: sevEmerg, Message: "none"})
	if s := b.ring.snapshot(); len(s) != 1 {
		t.Errorf("log-level -1 should match nothing: %+v", s)
	}
	b.attrs.userSet("log-level", "7")

	for i := range 5 {
		b.ring.append(flux.LogEntry{Severity: sevInfo, Message: strconv.Itoa(i)})
	}
	if err := b.attrs.userSet("log-ring-size", "2"); err != nil {
		t.Fatal(err)
	}
	if got := get("log-ring-size"); got != "2" {
		t.Errorf("log-ring-size = %q after setting 2", got)
	}
	if s := b.ring.snapshot(); len(s) != 2 || s[0].Message != "3" || s[1].Message != "4" {
		t.Errorf("after shrinking to 2: %+v", s)
	}
	b.ring.append(flux.LogEntry{Severity: sevInfo, Message: "5"})
	if s := b.ring.snapshot(); len(s) != 2 || s[0].Message != "4" || s[1].Message != "5" {
		t.Errorf("after one more entry: %+v", s)
	}
	b.attrs.userSet("log-ring-size", "4")
	if s := b.ring.snapshot(); len(s) != 2 || s[1].Message != "5" {
		t.Errorf("after growing to 4: %+v", s)
	}

	if err := b.attrs.userSet("log-stderr-level", "6"); err != nil {
		t.Fatal(err)
	}
	if _, s := b.ring.levels(); s != 6 {
		t.Errorf("stderr level %d after setting 6", s)
	}

	for name, v := range map[string]string{"log-level": "x", "log-stderr-level": "8", "log-ring-size": "0"} {
		if err := b.attrs.userSet(name, v); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("setattr %s %s: %v, want EINVAL", name, v, err)
		}
	}
	if err := b.attrs.userRemove("log-level"); !errors.Is(err, syscall.EPERM) {
		t.Errorf("removing log-level: %v, want EPERM", err)
	}
}
