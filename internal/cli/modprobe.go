package cli

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/modules"
)

// newModprobeCmd is flux modprobe run FILE: flux-core's way of loading
// modules from a Python rc file (its test suite's personalities load
// module subsets so: flux start -o,-Sbroker.rc1_path="flux modprobe run
// rc1-job.py"). The file's setup(context) and @task functions run in
// python3 with fluxgo's flux package (flux.modprobe); the modules it
// names are fluxgo's, with the ranks and default arguments of fluxgo's
// own module list.
func newModprobeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "modprobe COMMAND",
		Short: "Load or remove modules as a Python rc file says",
		Long: `flux modprobe run FILE runs the Python file FILE: its setup(context)
function names modules to load (context.load_modules) or remove
(context.remove_modules) and sets their options (context.setopt); its
functions decorated with @flux.modprobe.task run in the order their
before/after lists give, on the ranks they name. Modules load with the
ranks fluxgo's own module list gives them; "content-backing" is the
content store's backing module (content-sqlite).

fluxgo loads its modules itself at start-up (flux broker's built-in list);
flux modprobe is for broker.rc1_path and broker.rc3_path rc files.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "run FILE",
		Short: "Run a modprobe rc file (Python)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(args[0]); err != nil {
				return fmt.Errorf("run %s: %w", args[0], err)
			}
			table, err := modprobeTable()
			if err != nil {
				return err
			}
			os.Setenv("FLUXGO_MODPROBE_MODULES", table)
			return runPython(cmd, []string{"-m", "flux.modprobe", "run", args[0]})
		},
	})
	return cmd
}

// modprobeTable is what flux.modprobe knows of fluxgo's modules: their
// load order, ranks and default arguments, and the names flux-core uses
// for them, as JSON.
func modprobeTable() (string, error) {
	type entry struct {
		Name    string   `json:"name"`
		Ranks   string   `json:"ranks"`
		Args    []string `json:"args"`
		Builtin bool     `json:"builtin,omitempty"`
	}
	var list []entry
	for _, m := range modules.DefaultRC1() {
		ranks := m.Ranks
		if ranks == "" {
			ranks = "all"
		}
		list = append(list, entry{Name: m.Name, Ranks: ranks, Args: append([]string{}, m.Args...), Builtin: m.Builtin})
	}
	b, err := json.Marshal(map[string]any{
		"modules": list,
		"aliases": map[string]string{"content-backing": "content-sqlite"},
	})
	return string(b), err
}
