package kvs

import "testing"

// The expiry timer is needed while a blob other than a root, a
// superseded directory, or (off rank 0) an extra namespace is held, and
// not for the roots alone.
func TestExpirable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rank   uint32
		blobs  []string
		ns     map[string]string // name -> rootref
		queued bool
		want   bool
	}{
		{name: "only the root", rank: 1, blobs: []string{"root"}, ns: map[string]string{PrimaryNamespace: "root"}},
		{name: "a looked-up blob", rank: 1, blobs: []string{"root", "val"}, ns: map[string]string{PrimaryNamespace: "root"}, want: true},
		{name: "a superseded dir queued", rank: 0, blobs: []string{"root"}, ns: map[string]string{PrimaryNamespace: "root"}, queued: true, want: true},
		{name: "a job namespace off rank 0", rank: 3, blobs: []string{"root", "jroot"}, ns: map[string]string{PrimaryNamespace: "root", "job-1": "jroot"}, want: true},
		{name: "a job namespace on rank 0", rank: 0, blobs: []string{"root", "jroot"}, ns: map[string]string{PrimaryNamespace: "root", "job-1": "jroot"}},
		{name: "empty", rank: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &kvs{rank: tc.rank, cache: newCache(nil, "sha1"), namespaces: map[string]*namespace{}}
			for _, ref := range tc.blobs {
				k.cache.m[ref] = &entry{data: []byte(ref), stored: true}
			}
			for name, root := range tc.ns {
				k.namespaces[name] = &namespace{name: name, rootref: root}
			}
			if tc.queued {
				k.cache.supersededQ = []supersededRef{{ref: "old", at: k.cache.now}}
			}
			if got := k.expirable(); got != tc.want {
				t.Fatalf("expirable() = %v, want %v", got, tc.want)
			}
		})
	}
}
