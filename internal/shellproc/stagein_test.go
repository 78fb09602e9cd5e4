package shellproc

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// TestParseStageIn: the stage-in shell option as flux run -o and
// --setattr write it, and the errors for what it cannot be.
func TestParseStageIn(t *testing.T) {
	const tmp, cwd = "/run/jobtmp", "/home/u/proj"
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name    string
		opt     string // JSON; "" for no option
		want    *stageInSpec
		wantErr string
		depr    bool
	}{
		{name: "absent", opt: ""},
		{name: "switch", opt: `1`, want: &stageInSpec{names: []string{"main"}, dir: tmp}},
		{name: "true", opt: `true`, want: &stageInSpec{names: []string{"main"}, dir: tmp}},
		{name: "off", opt: `0`},
		{name: "false", opt: `false`},
		{name: "names", opt: `{"names":"red,blue"}`, want: &stageInSpec{names: []string{"red", "blue"}, dir: tmp}},
		{name: "names list, repeats and blanks dropped", opt: `{"names":["a","","b","a"]}`, want: &stageInSpec{names: []string{"a", "b"}, dir: tmp}},
		{name: "empty names is main", opt: `{"names":""}`, want: &stageInSpec{names: []string{"main"}, dir: tmp}},
		{name: "tags", opt: `{"tags":"red"}`, want: &stageInSpec{names: []string{"red"}, dir: tmp}, depr: true},
		{name: "pattern", opt: `{"pattern":"red/*"}`, want: &stageInSpec{names: []string{"main"}, pattern: "red/*", dir: tmp}},
		{name: "destination", opt: `{"destination":"/scratch/x"}`, want: &stageInSpec{names: []string{"main"}, dir: "/scratch/x"}},
		{name: "local destination", opt: `{"destination":"local:/scratch/x"}`, want: &stageInSpec{names: []string{"main"}, dir: "/scratch/x"}},
		{name: "global destination", opt: `{"destination":"global:/gfs/x"}`, want: &stageInSpec{names: []string{"main"}, dir: "/gfs/x", global: true}},
		{name: "relative destination", opt: `{"destination":"global:out"}`, want: &stageInSpec{names: []string{"main"}, dir: cwd + "/out", global: true}},

		{name: "unknown option", opt: `{"badopt":1}`, wantErr: "stage-in.badopt: unknown option"},
		{name: "string", opt: `"yes"`, wantErr: `stage-in="yes": expected a switch or an object`},
		{name: "names and tags", opt: `{"names":"a","tags":"b"}`, wantErr: "give only names"},
		{name: "name not a string", opt: `{"names":[1]}`, wantErr: "stage-in.names: 1 is not an archive name"},
		{name: "names an object", opt: `{"names":{}}`, wantErr: "stage-in.names={}: expected"},
		{name: "empty pattern", opt: `{"pattern":""}`, wantErr: `stage-in.pattern="": expected a non-empty glob pattern`},
		{name: "pattern not a string", opt: `{"pattern":3}`, wantErr: "stage-in.pattern=3"},
		{name: "bad scope", opt: `{"destination":"wrong:/x"}`, wantErr: `stage-in.destination=wrong:/x: the scope "wrong" is neither local nor global`},
		{name: "no directory", opt: `{"destination":"global:"}`, wantErr: "stage-in.destination=global:: the directory is missing"},
		{name: "destination not a string", opt: `{"destination":true}`, wantErr: "stage-in.destination=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opt any
			if tt.opt != "" {
				opt = decode(tt.opt)
			}
			var warned []string
			got, err := parseStageIn(opt, tt.opt != "", tmp, cwd, func(s string) { warned = append(warned, s) })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("spec %+v, want %+v", got, tt.want)
			}
			if tt.depr != (len(warned) > 0) {
				t.Errorf("deprecation warnings %q", warned)
			}
		})
	}
	// a relative destination without a working directory is refused
	if _, err := parseStageIn(decode(`{"destination":"out"}`), true, tmp, "", nil); err == nil || !strings.Contains(err.Error(), "working directory") {
		t.Errorf("relative destination without cwd: %v", err)
	}
}

// TestStageInInterrupt: the signals that end a job stop a stage-in (and
// are remembered for the error); others are dropped.
func TestStageInInterrupt(t *testing.T) {
	for sig, stops := range map[syscall.Signal]bool{
		syscall.SIGTERM: true, syscall.SIGKILL: true, syscall.SIGINT: true, syscall.SIGHUP: true,
		syscall.SIGUSR1: false, syscall.SIGCONT: false, syscall.SIGALRM: false,
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s := &stageIn{cancel: cancel}
		s.interrupt(sig)
		if stopped := ctx.Err() != nil; stopped != stops || (s.signal == sig) != stops {
			t.Errorf("%v: stopped %v (signal %v), want %v", sig, stopped, s.signal, stops)
		}
		cancel()
	}
	// the first signal is the one reported
	_, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &stageIn{cancel: cancel}
	s.interrupt(syscall.SIGTERM)
	s.interrupt(syscall.SIGKILL)
	if s.signal != syscall.SIGTERM {
		t.Errorf("signal %v, want SIGTERM", s.signal)
	}
}
