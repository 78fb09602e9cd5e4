package flux

import (
	"errors"
	"syscall"
	"testing"
)

// TestApplyDebugOp: the NAME.debug operations of flux-core's modules.
func TestApplyDebugOp(t *testing.T) {
	for _, tt := range []struct {
		cur   int
		op    string
		flags int
		want  int
		err   bool
	}{
		{0, "setbit", 0, 0, false}, // flux module debug NAME: reads the flags
		{0, "setbit", 0x2, 0x2, false},
		{0x2, "setbit", 0x1, 0x3, false},
		{0x3, "clrbit", 0x1, 0x2, false},
		{0x2, "clrbit", 0x4, 0x2, false},
		{0x3, "set", 0x4, 0x4, false},
		{0xff, "clr", 0, 0, false},
		{0xff, "clr", 0x1, 0, false},
		{0x2, "clearbit", 0x2, 0x2, true},
		{0x2, "", 0x2, 0x2, true},
	} {
		got, err := ApplyDebugOp(tt.cur, tt.op, tt.flags)
		if tt.err {
			if !errors.Is(err, syscall.EPROTO) {
				t.Errorf("%#x %s %#x: error %v, want EPROTO", tt.cur, tt.op, tt.flags, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%#x %s %#x: %#x %v, want %#x", tt.cur, tt.op, tt.flags, got, err, tt.want)
		}
	}
}

// TestDebugTest: a module tests its bits, optionally clearing them.
func TestDebugTest(t *testing.T) {
	h := &Handle{}
	if h.DebugTest(1, false) {
		t.Fatal("bit set on a new handle")
	}
	h.debug.Store(0x5)
	if !h.DebugTest(0x4, false) || h.DebugFlags() != 0x5 {
		t.Fatalf("test without clear: flags %#x", h.DebugFlags())
	}
	if !h.DebugTest(0x1, true) || h.DebugFlags() != 0x4 {
		t.Fatalf("test with clear: flags %#x", h.DebugFlags())
	}
	if h.DebugTest(0x1, true) || h.DebugTest(0x2, false) {
		t.Fatal("cleared or unset bit tested true")
	}
}
