package message

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// TestReaderStall: a large message that stops arriving fails the Read
// with ErrStalled once Stall passes, instead of holding the reader (and a
// buffer of its declared size) forever.
func TestReaderStall(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	r := NewReader(a)
	r.Stall = 100 * time.Millisecond
	go func() {
		frame := binary.LittleEndian.AppendUint32(nil, StreamMagic)
		frame = binary.BigEndian.AppendUint32(frame, 1<<20)
		b.Write(append(frame, make([]byte, 1000)...))
	}()
	done := make(chan error, 1)
	go func() { _, err := r.Read(); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStalled) {
			t.Fatalf("Read of a stalled message: %v, want ErrStalled", err)
		}
		t.Log(err)
	case <-time.After(10 * time.Second):
		t.Fatal("Read of a stalled message did not return")
	}
}

// TestReaderLarge: a message past the first chunk arrives whole, in
// pieces of any size.
func TestReaderLarge(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	m := &Message{Type: Request}
	m.SetTopic("x.y")
	p := make([]byte, 3<<20+17)
	for i := range p {
		p[i] = byte(i * 7)
	}
	m.SetPayload(p)
	go func() {
		data := AppendFramed(nil, m)
		for len(data) > 0 {
			k := min(len(data), 12345)
			b.Write(data[:k])
			data = data[k:]
		}
	}()
	r := NewReader(a)
	r.Stall = 5 * time.Second
	got, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != m.Topic || string(got.Payload) != string(m.Payload) {
		t.Fatalf("message changed on the way: topic %q, %d payload bytes", got.Topic, len(got.Payload))
	}
}
