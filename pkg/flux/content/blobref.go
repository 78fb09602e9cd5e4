// Package content is the client side of the Flux content storage service
// (RFC 10): blobref parsing and formatting, and helpers for the
// content.load, content.store, content.flush, content.dropcache and
// content.checkpoint-get/put RPCs.
//
// A blob is addressed by the digest of its bytes under the instance's hash
// algorithm (broker attribute content.hash, "sha1" unless configured).
// On the wire, load requests and store responses carry the raw binary
// digest; a blobref ("sha1-<40 hex>", "sha256-<64 hex>") is the
// human-readable form of the same digest.
package content

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"syscall"
)

// ErrBlobref is the kind of every blobref parsing error. Errors of this
// kind also match syscall.EINVAL, so services answer them as EINVAL.
var ErrBlobref = errors.New("invalid blobref")

// ErrHash is the kind of errors naming an unknown hash algorithm.
var ErrHash = errors.New("unknown content hash algorithm")

// DefaultHash is the hash algorithm used when content.hash is not set.
const DefaultHash = "sha1"

type algo struct {
	name string
	size int
	new  func() hash.Hash
}

// algos lists the supported hash algorithms (RFC 10 leaves the choice to
// the instance; flux-core supports these two).
var algos = []algo{
	{"sha1", sha1.Size, sha1.New},
	{"sha256", sha256.Size, sha256.New},
}

func lookup(name string) (algo, error) {
	for _, a := range algos {
		if a.name == name {
			return a, nil
		}
	}
	return algo{}, fmt.Errorf("%w %q (want sha1 or sha256): %w", ErrHash, name, syscall.EINVAL)
}

// HashSize returns the digest size in bytes of hash algorithm name.
func HashSize(name string) (int, error) {
	a, err := lookup(name)
	if err != nil {
		return 0, err
	}
	return a.size, nil
}

// ValidateHash checks that name is a supported hash algorithm.
func ValidateHash(name string) error {
	_, err := lookup(name)
	return err
}

// Sum returns the digest of data under hash algorithm name.
func Sum(name string, data []byte) ([]byte, error) {
	switch name { // the common cases without an allocation of a hash.Hash
	case "sha1":
		d := sha1.Sum(data)
		return d[:], nil
	case "sha256":
		d := sha256.Sum256(data)
		return d[:], nil
	}
	a, err := lookup(name)
	if err != nil {
		return nil, err
	}
	h := a.new()
	h.Write(data)
	return h.Sum(nil), nil
}

// Format returns the blobref of digest under hash algorithm name. The
// digest must have the algorithm's size.
func Format(name string, digest []byte) (string, error) {
	a, err := lookup(name)
	if err != nil {
		return "", err
	}
	if len(digest) != a.size {
		return "", fmt.Errorf("%w: %s digest has %d bytes, want %d: %w",
			ErrBlobref, name, len(digest), a.size, syscall.EINVAL)
	}
	// one allocation: blobrefs are formatted for every blob stored
	var b strings.Builder
	b.Grow(len(name) + 1 + 2*len(digest))
	b.WriteString(name)
	b.WriteByte('-')
	for _, c := range digest {
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String(), nil
}

const hexDigits = "0123456789abcdef"

// Blobref returns the blobref of data under hash algorithm name.
func Blobref(name string, data []byte) (string, error) {
	ref, _, err := Name(name, data)
	return ref, err
}

// Name returns the blobref of data under hash algorithm name and its raw
// digest: what StoreAll needs beside the name.
func Name(name string, data []byte) (ref string, digest []byte, err error) {
	if digest, err = Sum(name, data); err != nil {
		return "", nil, err
	}
	ref, err = Format(name, digest)
	return ref, digest, err
}

// Parse splits a blobref into its hash algorithm and raw digest. It is
// strict: a known algorithm, one hyphen, and exactly the digest's length
// in lower-case hex.
func Parse(ref string) (name string, digest []byte, err error) {
	for _, a := range algos {
		if len(ref) <= len(a.name) || ref[:len(a.name)] != a.name || ref[len(a.name)] != '-' {
			continue
		}
		hexpart := ref[len(a.name)+1:]
		if len(hexpart) != 2*a.size {
			return "", nil, fmt.Errorf("%w %q: %s digest needs %d hex digits, has %d: %w",
				ErrBlobref, ref, a.name, 2*a.size, len(hexpart), syscall.EINVAL)
		}
		for i := 0; i < len(hexpart); i++ {
			c := hexpart[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return "", nil, fmt.Errorf("%w %q: %q at offset %d is not a lower-case hex digit: %w",
					ErrBlobref, ref, c, len(a.name)+1+i, syscall.EINVAL)
			}
		}
		d, _ := hex.DecodeString(hexpart) // checked above
		return a.name, d, nil
	}
	return "", nil, fmt.Errorf("%w %q: want sha1-<40 hex> or sha256-<64 hex>: %w",
		ErrBlobref, ref, syscall.EINVAL)
}

// Validate checks that ref is a well-formed blobref.
func Validate(ref string) error {
	_, _, err := Parse(ref)
	return err
}

// HashOfDigestSize returns the algorithm whose digests have n bytes, for
// naming a digest whose algorithm was not told (the two supported
// algorithms have different sizes).
func HashOfDigestSize(n int) (string, error) {
	for _, a := range algos {
		if a.size == n {
			return a.name, nil
		}
	}
	return "", fmt.Errorf("%w: no hash algorithm has %d-byte digests: %w", ErrBlobref, n, syscall.EPROTO)
}
