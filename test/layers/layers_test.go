// Package layers checks the import rules of docs/DEVELOPING.md on the
// whole module, so a change that crosses a boundary fails make check
// instead of waiting for a reviewer to notice.
package layers

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/fluxgo/fluxgo/"

// allowed are the crossings that are known and tracked, each with why.
var allowed = map[string]string{}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v (the rules cannot be checked on a module that does not build)", err)
	}
	var problems []string
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		from := strings.TrimPrefix(f[0], module)
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := strings.TrimPrefix(imp, module)
			edge := from + " -> " + to
			if why := rule(from, to); why != "" {
				if _, ok := allowed[edge]; ok {
					seen[edge] = true
					continue
				}
				problems = append(problems, edge+": "+why)
			}
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	for edge := range allowed {
		if !seen[edge] {
			t.Errorf("%s is allowed but no longer happens: remove it from the list", edge)
		}
	}
}

// harnesses are the test-support packages that may import several
// modules (named, so that a package ending in "test" is not exempt by
// its name alone).
var harnesses = map[string]bool{
	"internal/modules/kvs/kvstest": true,
	"internal/modules/modtest":     true,
}

// rule returns why importing to from from breaks a layer rule ("" if it
// does not).
func rule(from, to string) string {
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	module := func(p string) string { // internal/modules/NAME/... -> NAME
		rest, ok := strings.CutPrefix(p, "internal/modules/")
		if !ok {
			return ""
		}
		name, _, _ := strings.Cut(rest, "/")
		return name
	}
	helper := harnesses[from] // test harnesses start modules together
	switch {
	case under(from, "pkg") && under(to, "internal"):
		return "pkg/ stands alone: a program outside this module cannot import internal/"
	case !helper && module(from) != "" && module(to) != "" && module(from) != module(to) && module(to) != "modtest":
		return "modules meet through messages and internal/wire, never by importing each other"
	case under(from, "internal/modules") && (under(to, "internal/cli") || under(to, "internal/instance")):
		return "a module does not import the command line or the broker's assembly"
	case under(from, "internal/wire") && under(to, "internal/modules"):
		return "the wire contracts import no module"
	case under(from, "internal/cli") && module(to) != "":
		return "the command line talks to modules through messages (their wire types are in internal/wire)"
	case under(from, "internal/broker") && (under(to, "internal/modules") || under(to, "internal/cli")):
		return "the broker knows modules only through the module registry"
	}
	return ""
}

func TestRule(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		broken   bool
	}{
		{"pkg/flux", "internal/size", true},
		{"pkg/flux", "pkg/jsonwire", false},
		{"internal/modules/jobexec", "internal/modules/jobmanager", true},
		{"internal/modules/jobexec", "internal/modules/jobexec/sub", false},
		{"internal/modules/jobexec", "internal/wire", false},
		{"internal/modules/kvs/kvstest", "internal/modules/kvswatch", false},
		{"internal/modules/jobexec", "internal/cli", true},
		{"internal/cli", "internal/modules/jobpool", true},
		{"internal/cli", "internal/instance", false},
		{"internal/wire", "internal/modules/kvs", true},
		{"internal/broker", "internal/modules/kvs", true},
	} {
		if got := rule(tc.from, tc.to) != ""; got != tc.broken {
			t.Errorf("%s -> %s: broken %v, want %v", tc.from, tc.to, got, tc.broken)
		}
	}
}
