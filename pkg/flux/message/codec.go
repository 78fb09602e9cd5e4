package message

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ErrProto is the error kind for malformed messages (EPROTO).
var ErrProto = errors.New("protocol error")

// Codec constants (flux-core's message encoding, RFC 3).
const (
	headerSize  = 20
	headerMagic = 0x8e
	version     = 1
	// StreamMagic starts each message on a stream connection; it is
	// written in host (little-endian) byte order by flux-core.
	StreamMagic = 0xffee0012
	// MaxSize bounds one encoded message read from a stream.
	MaxSize = 1 << 30
	// MaxRoutes bounds a message's route stack (the hops it has made:
	// a client, the brokers of one instance's tree, a few modules),
	// and with it the frames a message may have.
	MaxRoutes = 256
)

// EncodedSize returns the number of bytes Encode will produce for m.
func (m *Message) EncodedSize() int {
	n := 0
	if m.Flags&FlagRoute != 0 {
		for _, r := range m.Routes {
			n += frameSize(len(r))
		}
		n += 1 // delimiter
	}
	if m.Flags&FlagTopic != 0 {
		n += frameSize(len(m.Topic))
	}
	if m.Flags&FlagPayload != 0 {
		n += frameSize(len(m.Payload))
	}
	return n + frameSize(headerSize)
}

func frameSize(n int) int {
	if n < 255 {
		return 1 + n
	}
	return 5 + n
}

func appendFrameLen(b []byte, n int) []byte {
	if n < 255 {
		return append(b, byte(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xff), uint32(n))
}

// Encode returns the encoded message (without stream framing).
func (m *Message) Encode() []byte {
	return m.AppendEncode(make([]byte, 0, m.EncodedSize()))
}

// AppendEncode appends the encoded message to b. Route frames are written
// most recent hop first, then the empty delimiter frame.
func (m *Message) AppendEncode(b []byte) []byte {
	if m.Flags&FlagRoute != 0 {
		for i := len(m.Routes) - 1; i >= 0; i-- {
			b = appendFrameLen(b, len(m.Routes[i]))
			b = append(b, m.Routes[i]...)
		}
		b = append(b, 0)
	}
	if m.Flags&FlagTopic != 0 {
		b = appendFrameLen(b, len(m.Topic))
		b = append(b, m.Topic...)
	}
	if m.Flags&FlagPayload != 0 {
		b = appendFrameLen(b, len(m.Payload))
		b = append(b, m.Payload...)
	}
	b = append(b, headerSize, headerMagic, version, byte(m.Type), m.Flags)
	b = binary.BigEndian.AppendUint32(b, m.Userid)
	b = binary.BigEndian.AppendUint32(b, m.Rolemask)
	var a1, a2 uint32
	switch m.Type {
	case Request:
		a1, a2 = m.Nodeid, m.Matchtag
	case Response:
		a1, a2 = m.Errnum, m.Matchtag
	case Event:
		a1 = m.Seq
	case Control:
		a1, a2 = m.CtlType, m.CtlStatus
	}
	b = binary.BigEndian.AppendUint32(b, a1)
	return binary.BigEndian.AppendUint32(b, a2)
}

type span struct{ lo, hi int }

// Decode parses one encoded message. The returned message's payload
// aliases b; callers that reuse b must copy first.
func Decode(b []byte) (*Message, error) {
	var stack [8]span
	frames := stack[:0]
	for off := 0; off < len(b); {
		n := int(b[off])
		off++
		if n == 0xff {
			if off+4 > len(b) {
				return nil, fmt.Errorf("%w: truncated frame length at byte %d", ErrProto, off-1)
			}
			n = int(binary.BigEndian.Uint32(b[off:]))
			off += 4
		}
		if n < 0 || n > len(b)-off {
			return nil, fmt.Errorf("%w: frame of %d bytes overruns message at byte %d", ErrProto, n, off)
		}
		if len(frames) == MaxRoutes+4 { // routes, delimiter, topic, payload, header
			return nil, fmt.Errorf("%w: more than %d frames (a route stack of at most %d hops)", ErrProto, MaxRoutes+4, MaxRoutes)
		}
		frames = append(frames, span{off, off + n})
		off += n
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("%w: empty message", ErrProto)
	}
	hs := frames[len(frames)-1]
	frames = frames[:len(frames)-1]
	h := b[hs.lo:hs.hi]
	if len(h) != headerSize {
		return nil, fmt.Errorf("%w: header frame is %d bytes, want %d", ErrProto, len(h), headerSize)
	}
	if h[0] != headerMagic {
		return nil, fmt.Errorf("%w: bad header magic 0x%02x", ErrProto, h[0])
	}
	if h[1] != version {
		return nil, fmt.Errorf("%w: unsupported message version %d", ErrProto, h[1])
	}
	m := &Message{
		Type:     Type(h[2]),
		Flags:    h[3],
		Userid:   binary.BigEndian.Uint32(h[4:]),
		Rolemask: binary.BigEndian.Uint32(h[8:]),
	}
	a1 := binary.BigEndian.Uint32(h[12:])
	a2 := binary.BigEndian.Uint32(h[16:])
	switch m.Type {
	case Request:
		m.Nodeid, m.Matchtag = a1, a2
	case Response:
		m.Errnum, m.Matchtag = a1, a2
	case Event:
		m.Seq = a1
	case Control:
		m.CtlType, m.CtlStatus = a1, a2
	default:
		return nil, fmt.Errorf("%w: unknown message type %d", ErrProto, h[2])
	}
	i := 0
	if m.Flags&FlagRoute != 0 {
		j := i
		for j < len(frames) && frames[j].hi > frames[j].lo {
			j++
		}
		if j == len(frames) {
			return nil, fmt.Errorf("%w: route flag set but no route delimiter", ErrProto)
		}
		if j > i {
			m.Routes = make([]string, j-i)
			for k := i; k < j; k++ {
				// wire order is most recent first; the stack is oldest first
				m.Routes[j-1-k] = string(b[frames[k].lo:frames[k].hi])
			}
		}
		i = j + 1
	}
	if m.Flags&FlagTopic != 0 {
		if i >= len(frames) {
			return nil, fmt.Errorf("%w: topic flag set but no topic frame", ErrProto)
		}
		m.Topic = string(b[frames[i].lo:frames[i].hi])
		i++
	}
	if m.Flags&FlagPayload != 0 {
		if i >= len(frames) {
			return nil, fmt.Errorf("%w: payload flag set but no payload frame", ErrProto)
		}
		m.Payload = b[frames[i].lo:frames[i].hi:frames[i].hi]
		i++
	}
	if i != len(frames) {
		return nil, fmt.Errorf("%w: %d unexpected frames", ErrProto, len(frames)-i)
	}
	return m, nil
}

// WriteTo writes m with stream framing (magic, big-endian length, encoded
// message) to w.
func (m *Message) WriteTo(w io.Writer) (int64, error) {
	n := m.EncodedSize()
	buf := make([]byte, 0, 8+n)
	buf = AppendFramed(buf, m)
	k, err := w.Write(buf)
	return int64(k), err
}

// AppendFramed appends m with stream framing to b.
func AppendFramed(b []byte, m *Message) []byte {
	b = binary.LittleEndian.AppendUint32(b, StreamMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(m.EncodedSize()))
	return m.AppendEncode(b)
}

// Reader reads stream-framed messages.
type Reader struct {
	r   *bufio.Reader
	hdr [8]byte
	dl  deadliner // the connection, when it has read deadlines
	// Stall bounds how long a message larger than readChunk may take to
	// arrive between two reads (0: no bound); past it Read fails.
	Stall time.Duration
	// Budget, when set, is charged for the buffer of a message larger
	// than readChunk while it arrives (and refunded once it has, or the
	// read failed): several Readers sharing one Budget bound together
	// what their half-received messages hold.
	Budget Budget
}

// Budget is memory shared by Readers for messages still arriving.
type Budget interface {
	// Take reserves n more bytes, or says why it cannot; the read then
	// fails with that error.
	Take(n int) error
	// Give returns n bytes taken before.
	Give(n int)
}

// deadliner is a connection with read deadlines (net.Conn).
type deadliner interface{ SetReadDeadline(time.Time) error }

// readChunk is the part of a message's declared length a Reader trusts
// before the bytes arrive: a header may declare up to MaxSize, and the
// buffer grows with what is read (at most twice that), never with the
// declaration alone.
const readChunk = 64 << 10

// NewReader returns a Reader over r, buffering reads.
func NewReader(r io.Reader) *Reader {
	rd := &Reader{r: bufio.NewReaderSize(r, readChunk)}
	rd.dl, _ = r.(deadliner)
	return rd
}

// ErrStalled is the error of a Read whose message stopped arriving for
// longer than Reader.Stall.
var ErrStalled = errors.New("message stalled")

// Read returns the next message. It returns io.EOF at a clean end of
// stream, and an error wrapping ErrProto on bad framing.
func (r *Reader) Read() (*Message, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: stream ended inside a message header", ErrProto)
		}
		return nil, err
	}
	if magic := binary.LittleEndian.Uint32(r.hdr[:4]); magic != StreamMagic {
		return nil, fmt.Errorf("%w: bad stream magic 0x%08x", ErrProto, magic)
	}
	n := int(binary.BigEndian.Uint32(r.hdr[4:]))
	if n > MaxSize {
		return nil, fmt.Errorf("%w: message of %d bytes exceeds limit", ErrProto, n)
	}
	var buf []byte
	var err error
	if n <= readChunk {
		buf = make([]byte, n)
		_, err = io.ReadFull(r.r, buf)
	} else {
		buf, err = r.readLarge(n)
	}
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: stream ended inside a message", ErrProto)
		}
		return nil, err
	}
	return Decode(buf)
}

// readLarge reads a message body of n bytes into a buffer that grows as
// the bytes arrive, each read bounded by Stall.
func (r *Reader) readLarge(n int) ([]byte, error) {
	if r.dl != nil && r.Stall > 0 {
		defer r.dl.SetReadDeadline(time.Time{})
	}
	taken := 0
	if r.Budget != nil {
		defer func() { r.Budget.Give(taken) }()
	}
	grow := func(k int) error {
		if r.Budget == nil {
			return nil
		}
		if err := r.Budget.Take(k); err != nil {
			return fmt.Errorf("message of %d bytes, %d arrived: %w", n, taken, err)
		}
		taken += k
		return nil
	}
	if err := grow(readChunk); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, readChunk)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			k := min(cap(buf), n-len(buf))
			if err := grow(k); err != nil {
				return nil, err
			}
			buf = append(buf, make([]byte, k)...)[:len(buf)]
		}
		if r.dl != nil && r.Stall > 0 && r.r.Buffered() == 0 {
			r.dl.SetReadDeadline(time.Now().Add(r.Stall))
		}
		k, err := r.r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+k]
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, fmt.Errorf("%w: %d of %d bytes arrived, then none for %v", ErrStalled, len(buf), n, r.Stall)
			}
			if err == io.EOF && len(buf) < n {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// Buffered reports whether more input is already buffered, which lets a
// reader batch work before blocking again.
func (r *Reader) Buffered() int { return r.r.Buffered() }

// Complete reports whether a whole message is buffered, so that the next
// Read returns without waiting for input.
func (r *Reader) Complete() bool {
	if r.r.Buffered() < len(r.hdr) {
		return false
	}
	h, err := r.r.Peek(len(r.hdr)) // buffered: no read
	if err != nil {
		return false
	}
	n := binary.BigEndian.Uint32(h[4:])
	return uint64(r.r.Buffered()) >= uint64(len(r.hdr))+uint64(n)
}
