package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Token errors. Each is a reason for a 401.
var (
	// ErrBadToken: the token is not one this server's key signed.
	ErrBadToken = errors.New("invalid token")
	// ErrExpired: the token was signed but its expiry has passed.
	ErrExpired = errors.New("token expired")
)

// tokenPrefix names the token format, so a later format can be told
// apart (and refused) rather than misread.
const tokenPrefix = "fluxweb1"

// operatorTag marks an operator's token.
const operatorTag = "op"

// KeyFile is the name of the signing key in the instance's statedir (or
// rundir when it has none).
const KeyFile = "web-token.key"

// keyLen is the size of the signing key in bytes.
const keyLen = 32

// Claims is what a token says: who it is for, until when, and whether
// that user was an operator ([access] operators) when it was issued.
type Claims struct {
	Userid   uint32
	Expiry   time.Time // whole seconds
	Operator bool
}

// Signer issues and verifies bearer tokens with one HMAC-SHA256 key.
// A token is "fluxweb1.UID.EXPIRY.MAC", or "fluxweb1.UID.EXPIRY.op.MAC"
// for an operator: the userid, the expiry (Unix seconds) and the role in
// clear, so a user can read what they were given, and the MAC of
// everything before it. An operator's token keeps its role until it
// expires, whatever the configuration says later.
type Signer struct {
	key []byte
}

// NewSigner returns a signer for key (at least 16 bytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("token key is %d bytes, want at least 16", len(key))
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

func (s *Signer) mac(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Issue returns a token for c.
func (s *Signer) Issue(c Claims) string {
	body := fmt.Sprintf("%s.%d.%d", tokenPrefix, c.Userid, c.Expiry.Unix())
	if c.Operator {
		body += "." + operatorTag
	}
	return body + "." + s.mac(body)
}

// Verify checks tok's MAC and expiry against now and returns its claims.
func (s *Signer) Verify(tok string, now time.Time) (Claims, error) {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 {
		return Claims{}, ErrBadToken
	}
	body, mac := tok[:i], tok[i+1:]
	if !hmac.Equal([]byte(mac), []byte(s.mac(body))) {
		return Claims{}, ErrBadToken
	}
	parts := strings.Split(body, ".")
	operator := len(parts) == 4 && parts[3] == operatorTag
	if len(parts) != 3 && !operator || parts[0] != tokenPrefix {
		return Claims{}, ErrBadToken
	}
	uid, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return Claims{}, ErrBadToken
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Claims{}, ErrBadToken
	}
	c := Claims{Userid: uint32(uid), Expiry: time.Unix(exp, 0), Operator: operator}
	if !now.Before(c.Expiry) {
		return c, ErrExpired
	}
	return c, nil
}

// LoadKey reads the signing key at path, creating it (mode 0600, random)
// if it does not exist. An existing key must be a regular file that only
// its owner, the caller, can read: anyone else who could read it could
// make tokens for any user.
func LoadKey(path string) ([]byte, error) {
	key := make([]byte, keyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.Write(key)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, werr
		}
		return key, nil
	case !errors.Is(err, fs.ErrExist):
		return nil, err
	}
	// another server made it first: use theirs, so tokens work on both
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: want a regular file of mode 0600, found %s", path, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return nil, fmt.Errorf("%s: owned by uid %d, not by this process's uid %d", path, st.Uid, os.Getuid())
	}
	key, err = os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("%s: %d bytes, want at least 16 (remove it to make a new key)", path, len(key))
	}
	return key, nil
}
