package cli

import (
	"regexp"
	"testing"
	"time"
)

func TestUptimeFormat(t *testing.T) {
	now := time.Date(2024, 1, 2, 15, 4, 5, 0, time.Local)
	tests := []struct {
		u    uptimeInfo
		want string
	}{
		{uptimeInfo{state: "run", uptime: 192, owner: "alice", depth: 0, size: 8},
			" 15:04:05 run 3.2m,  owner alice,  depth 0,  size 8"},
		{uptimeInfo{state: "run", uptime: 7200, owner: "flux", depth: 1, size: 100, drained: 2, offline: 7},
			" 15:04:05 run 2h,  owner flux,  depth 1,  size 100,  2 drained,  7 offline"},
		{uptimeInfo{state: "quorum", uptime: 0.25, owner: "1000", size: 2},
			" 15:04:05 quorum 0.25s,  owner 1000,  depth 0,  size 2"},
		{uptimeInfo{state: "run", uptime: 60, owner: "alice", size: 1, submitDisabled: true},
			" 15:04:05 run 1m,  owner alice,  depth 0,  size 1\n  submit disabled"},
		{uptimeInfo{state: "run", uptime: 60, owner: "alice", size: 1, schedDisabled: true},
			" 15:04:05 run 1m,  owner alice,  depth 0,  size 1\n  scheduler disabled"},
		{uptimeInfo{state: "run", uptime: 60, owner: "alice", size: 1, drained: 1, submitDisabled: true, schedDisabled: true},
			" 15:04:05 run 1m,  owner alice,  depth 0,  size 1,  1 drained\n  submit disabled,  scheduler disabled"},
	}
	for _, tt := range tests {
		if got := tt.u.format(now); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}

func TestUptime(t *testing.T) {
	tb := startBrokers(t, 3, false)
	u, err := getUptimeInfo(testCtx(t), tb.handle(t))
	if err != nil {
		t.Fatal(err)
	}
	if u.state != "run" || u.size != 3 || u.depth != 0 || u.offline != 0 || u.owner == "" {
		t.Errorf("%+v", u)
	}
	line := u.format(time.Now())
	if !regexp.MustCompile(`^ \d\d:\d\d:\d\d run \S+,  owner \S+,  depth 0,  size 3$`).MatchString(line) {
		t.Errorf("uptime line %q", line)
	}

	tb.brokers[2].Shutdown(0)
	<-tb.done[2]
	tb.done[2] <- 0
	waitFor(t, "rank 2 to be offline", func() bool {
		u, err := getUptimeInfo(testCtx(t), tb.handle(t))
		return err == nil && u.offline == 1
	})
}
