package jobingest

import (
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
	want := func(data []byte) string {
		// identical jobs carry identical texts: hashed once (the hash
		// name was checked at load, so Blobref cannot fail)
		ref := in.refs.Get(data, func(data []byte) string {
			ref, _ := content.Blobref(in.hashName, data)
			return ref
		})
		if _, have := in.stored.Lookup(ref); !queued[ref] && !have {
			queued[ref] = true
			toStore = append(toStore, blob{ref, data})
		}
		return ref
	}
	for i, p := range batch {
		refs[i] = jobRefs{J: want(p.J), jobspec: want(p.jobspec)}
	}
	if len(toStore) == 0 {
		done(refs, nil)
		return
	}
	data := make([][]byte, len(toStore))
	digests := make([][]byte, len(toStore))
	storeRefs := make([]string, len(toStore))
	for i, b := range toStore {
		// the blobrefs were made here, with the instance's hash: they
		// parse (a text seen before is not hashed again; this is rare)
		_, digests[i], _ = content.Parse(b.ref)
		data[i], storeRefs[i] = b.data, b.ref
	}
	content.StoreAll(in.h, in.hashName, data, digests, func(err error) {
		if err != nil {
			done(nil, err)
			return
		}
		for _, ref := range storeRefs {
			in.stored.Put(ref, struct{}{})
		}
		done(refs, nil)
	})
}
