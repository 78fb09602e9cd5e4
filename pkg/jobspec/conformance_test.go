package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testdata = "../../testdata"

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func globYAML(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testdata, dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML files in %s: %v", dir, err)
	}
	return files
}

func TestConformanceValid(t *testing.T) {
	for _, f := range globYAML(t, "jobspec/valid") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			js, err := Parse(readFile(t, f))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkRoundTrip(t, js)
		})
	}
}

// invalidKey is the key path each file in testdata/jobspec/invalid gets
// wrong, as its name says; "" marks a syntax error.
var invalidKey = map[string]string{
	"attributes_bad_entry":             "attributes.foo",
	"attributes_not_mapping":           "attributes",
	"attributes_null":                  "attributes",
	"constraints_not_object":           "attributes.system.constraints",
	"dependencies_not_array":           "attributes.system.dependencies",
	"dependency_invalid":               "attributes.system.dependencies[0].value",
	"invalid_yaml1":                    "",
	"missing_attributes":               "attributes",
	"missing_resources":                "resources",
	"missing_tasks":                    "tasks",
	"missing_version":                  "version",
	"resource_count_bad_exp_min":       "resources[0].count.min",
	"resource_count_bad_mult_operand":  "resources[0].count.operand",
	"resource_count_bad_operator":      "resources[0].count.operator",
	"resource_count_bad_type":          "resources[0].count",
	"resource_count_is_zero":           "resources[0].count",
	"resource_count_max_lessthan_min":  "resources[0].count.max",
	"resource_count_min_is_zero":       "resources[0].count.min",
	"resource_count_min_not_int":       "resources[0].count.min",
	"resource_count_missing_min":       "resources[0].count.min",
	"resource_count_missing_operand":   "resources[0].count.operand",
	"resource_count_missing_operator":  "resources[0].count.operator",
	"resource_count_negative":          "resources[0].with[0].count",
	"resource_count_operand_is_zero":   "resources[0].count.operand",
	"resource_count_operator_not_char": "resources[0].count.operator",
	"resource_count_scalar_bad_value":  "resources[0].count",
	"resource_exclusive_invalid":       "resources[0].with[0].exclusive",
	"resource_exclusive_not_scalar":    "resources[0].exclusive",
	"resource_id_not_scalar":           "resources[0].id",
	"resource_label_not_scalar":        "resources[0].label",
	"resource_missing_count":           "resources[0].with[0].count",
	"resource_missing_type":            "resources[0].with[0].type",
	"resource_node_with_notarray":      "resources[0].with",
	"resource_not_mapping":             "resources[0]",
	"resource_slot_not_labelled":       "resources[0].label",
	"resource_slot_with_notarray":      "resources[0].with",
	"resource_type_not_string":         "resources[0].with[0].type",
	"resource_unit_not_scalar":         "resources[0].unit",
	"resources_not_sequence":           "resources",
	"task_command_array_notstring":     "tasks[0].command",
	"task_command_not_array":           "tasks[0].command",
	"task_command_zero_length_array":   "tasks[0].command",
	"task_count_empty":                 "tasks[0].count",
	"task_count_not_mapping":           "tasks[0].count",
	"task_count_per_slot_zero":         "tasks[0].count.per_slot",
	"task_count_total_and_per_slot":    "tasks[0].count",
	"task_count_total_zero":            "tasks[0].count.total",
	"task_missing_command":             "tasks[0].command",
	"task_missing_count":               "tasks[0].count",
	"task_missing_slot":                "tasks[0].slot",
	"task_not_mapping":                 "tasks[0]",
	"tasks_not_sequence":               "tasks",
	"version_bad_number":               "version",
	"version_is_zero":                  "version",
	"version_not_scalar":               "version",
}

func TestConformanceInvalid(t *testing.T) {
	files := globYAML(t, "jobspec/invalid")
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := invalidKey[name]
			if !ok {
				t.Fatalf("no expected key for %s: add it to invalidKey", name)
			}
			_, err := Parse(readFile(t, f))
			if err == nil {
				t.Fatal("Parse succeeded, want error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if want == "" {
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("error %q is not a syntax error", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			if e.Path != want {
				t.Errorf("error %q names %q, want %q", err, e.Path, want)
			}
			if !strings.HasPrefix(err.Error(), want+": ") || e.Rule == "" {
				t.Errorf("error %q does not read %q: RULE", err, want)
			}
		})
	}
	for name := range invalidKey {
		if !seen[name] {
			t.Errorf("invalidKey lists %s, which is not in testdata", name)
		}
	}
}

func TestRFC14Examples(t *testing.T) {
	for _, f := range globYAML(t, "rfc-examples/spec_14") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			js, err := Parse(readFile(t, f))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkRoundTrip(t, js)
		})
	}
}

func TestRFC25Examples(t *testing.T) {
	for _, f := range globYAML(t, "rfc-examples/spec_25") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			js, err := ParseV1(readFile(t, f))
			if err != nil {
				t.Fatalf("ParseV1: %v", err)
			}
			checkRoundTrip(t, js)
		})
	}
}

// The RFC 26 examples are dependency lists; each must be accepted as
// attributes.system.dependencies.
func TestRFC26Examples(t *testing.T) {
	for _, f := range globYAML(t, "rfc-examples/spec_26") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			v, err := decodeDocument(readFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			js := mustBuild(t)
			js.Attributes.System["dependencies"] = v
			if err := js.ValidateV1(); err != nil {
				t.Fatalf("ValidateV1: %v", err)
			}
			deps, err := js.Dependencies()
			if err != nil || len(deps) == 0 {
				t.Fatalf("Dependencies() = %v, %v", deps, err)
			}
			for _, d := range deps {
				if d.Scheme == "" || d.Options["type"] == nil || d.Options["scope"] == nil {
					t.Errorf("dependency %+v lacks scheme, type or scope", d)
				}
			}
		})
	}
}

// Which conformance files are also version 1 jobspecs.
func TestConformanceV1(t *testing.T) {
	v1 := map[string]bool{"basic_v1.yaml": true, "example1.yaml": true, "example2.yaml": false}
	for name, want := range v1 {
		t.Run(name, func(t *testing.T) {
			_, err := ParseV1(readFile(t, filepath.Join(testdata, "jobspec/valid", name)))
			if (err == nil) != want {
				t.Errorf("ParseV1 error = %v, want valid=%v", err, want)
			}
			if err != nil && !errors.Is(err, ErrNotV1) {
				t.Errorf("error %v does not wrap ErrNotV1", err)
			}
		})
	}
}
