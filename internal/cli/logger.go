package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

func newLoggerCmd() *cobra.Command {
	var severity, appname string
	cmd := &cobra.Command{
		Use:   "logger [--severity=SEVERITY] [--appname=NAME] MESSAGE...",
		Short: "Append a message to the broker's log",
		Long: `flux logger appends an entry to the local broker's log ring buffer (see
flux dmesg). SEVERITY is one of emerg, alert, crit, err, warning, notice,
info (the default) or debug. The broker adds the time and its rank.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sev, err := flux.ParseSeverity(severity)
			if err != nil {
				return fmt.Errorf("--severity: %w", err)
			}
			if appname == "" {
				return fmt.Errorf("--appname must not be empty")
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return logAppend(ctx, h, sev, appname, strings.Join(args, " "))
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVarP(&severity, "severity", "s", "info", "message `SEVERITY`")
	cmd.Flags().StringVarP(&appname, "appname", "n", "logger", "application `NAME` to log under")
	return cmd
}

// logAppend sends one log.append request to the local broker.
func logAppend(ctx context.Context, h *flux.Handle, sev int, name, msg string) error {
	req := map[string]any{
		"severity":  sev,
		"name":      name,
		"message":   msg,
		"timestamp": float64(time.Now().UnixNano()) / 1e9,
	}
	return h.Call(ctx, "log.append", flux.NodeidAny, req, nil)
}
