package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// openHandle connects to the enclosing instance ($FLUX_URI), with an
// error that says what to do when there is none.
func openHandle() (*flux.Handle, error) {
	uri := os.Getenv("FLUX_URI")
	if uri == "" {
		return nil, fmt.Errorf("FLUX_URI is not set: run this inside a Flux instance (flux start, flux alloc) or set FLUX_URI")
	}
	h, err := flux.Open(uri)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// cmdContext returns a context cancelled by SIGINT/SIGTERM.
func cmdContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
