package jobspec

import (
	"testing"
)

// typicalV1JSON is what flux submit -N2 -n4 -t 10m sends for a small
// program: a version 1 jobspec with a modest environment and the default
// shell options.
const typicalV1JSON = `{"resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 2,
"with": [{"type": "core", "count": 1}], "label": "task"}]}], "tasks": [{"command": ["./app", "--steps",
"100", "input.dat"], "slot": "task", "count": {"per_slot": 1}}], "attributes": {"system": {"duration":
600.0, "environment": {"HOME": "/home/alice", "PATH": "/usr/local/bin:/usr/bin:/bin", "SHELL": "/bin/bash",
"USER": "alice", "LANG": "en_US.UTF-8", "TERM": "xterm-256color", "PWD": "/home/alice/run",
"OMP_NUM_THREADS": "1", "FLUX_URI": "local:///run/flux/local", "MODULEPATH": "/etc/modulefiles",
"HOSTNAME": "login1", "LOGNAME": "alice"}, "cwd": "/home/alice/run", "shell": {"options": {"rlimit":
{"cpu": -1, "fsize": -1, "data": -1, "stack": 8388608, "core": 0, "nproc": 4096, "nofile": 1024,
"as": -1, "locks": -1}}}, "job": {"name": "app"}}}, "version": 1}`

func BenchmarkParseValidate(b *testing.B) {
	data := []byte(typicalV1JSON)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		js, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := js.ValidateV1(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseValidateYAML(b *testing.B) {
	js, err := ParseV1([]byte(typicalV1JSON))
	if err != nil {
		b.Fatal(err)
	}
	// The same document as block YAML.
	data := []byte(`version: 1
resources:
  - type: node
    count: 2
    with:
      - type: slot
        count: 2
        label: task
        with:
          - type: core
            count: 1
tasks:
  - command: [./app, --steps, "100", input.dat]
    slot: task
    count: {per_slot: 1}
attributes:
  system:
    duration: 600.0
    cwd: /home/alice/run
    environment: {HOME: /home/alice, PATH: "/usr/local/bin:/usr/bin:/bin", SHELL: /bin/bash, USER: alice,
      LANG: en_US.UTF-8, TERM: xterm-256color, PWD: /home/alice/run, OMP_NUM_THREADS: "1",
      FLUX_URI: "local:///run/flux/local", MODULEPATH: /etc/modulefiles, HOSTNAME: login1, LOGNAME: alice}
    shell: {options: {rlimit: {cpu: -1, fsize: -1, data: -1, stack: 8388608, core: 0, nproc: 4096,
      nofile: 1024, as: -1, locks: -1}}}
    job: {name: app}
`)
	if js2, err := ParseV1(data); err != nil || js2.NTasks() != js.NTasks() {
		b.Fatalf("YAML form: %v", err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		js, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := js.ValidateV1(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalJSON(b *testing.B) {
	js, err := ParseV1([]byte(typicalV1JSON))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := js.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSON is the JSON reading of BenchmarkParseValidate
// alone: the document to generic values.
func BenchmarkDecodeJSON(b *testing.B) {
	data := []byte(typicalV1JSON)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}
