package broker

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"syscall"
	"time"
)

// Overlay transports: "ipc:///path" is a unix socket (brokers on one
// host; peers are authenticated by SO_PEERCRED as the instance owner) and
// "tcp://host:port" is TCP wrapped in TLS 1.3, where both ends must hold
// the instance's key pair made by flux keygen (the certificate is pinned:
// a peer presenting any other certificate is refused).

func listenURI(uri string, b *Broker) (net.Listener, error) {
	scheme, rest, err := splitURI(uri)
	if err != nil {
		return nil, err
	}
	switch scheme {
	case "ipc":
		_ = os.Remove(rest)
		ln, err := net.Listen("unix", rest)
		if err != nil {
			return nil, err
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(true)
		return ln, nil
	case "tcp":
		cfg, err := b.tlsConfig()
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", rest)
		if err != nil {
			return nil, err
		}
		return tls.NewListener(ln, cfg), nil
	}
	return nil, fmt.Errorf("overlay URI %q: unsupported scheme %q", uri, scheme)
}

func dialURI(uri string, b *Broker) (net.Conn, error) {
	scheme, rest, err := splitURI(uri)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	deadline := time.Now().Add(b.cfg.ConnectTimeout)
	delay := 5 * time.Millisecond
	for {
		switch scheme {
		case "ipc":
			c, err = net.Dial("unix", rest)
		case "tcp":
			var cfg *tls.Config
			if cfg, err = b.tlsConfig(); err != nil {
				return nil, err
			}
			d := &net.Dialer{Timeout: 5 * time.Second}
			c, err = tls.DialWithDialer(d, "tcp", rest, cfg)
			var verr peerKeyError
			if errors.As(err, &verr) {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("overlay URI %q: unsupported scheme %q", uri, scheme)
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(delay)
		if delay < 250*time.Millisecond {
			delay *= 2
		}
	}
	return c, err
}

// authenticatePeer checks a freshly accepted overlay connection: on a
// unix socket the peer must run as the instance owner; on TLS the
// handshake (with its pinned certificate check) must succeed.
func authenticatePeer(c net.Conn, b *Broker) error {
	switch conn := c.(type) {
	case *net.UnixConn:
		uid, _, err := peerCred(conn)
		if err != nil {
			return err
		}
		if uid != b.owner {
			return fmt.Errorf("peer uid %d is not the instance owner %d: %w", uid, b.owner, syscall.EPERM)
		}
		return nil
	case *tls.Conn:
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		defer conn.SetDeadline(time.Time{})
		return conn.Handshake()
	}
	return fmt.Errorf("unsupported overlay connection %T", c)
}

type peerKeyError struct{}

func (peerKeyError) Error() string {
	return "overlay peer does not hold this instance's key (certificate mismatch)"
}

// tlsConfig loads the instance key pair (once) and builds a TLS 1.3
// configuration that pins it on both sides.
func (b *Broker) tlsConfig() (*tls.Config, error) {
	b.tlsOnce.Do(func() {
		path := b.cfg.CertPath
		if path == "" {
			b.tlsErr = fmt.Errorf("tcp overlay needs the instance key: set bootstrap.curve_cert in the config or -Stbon.cert=PATH (make one with flux keygen)")
			return
		}
		pemData, err := os.ReadFile(path)
		if err != nil {
			b.tlsErr = fmt.Errorf("instance key: %w", err)
			return
		}
		cert, err := tls.X509KeyPair(pemData, pemData)
		if err != nil {
			b.tlsErr = fmt.Errorf("instance key %s: %w", path, err)
			return
		}
		mine := cert.Certificate[0]
		verify := func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], mine) {
				return peerKeyError{}
			}
			return nil
		}
		b.tlsCfg = &tls.Config{
			Certificates:          []tls.Certificate{cert},
			MinVersion:            tls.VersionTLS13,
			ClientAuth:            tls.RequireAnyClientCert,
			InsecureSkipVerify:    true, // replaced by the pinned check below
			VerifyPeerCertificate: verify,
		}
	})
	return b.tlsCfg, b.tlsErr
}

// GenerateKey makes a new instance key pair: a self-signed ECDSA P-256
// certificate and its private key, PEM-encoded in one file.
func GenerateKey(name string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(20, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	pem.Encode(&buf, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	return buf.Bytes(), nil
}
