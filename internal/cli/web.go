package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/web"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

func newWebCmd() *cobra.Command {
	var cfg web.RunConfig
	cmd := &cobra.Command{
		Use:   "web [--listen HOST:PORT] [--cert FILE --key FILE]",
		Short: "Serve the instance's REST API and Prometheus metrics over HTTP",
		Long: `flux web connects to the enclosing instance ($FLUX_URI) as a client and
serves, over HTTP (HTTPS with --cert and --key):

  /v1/jobs                GET   the caller's jobs (every user's for the owner)
  /v1/jobs/submit         POST  submit a job as the caller
  /v1/jobs/ID             GET   a job's details
  /v1/jobs/ID/cancel      POST  cancel a job
  /v1/jobs/ID/output      GET   a job's output so far
  /v1/nodes               GET   the nodes that are up
  /v1/openapi.json        GET   the OpenAPI document of these routes
  /metrics                GET   Prometheus metrics: jobs by state and queue,
                                nodes by state, jobs submitted and completed

The /v1 routes, as flux-restful-api's, need "Authorization: Bearer TOKEN"
with a token from 'flux web token', which any user of the instance may run
while flux web serves it. A request acts as the token's user: a user sees
and cancels only their own jobs, the instance owner every job. Without a
token, or with a bad or expired one, the answer is 401. /metrics and
/v1/openapi.json need no token.

flux web prints "listening on URL" once it accepts requests (port 0 picks
a free port) and runs until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return web.Run(ctx, h, cfg, cmd.OutOrStdout())
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.Listen, "listen", "l", web.DefaultListen, "listen on `HOST:PORT`")
	f.StringVar(&cfg.CertFile, "cert", "", "serve HTTPS with the certificate in `FILE` (PEM)")
	f.StringVar(&cfg.KeyFile, "key", "", "the private key of --cert, in `FILE` (PEM)")
	f.DurationVar(&cfg.TokenExpiry, "token-expiry", web.DefaultTokenExpiry, "lifetime of a token when flux web token asks for none")
	f.DurationVar(&cfg.MaxTokenExpiry, "max-token-expiry", web.MaxTokenExpiry, "the longest token lifetime given")
	cmd.AddCommand(newWebTokenCmd())
	return cmd
}

// webTokenOutput is what flux web token prints.
func webTokenOutput(resp *web.TokenResponse) string { return fmt.Sprintln(resp.Token) }
