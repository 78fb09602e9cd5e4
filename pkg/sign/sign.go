// Package sign implements the "none" mechanism of RFC 39 signed
// envelopes, the J that flux submit sends to job-ingest: a header of
// typed key/value pairs (version, userid, mechanism), the payload, and
// the signature, each base64-encoded and joined by periods. The "none"
// mechanism carries no cryptographic signature: the broker's SO_PEERCRED
// authentication of the submitting connection is what vouches for the
// userid, so job-ingest checks the header userid against the requestor.
package sign

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// ErrInvalid is the kind of every decoding error.
var ErrInvalid = errors.New("invalid signed envelope")

// Wrap returns J for payload signed by userid with mechanism "none".
func Wrap(payload []byte, userid uint32) string {
	var hdr bytes.Buffer
	kv := func(k string, typ byte, v string) {
		hdr.WriteString(k)
		hdr.WriteByte(0)
		hdr.WriteByte(typ)
		hdr.WriteString(v)
		hdr.WriteByte(0)
	}
	kv("version", 'i', "1")
	kv("userid", 'i', strconv.FormatUint(uint64(userid), 10))
	kv("mechanism", 's', "none")
	enc := base64.StdEncoding
	return enc.EncodeToString(hdr.Bytes()) + "." + enc.EncodeToString(payload) + ".none"
}

// Envelope is a decoded J.
type Envelope struct {
	Version   int
	Userid    uint32
	Mechanism string
	Payload   []byte
}

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Unwrap decodes J. Only the "none" mechanism is supported.
func Unwrap(J string) (*Envelope, error) {
	i := strings.IndexByte(J, '.')
	if i < 0 {
		return nil, bad("want HEADER.PAYLOAD.SIGNATURE")
	}
	rest := J[i+1:]
	k := strings.IndexByte(rest, '.')
	if k < 0 {
		return nil, bad("want HEADER.PAYLOAD.SIGNATURE")
	}
	hdrB64, payB64, sig := J[:i], rest[:k], rest[k+1:]
	hdr, err := base64.StdEncoding.DecodeString(hdrB64)
	if err != nil {
		return nil, bad("header is not base64: %v", err)
	}
	env := &Envelope{Version: -1}
	seenUID := false
	fields := bytes.Split(hdr, []byte{0})
	if len(fields) > 0 && len(fields[len(fields)-1]) == 0 {
		fields = fields[:len(fields)-1]
	}
	if len(fields)%2 != 0 {
		return nil, bad("header has an odd number of fields")
	}
	for f := 0; f < len(fields); f += 2 {
		key, val := string(fields[f]), fields[f+1]
		if len(val) == 0 {
			return nil, bad("header key %q has no type", key)
		}
		typ, v := val[0], string(val[1:])
		switch key {
		case "version":
			n, err := strconv.Atoi(v)
			if typ != 'i' || err != nil {
				return nil, bad("header version %q is not an integer", v)
			}
			env.Version = n
		case "userid":
			n, err := strconv.ParseUint(v, 10, 32)
			if typ != 'i' || err != nil {
				return nil, bad("header userid %q is not an integer", v)
			}
			env.Userid = uint32(n)
			seenUID = true
		case "mechanism":
			if typ != 's' {
				return nil, bad("header mechanism is not a string")
			}
			env.Mechanism = v
		}
	}
	if env.Version != 1 {
		return nil, bad("unsupported envelope version %d", env.Version)
	}
	if !seenUID {
		return nil, bad("header has no userid")
	}
	if env.Mechanism != "none" {
		return nil, bad("signing mechanism %q is not supported (only none)", env.Mechanism)
	}
	if sig != "none" {
		return nil, bad("signature %q does not match mechanism none", sig)
	}
	env.Payload, err = decodeString(payB64)
	if err != nil {
		return nil, bad("payload is not base64: %v", err)
	}
	return env, nil
}

// decodeString is base64.StdEncoding.DecodeString without copying s
// first (a J carries kilobytes; Decode only reads its input).
func decodeString(s string) ([]byte, error) {
	enc := base64.StdEncoding
	dst := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(dst, unsafe.Slice(unsafe.StringData(s), len(s)))
	return dst[:n], err
}
