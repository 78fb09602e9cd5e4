package integration

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBrokerAttributes: broker.starttime, broker.mapping and the logging
// attributes of flux-broker-attributes(7); log-level set on the command
// line and changed with flux setattr.
func TestBrokerAttributes(t *testing.T) {
	e := start(t, "log-level=6")
	st, err := strconv.ParseFloat(e.must("getattr", "broker.starttime"), 64)
	if err != nil || math.Abs(float64(time.Now().Unix())-st) > 300 {
		t.Errorf("broker.starttime %v (%v), want about now", st, err)
	}
	if m := e.must("getattr", "broker.mapping"); m == "" || m[0] != '[' {
		t.Errorf("broker.mapping %q", m)
	}
	if got := e.must("getattr", "log-level"); got != "6" {
		t.Errorf("log-level %q, want 6 from the command line", got)
	}
	e.must("logger", "-s", "debug", "not-logged")
	e.must("setattr", "log-level", "7")
	e.must("logger", "-s", "debug", "logged")
	out := e.must("dmesg")
	if strings.Contains(out, "not-logged") || !strings.Contains(out, "logged") {
		t.Errorf("dmesg after log-level 6 then 7:\n%s", out)
	}
	e.must("setattr", "log-ring-size", "10")
	if got := e.must("getattr", "log-ring-size"); got != "10" {
		t.Errorf("log-ring-size %q", got)
	}
	e.fail("invalid value", "setattr", "log-ring-size", "0")
	e.fail("read-only", "setattr", "broker.starttime", "1")

	// flux setattr --expunge NAME removes an attribute (flux-getattr(1))
	e.must("setattr", "test.attr", "x")
	e.must("setattr", "--expunge", "test.attr")
	e.fail("not set", "getattr", "test.attr")
	e.fail("not set", "setattr", "-e", "test.attr")
	e.fail("read-only", "setattr", "-e", "rank")
}

// TestVersionBroker: with FLUX_URI set, flux version adds the broker's
// version and the URI before build-options, as flux-core does.
func TestVersionBroker(t *testing.T) {
	e := start(t)
	lines := strings.Split(e.must("version"), "\n")
	if len(lines) != 5 {
		t.Fatalf("flux version printed %q", lines)
	}
	if want := "broker:  \t\t" + e.must("getattr", "version"); lines[2] != want {
		t.Errorf("line 3 %q, want %q", lines[2], want)
	}
	if !strings.HasPrefix(lines[3], "FLUX_URI:\t\t") || !strings.HasPrefix(lines[4], "build-options:") {
		t.Errorf("lines 4-5 %q", lines[3:])
	}
}
