package content

import (
	"context"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// DefaultFetchWindow is how many loads a Fetcher keeps in flight by
// default.
const DefaultFetchWindow = 16

// Fetcher loads blobs by blobref through the local broker's content
// cache, Window loads in flight (the shape of filearchive.BlobFetcher:
// flux archive extract and the job shell's stage-in use it).
type Fetcher struct {
	Ctx    context.Context
	H      *flux.Handle
	Window int // 0: DefaultFetchWindow
}

// Fetch loads refs in order and calls fn with each blob. An error names
// the blobref.
func (f *Fetcher) Fetch(refs []string, fn func(int, []byte) error) error {
	window := f.Window
	if window <= 0 {
		window = DefaultFetchWindow
	}
	futures := make([]*flux.Future, len(refs))
	defer func() {
		for _, fut := range futures {
			if fut != nil {
				fut.Close()
			}
		}
	}()
	next := 0
	for i := range refs {
		for ; next < len(refs) && next < i+window; next++ {
			_, digest, err := Parse(refs[next])
			if err == nil {
				futures[next], err = SendLoad(f.H, digest, 0)
			}
			if err != nil {
				return fmt.Errorf("loading blob %s: %w", refs[next], err)
			}
		}
		data, err := LoadResult(futures[i].Get(f.Ctx))
		if err != nil {
			return fmt.Errorf("loading blob %s: %w", refs[i], err)
		}
		if err := fn(i, data); err != nil {
			return err
		}
	}
	return nil
}
