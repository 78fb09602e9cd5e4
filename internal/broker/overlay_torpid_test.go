package broker

import (
	"strings"
	"testing"
	"time"
)

func TestValidateTorpid(t *testing.T) {
	for _, tc := range []struct {
		min, max time.Duration
		err      string
	}{
		{5 * time.Second, 30 * time.Second, ""},
		{5 * time.Second, -1, ""}, // disabled
		{-time.Second, 30 * time.Second, "tbon.torpid_min"},
		{5 * time.Second, 2 * time.Second, "tbon.torpid_max=2s: must be greater than tbon.torpid_min (5s)"},
		{5 * time.Second, 5 * time.Second, "must be greater"},
	} {
		c := Config{TorpidMin: tc.min, TorpidMax: tc.max}
		err := c.validateTorpid()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("min %v max %v: %v", tc.min, tc.max, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("min %v max %v: error %v, want one with %q", tc.min, tc.max, err, tc.err)
		}
	}
}

func TestKeepaliveInterval(t *testing.T) {
	for _, tc := range []struct{ timeout, min, max, want time.Duration }{
		{30 * time.Second, 5 * time.Second, 30 * time.Second, 5 * time.Second},
		{5 * time.Second, 500 * time.Millisecond, 1500 * time.Millisecond, 500 * time.Millisecond},
		{2 * time.Second, 5 * time.Second, 30 * time.Second, 400 * time.Millisecond},
		{30 * time.Second, 5 * time.Second, 6 * time.Second, 3 * time.Second},
		{30 * time.Second, 5 * time.Second, -1, 5 * time.Second},
	} {
		if got := keepaliveInterval(tc.timeout, tc.min, tc.max); got != tc.want {
			t.Errorf("keepaliveInterval(%v, %v, %v) = %v, want %v", tc.timeout, tc.min, tc.max, got, tc.want)
		}
	}
}
