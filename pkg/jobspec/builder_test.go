package jobspec

import (
	"errors"
	"testing"
)

// The expected documents are the shapes flux-core's JobspecV1 factories
// produce, with attributes reduced to the default duration.
func TestFromCommand(t *testing.T) {
	tests := []struct {
		name string
		o    CommandOptions
		want string
	}{
		{"defaults", CommandOptions{},
			`{"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1}],"label":"task"}],` +
				`"tasks":[{"command":["app","arg"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0}},"version":1}`},
		{"n4 c2 g1", CommandOptions{NTasks: 4, CoresPerTask: 2, GPUsPerTask: 1},
			`{"resources":[{"type":"slot","count":4,"with":[{"type":"core","count":2},{"type":"gpu","count":1}],"label":"task"}],` +
				`"tasks":[{"command":["app","arg"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0}},"version":1}`},
		{"N2 n4", CommandOptions{NTasks: 4, NNodes: 2},
			`{"resources":[{"type":"node","count":2,"with":[{"type":"slot","count":2,"with":[{"type":"core","count":1}],"label":"task"}]}],` +
				`"tasks":[{"command":["app","arg"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0}},"version":1}`},
		{"N2 n5 uneven", CommandOptions{NTasks: 5, NNodes: 2},
			`{"resources":[{"type":"node","count":2,"with":[{"type":"slot","count":3,"with":[{"type":"core","count":1}],"label":"task"}]}],` +
				`"tasks":[{"command":["app","arg"],"slot":"task","count":{"total":5}}],` +
				`"attributes":{"system":{"duration":0}},"version":1}`},
		{"N2 exclusive", CommandOptions{NTasks: 2, NNodes: 2, Exclusive: true},
			`{"resources":[{"type":"node","count":2,"exclusive":true,"with":[{"type":"slot","count":1,"with":[{"type":"core","count":1}],"label":"task"}]}],` +
				`"tasks":[{"command":["app","arg"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0}},"version":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, err := FromCommand([]string{"app", "arg"}, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if err := js.ValidateV1(); err != nil {
				t.Fatalf("ValidateV1: %v", err)
			}
			if got := mustJSON(t, js); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			checkRoundTrip(t, js)
			n := tt.o.NTasks
			if n == 0 {
				n = 1
			}
			if js.NTasks() != n && js.Tasks[0].Count.PerSlot == 1 {
				t.Errorf("NTasks() = %d, want %d", js.NTasks(), n)
			}
		})
	}
}

func TestFromCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		cmd  []string
		o    CommandOptions
	}{
		{"no command", nil, CommandOptions{}},
		{"negative tasks", []string{"a"}, CommandOptions{NTasks: -1}},
		{"negative cores", []string{"a"}, CommandOptions{CoresPerTask: -2}},
		{"negative gpus", []string{"a"}, CommandOptions{GPUsPerTask: -1}},
		{"negative nodes", []string{"a"}, CommandOptions{NNodes: -1}},
		{"more nodes than tasks", []string{"a"}, CommandOptions{NTasks: 2, NNodes: 3}},
		{"exclusive without nodes", []string{"a"}, CommandOptions{Exclusive: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := FromCommand(tt.cmd, tt.o); !errors.Is(err, ErrInvalid) {
				t.Errorf("FromCommand error = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestFromPerResource(t *testing.T) {
	tests := []struct {
		name string
		o    PerResourceOptions
		want string
	}{
		{"cores 4 per core 2", PerResourceOptions{NCores: 4, Type: "core", Count: 2},
			`{"resources":[{"type":"slot","count":4,"with":[{"type":"core","count":1}],"label":"task"}],` +
				`"tasks":[{"command":["app"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0,"shell":{"options":{"per-resource":{"count":2,"type":"core"}}}}},"version":1}`},
		{"N2 cores 8", PerResourceOptions{NNodes: 2, NCores: 8},
			`{"resources":[{"type":"node","count":2,"with":[{"type":"slot","count":1,"with":[{"type":"core","count":4}],"label":"task"}]}],` +
				`"tasks":[{"command":["app"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0}},"version":1}`},
		{"N2 exclusive per node 3 gpus 2", PerResourceOptions{NNodes: 2, Exclusive: true, Type: "node", Count: 3, GPUsPerNode: 2},
			`{"resources":[{"type":"node","count":2,"exclusive":true,"with":[{"type":"slot","count":1,"with":[{"type":"core","count":1},{"type":"gpu","count":2}],"label":"task"}]}],` +
				`"tasks":[{"command":["app"],"slot":"task","count":{"per_slot":1}}],` +
				`"attributes":{"system":{"duration":0,"shell":{"options":{"per-resource":{"count":3,"type":"node"}}}}},"version":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, err := FromPerResource([]string{"app"}, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if err := js.ValidateV1(); err != nil {
				t.Fatalf("ValidateV1: %v", err)
			}
			if got := mustJSON(t, js); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	bad := []PerResourceOptions{
		{},                     // no counts
		{NNodes: 2},            // nodes without cores or exclusive
		{NNodes: 4, NCores: 2}, // fewer cores than nodes
		{NNodes: 2, NCores: 5}, // uneven
		{NCores: 2, GPUsPerNode: 1},
		{NCores: 2, Type: "socket", Count: 1},
		{NCores: 2, Type: "core"},
		{NCores: 2, Exclusive: true},
	}
	for _, o := range bad {
		if _, err := FromPerResource([]string{"app"}, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("FromPerResource(%+v) error = %v", o, err)
		}
	}
	if _, err := FromPerResource(nil, PerResourceOptions{NCores: 1}); err == nil {
		t.Error("FromPerResource without command succeeded")
	}
}
