// Package snapfile is the container of a module's snapshot file: a
// compact binary image of state that can be rebuilt from the KVS but
// costs many reads to rebuild (job-list's and the job manager's inactive
// jobs). It gives the encoding primitives, a header and checksum that
// make a damaged or foreign file an error rather than wrong state, and a
// write that replaces the file whole or not at all.
//
// A file is: the magic line, the body, then a CRC-32 (IEEE,
// little-endian) of both. In the body numbers are varints (floats their
// IEEE bits, fixed 8 bytes) and strings are table references: uvarint 0
// and a new string (uvarint length, bytes), which takes the next table
// slot, or uvarint k for table slot k-1, so repeated text costs a byte
// or two.
package snapfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
)

// ErrDamaged is wrapped by every decoding error.
var ErrDamaged = errors.New("damaged snapshot")

// MaxString bounds a string read back (a corrupt length must not
// allocate gigabytes).
const MaxString = 1 << 20

// Writer encodes a snapshot body.
type Writer struct {
	buf     []byte
	strings map[string]uint64
}

// NewWriter starts a snapshot with its magic line; size is a guess of
// the body's length.
func NewWriter(magic string, size int) *Writer {
	w := &Writer{buf: make([]byte, 0, len(magic)+size+4), strings: map[string]uint64{}}
	w.buf = append(w.buf, magic...)
	return w
}

// Uvarint writes an unsigned number.
func (w *Writer) Uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }

// Varint writes a signed number.
func (w *Writer) Varint(v int64) { w.buf = binary.AppendVarint(w.buf, v) }

// Float writes a float64.
func (w *Writer) Float(f float64) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(f))
}

// Bool writes a flag.
func (w *Writer) Bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// String writes s, or a reference to where it was written before.
func (w *Writer) String(s string) {
	if k, ok := w.strings[s]; ok {
		w.Uvarint(k)
		return
	}
	w.Uvarint(0)
	w.Uvarint(uint64(len(s)))
	w.buf = append(w.buf, s...)
	w.strings[s] = uint64(len(w.strings) + 1)
}

// Bytes ends the snapshot with its checksum and returns it.
func (w *Writer) Bytes() []byte {
	return binary.LittleEndian.AppendUint32(w.buf, crc32.ChecksumIEEE(w.buf))
}

// Reader decodes a snapshot body; the first error sticks (Err), and
// every read after it returns zero values.
type Reader struct {
	b       []byte
	err     error
	strings []string
}

// NewReader checks data's magic line and checksum and returns a reader
// of its body.
func NewReader(magic string, data []byte) (*Reader, error) {
	if len(data) < len(magic)+4 || !bytes.HasPrefix(data, []byte(magic)) {
		return nil, fmt.Errorf("%w: not a %q file (bad header)", ErrDamaged, magic[:len(magic)-1])
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (torn or damaged file)", ErrDamaged)
	}
	return &Reader{b: body[len(magic):]}, nil
}

// Fail records a decoding error (what the value read was wrong about).
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
	}
}

// Err is the first error.
func (r *Reader) Err() error { return r.err }

// Len is how many body bytes are left.
func (r *Reader) Len() int { return len(r.b) }

// Uvarint reads an unsigned number.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed number.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int reads a signed number that must be within [lo, hi].
func (r *Reader) Int(lo, hi int64) int64 {
	v := r.Varint()
	if v < lo || v > hi {
		r.Fail("number %d out of range [%d, %d]", v, lo, hi)
		return 0
	}
	return v
}

// Uint reads an unsigned number that must be at most hi.
func (r *Reader) Uint(hi uint64) uint64 {
	v := r.Uvarint()
	if v > hi {
		r.Fail("number %d out of range [0, %d]", v, hi)
		return 0
	}
	return v
}

// Float reads a float64.
func (r *Reader) Float() float64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.Fail("truncated")
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return f
}

// Bool reads a flag.
func (r *Reader) Bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 || r.b[0] > 1 {
		r.Fail("bad flag")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// String reads a string.
func (r *Reader) String() string {
	k := r.Uvarint()
	if r.err != nil {
		return ""
	}
	if k > 0 {
		if k > uint64(len(r.strings)) {
			r.Fail("string reference %d out of range", k)
			return ""
		}
		return r.strings[k-1]
	}
	n := r.Uvarint()
	if r.err != nil {
		return ""
	}
	if n > MaxString || n > uint64(len(r.b)) {
		r.Fail("string length %d out of range", n)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	r.strings = append(r.strings, s)
	return s
}

// Count reads a record count, each record taking at least minSize
// bytes: a count the rest of the file cannot hold is an error.
func (r *Reader) Count(minSize int) int {
	n := r.Uvarint()
	if r.err == nil && n > uint64(len(r.b)/max(minSize, 1)) {
		r.Fail("record count %d does not fit the file", n)
		return 0
	}
	return int(n)
}

// End checks that the body was read to its end.
func (r *Reader) End() error {
	if r.err == nil && len(r.b) != 0 {
		r.Fail("%d bytes after the last record", len(r.b))
	}
	return r.err
}

// WriteFile replaces path with data, whole or not at all: a temporary
// file beside it (mode 0600), synced, renamed over it, the directory
// synced.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
