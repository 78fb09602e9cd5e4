package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/broker"
)

// defaultKeyPath is where flux keygen writes when no PATH is given.
const defaultKeyPath = "curve.cert"

func newKeygenCmd() *cobra.Command {
	var name string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen [--name=NAME] [--force] [PATH]",
		Short: "Generate the key that secures a system instance's overlay network",
		Long: `flux keygen writes a new instance key pair (a certificate and its private
key, PEM-encoded) to PATH (default ./` + defaultKeyPath + `), readable only by its owner.
Every broker of an instance that uses TCP overlay links must be given the
same key. An existing file is left alone unless --force is given.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := defaultKeyPath
			if len(args) == 1 {
				path = args[0]
			}
			if name == "" {
				host, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("--name not given and the hostname is unknown: %w", err)
				}
				name = host
			}
			return keygen(path, name, force)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "certificate `NAME` (default: this host's name)")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite PATH if it exists")
	return cmd
}

// keygen writes a new key pair for name to path with mode 0600.
func keygen(path, name string, force bool) error {
	pem, err := broker.GenerateKey(name)
	if err != nil {
		return fmt.Errorf("generating key: %w", err)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: remove it or use --force to replace it", path)
	}
	if err != nil {
		return err
	}
	// An existing file keeps its mode when truncated: make it private.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(pem); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
