package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// newKVSCmd is flux kvs (flux-kvs(1)). The subcommands live in
// kvs_get.go (lookups and watches), kvs_put.go (writes), kvs_dir.go (ls,
// dir), kvs_admin.go (namespaces, versions, roots, cache) and
// kvs_eventlog.go.
func newKVSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kvs",
		Short: "Access the Flux key value store",
		Long: `flux kvs reads and writes the Flux key value store. Keys are hierarchical,
with "." as the path separator; "." alone is the root directory. Most
commands take -N/--namespace (default $FLUX_KVS_NAMESPACE or "primary").`,
	}
	cmd.AddCommand(
		newKVSNamespaceCmd(),
		newKVSGetCmd(), newKVSPutCmd(), newKVSDirCmd(), newKVSLsCmd(),
		newKVSUnlinkCmd(), newKVSLinkCmd(), newKVSReadlinkCmd(), newKVSMkdirCmd(),
		newKVSCopyCmd("copy"), newKVSCopyCmd("move"),
		newKVSDropcacheCmd(), newKVSVersionCmd(), newKVSWaitCmd(), newKVSGetrootCmd(),
		newKVSEventlogCmd(),
	)
	return cmd
}

// kvsRun is the RunE of a flux kvs subcommand: it connects, runs fn and
// reports an error the way flux-kvs does ("flux-kvs: ..." and exit 1).
func kvsRun(fn func(ctx context.Context, h *flux.Handle, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		h, err := openHandle()
		if err != nil {
			return kvsFail(cmd, err)
		}
		defer h.Close()
		ctx, cancel := cmdContext()
		defer cancel()
		if err := fn(ctx, h, cmd, args); err != nil {
			return kvsFail(cmd, err)
		}
		return nil
	}
}

func kvsFail(cmd *cobra.Command, err error) error {
	var ee exitError
	if errors.As(err, &ee) {
		return err
	}
	if code := interruptedStatus(); code != 0 {
		return exitCode(code)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "flux-kvs: %s\n", errText(err))
	return exitCode(1)
}

// errText renders an error as flux-core's tools do: a service error
// without a message of its own is its errno's C description.
func errText(err error) string {
	var fe *flux.Error
	if errors.As(err, &fe) && fe.Msg == "" {
		prefix := strings.TrimSuffix(err.Error(), fe.Errno.Error())
		return prefix + strerror(fe.Errno)
	}
	var en syscall.Errno
	if errors.As(err, &en) && err.Error() == en.Error() {
		return strerror(en)
	}
	return err.Error()
}

// strerror is the C library's description of errno (Go's, capitalized).
func strerror(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// keyErr prefixes an error with the key it concerns.
func keyErr(key string, err error) error {
	return fmt.Errorf("%s: %s", key, errText(err))
}

// nsFlag adds -N/--namespace.
func nsFlag(cmd *cobra.Command, ns *string) {
	cmd.Flags().StringVarP(ns, "namespace", "N", "", "use KVS namespace `NS`")
}

// windowWidth is the output width for ls and dir: -w if given (0 means
// unlimited), else the terminal's, else $COLUMNS, else 80.
func windowWidth(flag int, out io.Writer) int {
	if flag >= 0 {
		return flag
	}
	if cols, _, ok := terminalSize(out); ok {
		return cols
	}
	if s := os.Getenv("COLUMNS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return n
		}
	}
	return 80
}
