package content

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Flags choose where a load or store request goes.
type Flags int

const (
	// Upstream sends the request to the content service of the sender's
	// parent broker (nodeid FLUX_NODEID_UPSTREAM): what a rank > 0 cache
	// does to fault in a miss or write through a store.
	Upstream Flags = 1 << iota
	// BypassCache sends the request straight to the backing store on
	// rank 0 (content-backing.load / content-backing.store).
	BypassCache
)

func route(flags Flags, method string) (string, uint32) {
	switch {
	case flags&BypassCache != 0:
		return "content-backing." + method, 0
	case flags&Upstream != 0:
		return "content." + method, flux.NodeidUpstream
	default:
		return "content." + method, flux.NodeidAny
	}
}

// SendLoad starts a load of the blob with the given raw digest. The
// request payload is the digest itself; the response payload is the
// blob (RFC 10). Use LoadResult on the response, e.g. in a Then callback.
func SendLoad(h *flux.Handle, digest []byte, flags Flags) (*flux.Future, error) {
	if len(digest) == 0 {
		return nil, fmt.Errorf("content load: empty digest: %w", syscall.EINVAL)
	}
	topic, nodeid := route(flags, "load")
	return h.RPCRaw(topic, nodeid, digest, 0)
}

// LoadResult returns the blob carried by a load response.
func LoadResult(m *flux.Message, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("content load: no response: %w", syscall.EPROTO)
	}
	return m.Payload, nil
}

// LoadDigest loads the blob with the given raw digest.
func LoadDigest(ctx context.Context, h *flux.Handle, digest []byte, flags Flags) ([]byte, error) {
	f, err := SendLoad(h, digest, flags)
	if err != nil {
		return nil, err
	}
	return LoadResult(f.Get(ctx))
}

// Load loads the blob named by blobref ref.
func Load(ctx context.Context, h *flux.Handle, ref string, flags Flags) ([]byte, error) {
	_, digest, err := Parse(ref)
	if err != nil {
		return nil, err
	}
	return LoadDigest(ctx, h, digest, flags)
}

// SendStore starts a store of data. The request payload is the blob; the
// response payload is its raw digest. Use StoreResult on the response.
func SendStore(h *flux.Handle, data []byte, flags Flags) (*flux.Future, error) {
	topic, nodeid := route(flags, "store")
	return h.RPCRaw(topic, nodeid, data, 0)
}

// StoreResult returns the raw digest carried by a store response.
func StoreResult(m *flux.Message, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if m == nil || len(m.Payload) == 0 {
		return nil, fmt.Errorf("content store: response carries no digest: %w", syscall.EPROTO)
	}
	if _, err := HashOfDigestSize(len(m.Payload)); err != nil {
		return nil, fmt.Errorf("content store: %w", err)
	}
	return m.Payload, nil
}

// checkDigest reports an error unless digest (hash hashName) names ref.
func checkDigest(hashName string, digest []byte, ref string) error {
	if got, _ := Format(hashName, digest); got != ref {
		return fmt.Errorf("content store of %s returned digest %s: %w", ref, got, syscall.EPROTO)
	}
	return nil
}

// StoreDigest stores data and returns its raw digest.
func StoreDigest(ctx context.Context, h *flux.Handle, data []byte, flags Flags) ([]byte, error) {
	f, err := SendStore(h, data, flags)
	if err != nil {
		return nil, err
	}
	return StoreResult(f.Get(ctx))
}

// Store stores data and returns its blobref, named after the instance's
// hash algorithm (content.hash).
func Store(ctx context.Context, h *flux.Handle, data []byte, flags Flags) (string, error) {
	digest, err := StoreDigest(ctx, h, data, flags)
	if err != nil {
		return "", err
	}
	name, err := HashName(ctx, h)
	if err != nil {
		return "", err
	}
	return Format(name, digest)
}

// HashName returns the instance's hash algorithm: the content.hash broker
// attribute, which the content module sets when it loads.
func HashName(ctx context.Context, h *flux.Handle) (string, error) {
	name, err := h.Attr(ctx, "content.hash")
	if errors.Is(err, syscall.ENOENT) {
		return DefaultHash, nil
	}
	if err != nil {
		return "", err
	}
	if err := ValidateHash(name); err != nil {
		return "", fmt.Errorf("attribute content.hash: %w", err)
	}
	return name, nil
}

// Flush asks the local content service to make everything stored so far
// durable: on rank 0 in the backing store (ENOSYS without one), on other
// ranks on rank 0 and then in its backing store.
func Flush(ctx context.Context, h *flux.Handle) error {
	return h.Call(ctx, "content.flush", flux.NodeidAny, nil, nil)
}

// Dropcache asks the local content service to drop every cache entry it
// can drop without losing data.
func Dropcache(ctx context.Context, h *flux.Handle) error {
	return h.Call(ctx, "content.dropcache", flux.NodeidAny, nil, nil)
}

// Stats is the content.stats-get response of one broker's cache.
type Stats struct {
	Count           int   `json:"count"`             // entries, valid or not
	Valid           int   `json:"valid"`             // entries holding data
	Dirty           int   `json:"dirty"`             // entries not yet durable upstream
	Size            int64 `json:"size"`              // bytes of data held
	FlushBatchCount int   `json:"flush-batch-count"` // stores in flight upstream
}

// GetStats returns the statistics of the local broker's content cache.
func GetStats(ctx context.Context, h *flux.Handle) (Stats, error) {
	var s Stats
	err := h.Call(ctx, "content.stats-get", flux.NodeidAny, nil, &s)
	return s, err
}
