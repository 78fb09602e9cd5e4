// Package jobid implements Flux job IDs: the RFC 19 FLUID (Flux Locally
// Unique ID) generator and every string encoding of a FLUID that Flux
// accepts or prints.
//
// A FLUID is a 64-bit integer laid out as
//
//	[ 40-bit timestamp (ms since the generator epoch) | 14-bit generator id | 10-bit sequence ]
//
// The encodings are:
//
//	dec       6731191091817518
//	hex       0x17e9fb8df16c2e
//	dothex    0017.e9fb.8df1.6c2e
//	kvs       job.0017.e9fb.8df1.6c2e (the job's KVS directory)
//	words     reform-remote-galileo--heart-package-academy (mnemonicode)
//	f58       ƒuZZybuNNy (base58, prefix U+0192)
//	f58plain  fuZZybuNNy (base58, ASCII prefix)
//	emoji     😃... (base 576 over the RFC 19 emoji table)
//
// [Parse] detects the encoding from the string as RFC 19 prescribes;
// [ParseAs] insists on one encoding. [ID.String] is the F58 form, which is
// how Flux shows job IDs to people. On the wire (JSON payloads) a job ID is
// a plain integer: see [ID.MarshalJSON].
package jobid

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ID is a Flux job ID (an RFC 19 FLUID).
type ID uint64

// Field widths of a FLUID, most significant first.
const (
	TimestampBits = 40
	GeneratorBits = 14
	SequenceBits  = 10

	// MaxGenerator is the largest generator id.
	MaxGenerator = 1<<GeneratorBits - 1
	// MaxSequence is the largest sequence number within one millisecond.
	MaxSequence = 1<<SequenceBits - 1
	// MaxTimestamp is the largest timestamp, in milliseconds since the epoch
	// (a little under 35 years).
	MaxTimestamp = 1<<TimestampBits - 1
)

// Sentinel error kinds. Errors returned by this package wrap one of them.
var (
	// ErrInvalid: a string is not a job ID in the expected encoding.
	ErrInvalid = errors.New("invalid jobid")
	// ErrUnknownEncoding: an encoding name is not one of [Encodings].
	ErrUnknownEncoding = errors.New("unknown jobid encoding")
	// ErrGenerator: a generator was given a bad id, or ran out of
	// timestamp bits.
	ErrGenerator = errors.New("jobid generator")
)

// Encoding names, as accepted by [ID.Encode], [ParseAs] and
// `flux job id --to`. Names are matched without regard to case.
const (
	Dec      = "dec"
	Hex      = "hex"
	DotHex   = "dothex"
	KVS      = "kvs"
	Words    = "words"
	F58      = "f58"
	F58Plain = "f58plain"
	Emoji    = "emoji"
)

// Encodings returns the names of every supported encoding.
func Encodings() []string {
	return []string{Dec, Hex, DotHex, KVS, Words, F58, F58Plain, Emoji}
}

// f58Prefix is the Unicode prefix of the F58 encoding (U+0192, "ƒ").
const f58Prefix = "\u0192"

// New assembles an ID from its three fields. It reports an error if a
// field does not fit its width.
func New(timestamp uint64, generator, sequence uint16) (ID, error) {
	switch {
	case timestamp > MaxTimestamp:
		return 0, fmt.Errorf("%w: timestamp %d exceeds %d bits", ErrGenerator, timestamp, TimestampBits)
	case generator > MaxGenerator:
		return 0, fmt.Errorf("%w: generator id %d exceeds %d", ErrGenerator, generator, MaxGenerator)
	case sequence > MaxSequence:
		return 0, fmt.Errorf("%w: sequence %d exceeds %d", ErrGenerator, sequence, MaxSequence)
	}
	return compose(timestamp, uint64(generator), uint64(sequence)), nil
}

func compose(ts, gen, seq uint64) ID {
	return ID(ts<<(GeneratorBits+SequenceBits) | gen<<SequenceBits | seq)
}

// Timestamp returns the milliseconds since the generator epoch.
func (id ID) Timestamp() uint64 { return uint64(id) >> (GeneratorBits + SequenceBits) }

// Generator returns the id of the generator that made id.
func (id ID) Generator() uint16 { return uint16(uint64(id) >> SequenceBits & MaxGenerator) }

// Sequence returns the sequence number within id's millisecond.
func (id ID) Sequence() uint16 { return uint16(uint64(id) & MaxSequence) }

// String returns the F58 encoding, e.g. "ƒuZZybuNNy" ("fuZZybuNNy"
// where the locale is not UTF-8: see ASCIIF58).
func (id ID) String() string { return id.F58(ASCIIF58()) }

// ASCIIF58 reports whether F58 ids are written with the ASCII "f", as
// Flux writes them when FLUX_F58_FORCE_ASCII is set or the locale is
// not UTF-8: the first of LC_ALL, LC_CTYPE and LANG that is set names a
// locale without "UTF-8" in it ("C", "POSIX", "en_US.ISO-8859-1"). With
// none set the prefix is "ƒ", as Python's commands write it (Python
// turns the default C locale into C.UTF-8).
var ASCIIF58 = sync.OnceValue(func() bool {
	if os.Getenv("FLUX_F58_FORCE_ASCII") != "" {
		return true
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := os.Getenv(k); v != "" {
			v = strings.ToLower(v)
			return !strings.Contains(v, "utf-8") && !strings.Contains(v, "utf8")
		}
	}
	return false
})

// Encode returns id in the named encoding (see [Encodings]).
func (id ID) Encode(enc string) (string, error) {
	switch strings.ToLower(enc) {
	case Dec:
		return strconv.FormatUint(uint64(id), 10), nil
	case Hex:
		return "0x" + strconv.FormatUint(uint64(id), 16), nil
	case DotHex:
		return string(appendDotHex(nil, id)), nil
	case KVS:
		return string(appendDotHex([]byte("job."), id)), nil
	case Words:
		return encodeWords(id), nil
	case F58:
		return id.F58(ASCIIF58()), nil
	case F58Plain:
		return id.F58(true), nil
	case Emoji:
		return encodeEmoji(id), nil
	}
	return "", fmt.Errorf("%w %q (want one of %s)", ErrUnknownEncoding, enc, strings.Join(Encodings(), ", "))
}

// F58 returns the F58 encoding with the ƒ prefix, or with the ASCII "f"
// prefix when ascii is true (what Flux does when FLUX_F58_FORCE_ASCII is
// set or the terminal cannot show UTF-8).
func (id ID) F58(ascii bool) string {
	var buf [len(f58Prefix) + f58MaxDigits]byte
	if ascii {
		return string(appendF58(buf[:0], id, "f"))
	}
	return string(appendF58(buf[:0], id, f58Prefix))
}

// MarshalJSON encodes id as a JSON integer, as Flux payloads carry it.
func (id ID) MarshalJSON() ([]byte, error) {
	return strconv.AppendUint(nil, uint64(id), 10), nil
}

// UnmarshalJSON accepts a JSON integer in the uint64 range; anything else
// (strings, fractions, exponents, negative numbers) is an error.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || len(b) > 20 {
		return fmt.Errorf("%w: JSON value %q is not an unsigned integer", ErrInvalid, b)
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return fmt.Errorf("%w: JSON value %q is not an unsigned integer", ErrInvalid, b)
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return fmt.Errorf("%w: JSON value %q has a leading zero", ErrInvalid, b)
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: JSON value %q is out of range", ErrInvalid, b)
	}
	*id = ID(v)
	return nil
}

const hexDigits = "0123456789abcdef"

// appendDotHex appends the four dot-separated 16-bit groups of id.
func appendDotHex(dst []byte, id ID) []byte {
	for i := 3; i >= 0; i-- {
		g := uint16(uint64(id) >> (16 * i))
		dst = append(dst, hexDigits[g>>12], hexDigits[g>>8&0xf], hexDigits[g>>4&0xf], hexDigits[g&0xf])
		if i > 0 {
			dst = append(dst, '.')
		}
	}
	return dst
}
