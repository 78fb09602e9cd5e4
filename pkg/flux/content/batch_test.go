package content

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

func TestBatchCodec(t *testing.T) {
	blobs := [][]byte{[]byte("one"), nil, bytes.Repeat([]byte("x"), 70000), []byte("four")}
	var b Batch
	for _, blob := range blobs {
		b.Add(blob)
	}
	if b.Len() != 4 || len(b.payload) != 16+3+70000+4 {
		t.Fatalf("len %d size %d", b.Len(), len(b.payload))
	}
	got, err := SplitBatch(b.payload)
	if err != nil || len(got) != len(blobs) {
		t.Fatalf("split: %d blobs, %v", len(got), err)
	}
	for i := range blobs {
		if !bytes.Equal(got[i], blobs[i]) {
			t.Fatalf("blob %d differs", i)
		}
	}
	for _, tc := range []struct {
		payload []byte
		msg     string
	}{
		{[]byte{0, 0, 0, 1, 'a', 0, 0}, "2 stray bytes after blob 1"},
		{[]byte{0, 0, 0, 5, 'a'}, "blob 0 claims 5 bytes, 1 remain"},
	} {
		if _, err := SplitBatch(tc.payload); !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: got %v, want %q", tc.payload, err, tc.msg)
		}
	}
}

func TestBatchResult(t *testing.T) {
	d1, _ := Sum("sha1", []byte("a"))
	d2, _ := Sum("sha1", []byte("b"))
	got, err := BatchResult(&flux.Message{Payload: append(append([]byte(nil), d1...), d2...)}, nil, 2)
	if err != nil || !bytes.Equal(got[0], d1) || !bytes.Equal(got[1], d2) {
		t.Fatalf("%x %v", got, err)
	}
	if _, err := BatchResult(&flux.Message{Payload: d1}, nil, 2); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("short response: %v", err)
	}
	if _, err := BatchResult(&flux.Message{Payload: make([]byte, 14)}, nil, 2); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("digests of no known size: %v", err)
	}
	if _, err := BatchResult(nil, syscall.EIO, 2); !errors.Is(err, syscall.EIO) {
		t.Fatalf("error response: %v", err)
	}
}

// FuzzSplitBatch: any payload splits without a panic, and what splits
// encodes back to the same bytes.
func FuzzSplitBatch(f *testing.F) {
	var b Batch
	b.Add([]byte("one"))
	b.Add(nil)
	f.Add(b.payload)
	f.Add([]byte{0, 0, 0, 9, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, payload []byte) {
		blobs, err := SplitBatch(payload)
		if err != nil {
			return
		}
		var again Batch
		for _, blob := range blobs {
			again.Add(blob)
		}
		if !bytes.Equal(again.payload, payload) && !(len(payload) == 0 && len(again.payload) == 0) {
			t.Fatalf("%x split and joined is %x", payload, again.payload)
		}
	})
}

// TestRequestBlobs: attached blobs are taken as they are (and may be
// kept), with their digests if given; without an attachment the payload
// is split.
func TestRequestBlobs(t *testing.T) {
	var b Batch
	b.Add([]byte("one"))
	b.Add([]byte("two"))
	m := message.NewRequest("content.store-batch", flux.NodeidAny, nil)
	m.SetPayload(b.payload)
	blobs, digests, attached, err := RequestBlobs(m)
	if err != nil || attached || digests != nil || len(blobs) != 2 || string(blobs[1]) != "two" {
		t.Fatalf("payload: %q %q %v %v", blobs, digests, attached, err)
	}
	m = message.NewRequest("content.store-batch", flux.NodeidAny, nil)
	m.Attached = Blobs{Data: [][]byte{[]byte("x")}, Digests: [][]byte{[]byte("d")}}
	blobs, digests, attached, err = RequestBlobs(m)
	if err != nil || !attached || len(blobs) != 1 || string(blobs[0]) != "x" || string(digests[0]) != "d" {
		t.Fatalf("attached: %q %q %v %v", blobs, digests, attached, err)
	}
	m.Attached = Blobs{Data: [][]byte{[]byte("x")}, Digests: [][]byte{}}
	if _, _, _, err := RequestBlobs(m); !errors.Is(err, syscall.EPROTO) {
		t.Fatalf("attached digests not one per blob: %v", err)
	}
	// an attachment beside a payload is not used
	m.SetPayload(b.payload)
	if blobs, _, attached, _ = RequestBlobs(m); attached || len(blobs) != 2 {
		t.Fatalf("attachment and payload: %q %v", blobs, attached)
	}
}
