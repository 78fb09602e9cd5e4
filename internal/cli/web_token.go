package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/web"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/fsd"
)

func newWebTokenCmd() *cobra.Command {
	var expiry string
	cmd := &cobra.Command{
		Use:   "token [--expiry DURATION]",
		Short: "Print a bearer token for flux web's REST API",
		Long: `flux web token asks the flux web server of the enclosing instance for a
bearer token for the calling user (the instance knows who calls from its
local socket) and prints it. Send it as "Authorization: Bearer TOKEN";
requests with it act as this user until it expires.

--expiry is a Flux Standard Duration (30m, 8h, 2d); the default is the
server's (24h unless flux web --token-expiry says otherwise).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var d time.Duration
			if expiry != "" {
				var err error
				if d, err = fsd.ParseDuration(expiry); err != nil {
					return usageError{fmt.Errorf("--expiry: %w", err)}
				}
				if d <= 0 {
					return usageError{fmt.Errorf("--expiry: want a positive duration, not %q", expiry)}
				}
			}
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return runWebToken(ctx, h, d, cmd.OutOrStdout())
			})
		},
	}
	cmd.Flags().StringVarP(&expiry, "expiry", "e", "", "the token's lifetime (`DURATION`, FSD)")
	return cmd
}

func runWebToken(ctx context.Context, h *flux.Handle, expiry time.Duration, out io.Writer) error {
	resp, err := web.RequestToken(ctx, h, expiry)
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, webTokenOutput(resp))
	return err
}
