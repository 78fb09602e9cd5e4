package cli

import (
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/internal/version"
)

// flux keygen (flux-keygen(1)): the key pair that secures a system
// instance's TCP overlay. flux-core writes a ZeroMQ CURVE certificate;
// fluxgo's overlay is TLS, so the file holds an ECDSA P-256 certificate
// and private key (PEM), after a header laid out as flux-core's: the
// metadata (name, keygen.*, --meta) and the keys' fingerprints.

// Bounds on --meta.
const (
	maxKeygenMeta    = 64
	maxKeygenMetaLen = 1024
)

func newKeygenCmd() *cobra.Command {
	var name string
	var metas []string
	cmd := &cobra.Command{
		Use:   "keygen [--name=NAME] [--meta=KEY=VAL...] [PATH]",
		Short: "Generate the key that secures a system instance's overlay network",
		Long: `flux keygen writes a new instance key pair to PATH (readable only by its
owner; an existing file is replaced). Every broker of an instance that
uses TCP overlay links must be given the same file (bootstrap.curve_cert).
Without PATH the key is generated and thrown away, with a warning.

--name sets the certificate's name (default: this host's name); --meta
adds metadata, KEY=VAL items separated by commas (may be repeated).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			meta, err := keygenMeta(name, metas)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "flux-keygen: WARNING: add PATH argument to save generated certificate")
				_, err := keygenFile(meta)
				return err
			}
			return keygen(args[0], meta)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "certificate `NAME` (default: this host's name)")
	cmd.Flags().StringArrayVar(&metas, "meta", nil, "add or update comma-separated `KEY=VAL` metadata (may be repeated)")
	return cmd
}

// keygenMeta is the certificate's metadata, in order: --name, --meta
// items (KEY=VAL, KEY= or KEY), then the defaults flux-core adds; the
// first value given for a key wins.
func keygenMeta(name string, metas []string) ([][2]string, error) {
	var out [][2]string
	set := func(k, v string) error {
		if k == "" || strings.ContainsAny(k, " \t\n\"=") || strings.ContainsAny(v, "\n\"") || strings.Contains(v, "-----") {
			return fmt.Errorf("--meta: %q=%q: keys are words, values cannot hold quotes, newlines or \"-----\"", k, v)
		}
		if len(k)+len(v) > maxKeygenMetaLen {
			return fmt.Errorf("--meta: %s: longer than %d bytes", k, maxKeygenMetaLen)
		}
		for _, kv := range out {
			if kv[0] == k {
				return nil
			}
		}
		if len(out) >= maxKeygenMeta {
			return fmt.Errorf("--meta: more than %d items", maxKeygenMeta)
		}
		out = append(out, [2]string{k, v})
		return nil
	}
	if name != "" {
		if err := set("name", name); err != nil {
			return nil, err
		}
	}
	for _, m := range metas {
		for _, item := range strings.Split(m, ",") {
			if item == "" {
				continue
			}
			k, v, _ := strings.Cut(item, "=")
			if err := set(k, v); err != nil {
				return nil, err
			}
		}
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("gethostname: %w", err)
	}
	for _, kv := range [][2]string{
		{"name", host}, {"keygen.hostname", host},
		{"keygen.time", time.Now().Format("2006-01-02T15:04:05")},
		{"keygen.userid", strconv.Itoa(os.Getuid())},
		{"keygen.fluxgo-version", version.Version},
	} {
		if err := set(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keygenFile makes the file's contents: the header, then the PEM key
// pair (the broker reads the PEM blocks and skips the header).
func keygenFile(meta [][2]string) ([]byte, error) {
	name := ""
	for _, kv := range meta {
		if kv[0] == "name" {
			name = kv[1]
		}
	}
	pemData, err := broker.GenerateKey(name)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#   ****  Generated on %s by flux keygen (fluxgo)  ****\n", time.Now().Format("2006-01-02 15:04:05"))
	b.WriteString("#   fluxgo overlay certificate: TLS, ECDSA P-256 (PEM below)\n")
	b.WriteString("#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n")
	b.WriteString("metadata\n")
	for _, kv := range meta {
		fmt.Fprintf(&b, "    %s = \"%s\"\n", kv[0], kv[1])
	}
	b.WriteString("fingerprints\n")
	rest := pemData
	for rest != nil {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		key := "public-key"
		if strings.Contains(blk.Type, "PRIVATE") {
			key = "secret-key"
		}
		fmt.Fprintf(&b, "    %s = \"sha256:%x\"\n", key, sha256.Sum256(blk.Bytes))
	}
	b.WriteByte('\n')
	b.Write(pemData)
	return []byte(b.String()), nil
}

// keygen writes a new key pair with meta to path, mode 0600, replacing
// the file if there is one.
func keygen(path string, meta [][2]string) error {
	data, err := keygenFile(meta)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, errors.Unwrap(err))
	}
	// An existing file keeps its mode when truncated: make it private.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := io.WriteString(f, string(data)); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
