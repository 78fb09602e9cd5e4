package content

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// Batched stores are a fluxgo extension of RFC 10 for the broker's own
// modules: the KVS writes every new blob of a commit with one request,
// and the rank 0 cache writes its dirty blobs back the same way, instead
// of a request and a response per blob.
//
//	content.store-batch, content-backing.store-batch
//	request:  each blob as its length (4 bytes, big-endian), then its bytes
//	response: the blobs' raw digests, concatenated in request order
//
// The response comes when content.store would have answered for every
// blob of the batch; one failed blob fails the whole request. Modules of
// the broker attach their blobs to the request instead of a payload
// (Blobs, StoreAll, and rank 0's write-back); the content cache of a
// rank above 0 writes back to its parent with payloads.

// Limits of one batch the content cache's write-back builds: a larger
// set of blobs is sent as several requests.
const (
	MaxBatchBlobs = 1024
	MaxBatchBytes = 4 << 20
)

// Batch builds a store-batch request payload.
type Batch struct {
	payload []byte
	n       int
}

// Add appends blob to the batch.
func (b *Batch) Add(blob []byte) {
	b.payload = binary.BigEndian.AppendUint32(b.payload, uint32(len(blob)))
	b.payload = append(b.payload, blob...)
	b.n++
}

// Grow makes room for n more bytes of blobs, so that adding them copies
// each blob once.
func (b *Batch) Grow(n int) { b.payload = slices.Grow(b.payload, n) }

// Cost returns what adding blob to a batch adds to its size.
func Cost(blob []byte) int { return 4 + len(blob) }

// Len returns the number of blobs in the batch.
func (b *Batch) Len() int { return b.n }

// Full reports whether the batch has reached a sender's limits.
func (b *Batch) Full() bool { return b.n >= MaxBatchBlobs || len(b.payload) >= MaxBatchBytes }

// Send starts the store of the batch's blobs. Use BatchResult on the
// response.
func (b *Batch) Send(h *flux.Handle, flags Flags) (*flux.Future, error) {
	topic, nodeid := route(flags, "store-batch")
	return h.RPCRaw(topic, nodeid, b.payload, 0)
}

// SplitBatch returns the blobs of a store-batch request payload. They
// share payload's memory.
func SplitBatch(payload []byte) ([][]byte, error) {
	var blobs [][]byte
	for off := 0; off < len(payload); {
		if len(payload)-off < 4 {
			return nil, fmt.Errorf("store-batch: %d stray bytes after blob %d: %w", len(payload)-off, len(blobs), syscall.EPROTO)
		}
		n := int(binary.BigEndian.Uint32(payload[off:]))
		off += 4
		if n > len(payload)-off {
			return nil, fmt.Errorf("store-batch: blob %d claims %d bytes, %d remain: %w", len(blobs), n, len(payload)-off, syscall.EPROTO)
		}
		blobs = append(blobs, payload[off:off+n:off+n])
		off += n
	}
	return blobs, nil
}

// BatchResult returns the raw digests carried by the response to a batch
// of n blobs.
func BatchResult(m *flux.Message, err error, n int) ([][]byte, error) {
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if m == nil || len(m.Payload) == 0 || len(m.Payload)%n != 0 {
		size := 0
		if m != nil {
			size = len(m.Payload)
		}
		return nil, fmt.Errorf("content store-batch: response of %d bytes for %d blobs: %w", size, n, syscall.EPROTO)
	}
	size := len(m.Payload) / n
	if _, err := HashOfDigestSize(size); err != nil {
		return nil, fmt.Errorf("content store-batch: %w", err)
	}
	digests := make([][]byte, n)
	for i := range digests {
		digests[i] = m.Payload[i*size : (i+1)*size : (i+1)*size]
	}
	return digests, nil
}

// Blobs, attached to a store-batch request (message.Attached) in place
// of a payload, hand a module's blobs to the content service of its own
// broker without copying them into one payload and out again: the
// receiver may keep them, and the sender must not change them. Digests,
// when set, are the blobs' digests under the instance's hash, which the
// sender computed already (to name them): the receiver does not hash
// them again. A request that leaves the broker carries the blobs as a
// batch payload instead (Payload), and the receiver hashes them.
type Blobs struct {
	Data    [][]byte
	Digests [][]byte // nil, or one per blob
}

// Payload returns the blobs as a store-batch request payload (a
// message.Attachment: the request had no payload beside them).
func (b Blobs) Payload(partial []byte) ([]byte, error) {
	if len(partial) != 0 {
		return nil, fmt.Errorf("store-batch: %d bytes of payload beside attached blobs: %w", len(partial), syscall.EPROTO)
	}
	var batch Batch
	n := 0
	for _, blob := range b.Data {
		n += Cost(blob)
	}
	batch.Grow(n)
	for _, blob := range b.Data {
		batch.Add(blob)
	}
	return batch.payload, nil
}

// RequestBlobs returns the blobs of a store-batch request: attached ones,
// with their digests if the sender gave them (attached true: the
// receiver may keep the blobs), or those of the payload (sharing its
// memory; digests nil).
func RequestBlobs(m *flux.Message) (blobs, digests [][]byte, attached bool, err error) {
	if b, ok := m.Attached.(Blobs); ok && len(m.Payload) == 0 {
		if b.Digests != nil && len(b.Digests) != len(b.Data) {
			return nil, nil, false, fmt.Errorf("content store-batch: %d digests attached for %d blobs: %w", len(b.Digests), len(b.Data), syscall.EPROTO)
		}
		return b.Data, b.Digests, true, nil
	}
	blobs, err = SplitBatch(m.Payload)
	return blobs, nil, false, err
}

// SendAttached starts the store of blobs attached to one store-batch
// request (see Blobs: for modules of the broker whose content service
// runs in it), with their digests or nil. Use BatchResult on the
// response.
func SendAttached(h *flux.Handle, flags Flags, blobs, digests [][]byte) (*flux.Future, error) {
	topic, nodeid := route(flags, "store-batch")
	req := message.NewRequest(topic, nodeid, nil)
	req.Attached = Blobs{Data: blobs, Digests: digests}
	return h.SendRequest(req, 0)
}

// StoreAll stores blobs, whose raw digests under hash hashName the
// caller computed (to name them), in the content service of the
// caller's broker, attached to one store-batch request (Blobs: for
// broker modules), so that the content service need not hash them
// again. It calls done with nil once the store holds every blob under
// its digest, or with the error (done runs as a Future.Then
// continuation, or posted to h when the request could not be sent).
func StoreAll(h *flux.Handle, hashName string, blobs, digests [][]byte, done func(err error)) {
	n := len(blobs)
	if n == 0 {
		h.Post(func() { done(nil) })
		return
	}
	f, err := SendAttached(h, 0, blobs, digests)
	if err != nil {
		h.Post(func() { done(err) })
		return
	}
	f.Then(func(m *flux.Message, err error) {
		got, err := BatchResult(m, err, n)
		for i := 0; err == nil && i < n; i++ {
			if !bytes.Equal(got[i], digests[i]) {
				ref, _ := Format(hashName, digests[i])
				err = checkDigest(hashName, got[i], ref) // names both
			}
		}
		done(err)
	})
}
