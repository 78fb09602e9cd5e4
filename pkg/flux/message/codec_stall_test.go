package message

import (
	"encoding/binary"
	"errors"
	"net"
	"strings"
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

// testBudget is a Budget with a fixed size.
type testBudget struct{ left, most int }

func (b *testBudget) Take(n int) error {
	if n > b.left {
		return errors.New("over budget")
	}
	b.left -= n
	return nil
}

func (b *testBudget) Give(n int) { b.left += n }

// TestReaderBudget: a large message is charged to the Reader's budget as
// its buffer grows, fails the Read when the budget runs out, and is
// refunded either way.
func TestReaderBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  int
		payload int
		fail    bool
	}{
		{"fits", 8 << 20, 3 << 20, false},
		{"too large", 1 << 20, 3 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			m := &Message{Type: Request}
			m.SetTopic("x.y")
			m.SetPayload(make([]byte, tc.payload))
			go func() { b.Write(AppendFramed(nil, m)) }()
			bud := &testBudget{left: tc.budget}
			r := NewReader(a)
			r.Budget = bud
			got, err := r.Read()
			if tc.fail {
				if err == nil || !strings.Contains(err.Error(), "over budget") {
					t.Fatalf("Read past the budget: %v, want over budget", err)
				}
			} else if err != nil || len(got.Payload) != tc.payload {
				t.Fatalf("Read within the budget: %v", err)
			}
			if bud.left != tc.budget {
				t.Fatalf("budget left %d after the read, want all %d back", bud.left, tc.budget)
			}
		})
	}
}
