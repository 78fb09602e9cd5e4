package web

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// DefaultListen is where flux web listens unless told otherwise.
const DefaultListen = "127.0.0.1:5000"

// RunConfig configures Run.
type RunConfig struct {
	// Listen is HOST:PORT (default DefaultListen; port 0 picks a free
	// one, which the ready line names).
	Listen string
	// CertFile and KeyFile, both or neither: serve HTTPS.
	CertFile, KeyFile string
	// TokenExpiry and MaxTokenExpiry bound token lifetimes (zero:
	// DefaultTokenExpiry and MaxTokenExpiry).
	TokenExpiry, MaxTokenExpiry time.Duration
	// Log receives warnings (default: discarded).
	Log *slog.Logger
	// Dial opens another connection to the instance, for the job
	// manager's journal that /v1/jobs/events follows while someone
	// watches (default: flux.Open of $FLUX_URI).
	Dial func() (*flux.Handle, error)
}

// Validate checks c and fills in its defaults.
func (c *RunConfig) Validate() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT", c.Listen)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("--cert and --key go together")
	}
	if c.TokenExpiry < 0 || c.MaxTokenExpiry < 0 {
		return errors.New("token expiries must be positive")
	}
	if c.MaxTokenExpiry == 0 {
		c.MaxTokenExpiry = MaxTokenExpiry
	}
	if c.TokenExpiry == 0 {
		c.TokenExpiry = min(DefaultTokenExpiry, c.MaxTokenExpiry)
	}
	if c.TokenExpiry > c.MaxTokenExpiry {
		return fmt.Errorf("token expiry %s is longer than the maximum %s", c.TokenExpiry, c.MaxTokenExpiry)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Dial == nil {
		c.Dial = func() (*flux.Handle, error) { return flux.Open("") }
	}
	return nil
}

// keyPath is where the instance's token key lives: its statedir, which
// outlives a restart, or its rundir.
func keyPath(ctx context.Context, h *flux.Handle) (string, error) {
	for _, attr := range []string{"statedir", "rundir"} {
		if dir, err := h.Attr(ctx, attr); err == nil && dir != "" {
			return filepath.Join(dir, KeyFile), nil
		}
	}
	return "", errors.New("the instance has neither a statedir nor a rundir")
}

// signerFor loads the instance's token key, or, when this process cannot
// reach it (another user's instance, a remote one), makes a key of its
// own whose tokens last as long as this server.
func signerFor(ctx context.Context, h *flux.Handle, log *slog.Logger) (*Signer, error) {
	path, err := keyPath(ctx, h)
	var key []byte
	if err == nil {
		key, err = LoadKey(path)
	}
	if err != nil {
		log.Warn("the token key is this server's own: its tokens end with it", "err", err)
		key = make([]byte, keyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	return NewSigner(key)
}

// Run serves flux web for the instance of h until ctx ends; ready
// receives the "listening on URL" line once requests are accepted.
func Run(ctx context.Context, h *flux.Handle, cfg RunConfig, ready io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Log
	owner, err := h.Attr(ctx, "security.owner")
	if err != nil {
		return err
	}
	ownerID, err := strconv.ParseUint(owner, 10, 32)
	if err != nil {
		return fmt.Errorf("security.owner %q: %w", owner, err)
	}
	signer, err := signerFor(ctx, h, log)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel (deferred later, run first)
	defer cancel()
	serveErr := make(chan error, 2)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := h.Serve(ctx); err != nil && ctx.Err() == nil {
			serveErr <- fmt.Errorf("connection to the instance: %w", err)
		}
	}()

	is := &Issuer{Signer: signer, Default: cfg.TokenExpiry, Max: cfg.MaxTokenExpiry}
	h.HandleFunc(TokenTopic, is.Serve)
	if err := h.RegisterService(ctx, ServiceName); err != nil {
		if !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("registering the %s service: %w", ServiceName, err)
		}
		log.Warn("another flux web issues this instance's tokens; those signed with the instance's key work here too")
	}

	client := NewClient(h)
	client.Dial = cfg.Dial
	srv, err := NewServer(Options{
		Instance: client, Signer: signer, Owner: uint32(ownerID), Self: uint32(os.Getuid()), Log: log,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	hs.RegisterOnShutdown(srv.Close) // streams end rather than hold up Shutdown
	scheme := "http"
	if cfg.CertFile != "" {
		scheme = "https"
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if cfg.CertFile != "" {
			err = hs.ServeTLS(ln, cfg.CertFile, cfg.KeyFile)
		} else {
			err = hs.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
		}
	}()
	fmt.Fprintf(ready, "listening on %s://%s\n", scheme, ln.Addr())

	select {
	case <-ctx.Done():
		err = nil
	case err = <-serveErr:
	case <-h.Done():
		err = fmt.Errorf("connection to the instance lost: %w", h.Err())
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	return err
}
