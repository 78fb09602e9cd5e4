package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// flux job info [--original] [--base] ID KEY...: print low level job data
// (eventlog, jobspec, R, guest.exec.eventlog ...) read with job-info.lookup.

type jobInfoOptions struct {
	original bool
	base     bool
}

func newJobInfoCmd() *cobra.Command {
	var o jobInfoOptions
	cmd := &cobra.Command{
		Use:   "info [--original] [--base] ID KEY...",
		Short: "Display info for a job",
		Long: `Print the selected low level job objects: eventlog, jobspec, R,
guest.exec.eventlog, guest.output, J ...

jobspec and R are the current versions (with updates posted to the
eventlog applied) unless --base is given; --original prints the jobspec
as submitted.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				io.WriteString(cmd.ErrOrStderr(), jobInfoUsage)
				return exitCode(1)
			}
			return nil
		},
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			return withHandle(func(ctx context.Context, h *flux.Handle) error {
				return jobInfo(ctx, h, args[0], args[1:], o, cmd.OutOrStdout())
			})
		}),
	}
	cmd.Flags().BoolVarP(&o.original, "original", "o", false, "For jobspec, return the original submitted jobspec")
	cmd.Flags().BoolVarP(&o.base, "base", "b", false, "For jobspec or R, return the base version, prior to any updates")
	return cmd
}

// jobInfoUsage is what flux job info without ID and KEY prints (the
// keys worth knowing, as flux-core lists them).
const jobInfoUsage = `Usage: flux job info id key
some useful keys are:
  J                    - signed jobspec
  R                    - allocated resources
  eventlog             - primary job eventlog
  jobspec              - job specification
  guest.exec.eventlog  - execution eventlog
  guest.input          - job input log
  guest.output         - job output log
Use flux job info -h to list available options
`

// unwrapJ returns the jobspec inside a signed J (RFC 39 "none"
// mechanism: header.payload.signature, base64).
func unwrapJ(J string) (string, error) {
	parts := strings.Split(strings.TrimSpace(J), ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("J is not a signed jobspec")
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(parts[1]); err == nil {
			return string(b), nil
		}
	}
	return "", fmt.Errorf("J payload is not base64")
}

func jobInfo(ctx context.Context, h *flux.Handle, idArg string, keys []string, o jobInfoOptions, out io.Writer) error {
	id, err := parseJobIDArg(idArg)
	if err != nil {
		return err
	}
	for _, key := range keys {
		lookup, flags := key, 0
		if !o.base && (key == "jobspec" || key == "R") {
			flags = job.LookupCurrent
		}
		if o.original && key == "jobspec" {
			lookup, flags = "J", 0
		}
		s, err := job.LookupString(ctx, h, id, lookup, flags)
		if err != nil {
			return errors.New(flux.ErrorText(err)) // "invalid job id", "KEY: key not found"
		}
		if lookup == "J" && key == "jobspec" {
			if s, err = unwrapJ(s); err != nil {
				return err
			}
		}
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		if _, err := io.WriteString(out, s); err != nil {
			return err
		}
	}
	return nil
}
