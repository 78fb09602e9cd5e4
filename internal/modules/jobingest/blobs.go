package jobingest

import (
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
)

// A job's J and jobspec (a few kB each, mostly the environment) go to
// the content store as raw blobs, and the commit names them by valref.
// Committed as vals they would be base64-encoded here, scanned and
// decoded again by the KVS, which would then hash and store them all the
// same: the direct store skips two base64 passes, a hash and most of the
// commit's bytes. Identical blobs (the same jobspec submitted many times)
// are stored once.

// storedRefsMax bounds the blobrefs job-ingest remembers having stored,
// so that a blob submitted again needs no store.
const storedRefsMax = 4096

// jobRefs are the blobrefs of one job's J and jobspec.
type jobRefs struct{ J, jobspec string }

// storeBlobs hashes the J and jobspec of every job of batch, stores the
// blobs the content store may not have yet (all at once) and
// calls done with each job's refs once every store is answered, or with
// the first error.
func (in *ingest) storeBlobs(batch []*pending, done func([]jobRefs, error)) {
	refs := make([]jobRefs, len(batch))
	type blob struct {
		ref  string
		data []byte
	}
	var toStore []blob
	queued := make(map[string]bool)
	want := func(data []byte) (string, error) {
		ref, err := content.Blobref(in.hashName, data)
		if err != nil {
			return "", err
		}
		if _, have := in.stored.get(ref); !queued[ref] && !have {
			queued[ref] = true
			toStore = append(toStore, blob{ref, data})
		}
		return ref, nil
	}
	for i, p := range batch {
		var err error
		if refs[i].J, err = want(p.J); err == nil {
			refs[i].jobspec, err = want(p.jobspec)
		}
		if err != nil {
			done(nil, err)
			return
		}
	}
	if len(toStore) == 0 {
		done(refs, nil)
		return
	}
	unanswered := len(toStore)
	var first error
	finish := func(stored []string, err error) {
		for _, ref := range stored {
			if err == nil {
				in.stored.put(ref, struct{}{})
			}
		}
		if err != nil && first == nil {
			first = err
		}
		if unanswered -= len(stored); unanswered == 0 {
			if first != nil {
				done(nil, first)
			} else {
				done(refs, nil)
			}
		}
	}
	// store-batch requests (pkg/flux/content/batch.go), not one per blob
	var req content.Batch
	var group []string
	left := 0 // bytes of the blobs not yet in a request
	for _, b := range toStore {
		left += content.Cost(b.data)
	}
	req.Grow(min(left, content.MaxBatchBytes))
	send := func() {
		if len(group) == 0 {
			return
		}
		these, payload := group, req
		req, group = content.Batch{}, nil
		req.Grow(min(left, content.MaxBatchBytes))
		f, err := payload.Send(in.h, 0)
		if err != nil {
			in.h.Post(func() { finish(these, err) })
			return
		}
		f.Then(func(m *flux.Message, err error) {
			digests, err := content.BatchResult(m, err, len(these))
			for i, ref := range these {
				if err != nil {
					break
				}
				if got, _ := content.Format(in.hashName, digests[i]); got != ref {
					err = fmt.Errorf("content store of %s returned digest %s: %w", ref, got, syscall.EPROTO)
				}
			}
			finish(these, err)
		})
	}
	for _, b := range toStore {
		req.Add(b.data)
		left -= content.Cost(b.data)
		group = append(group, b.ref)
		if req.Full() {
			send()
		}
	}
	send()
}
