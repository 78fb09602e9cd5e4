package content

import (
	"errors"
	"syscall"
	"testing"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]string
		args  []string
		want  Config
		err   bool
	}{
		{name: "defaults", want: DefaultConfig()},
		{name: "attributes", attrs: map[string]string{"hash": "sha256", "cache-size": "1024"},
			want: Config{Hash: "sha256", CacheSize: 1024, BlobSizeLimit: DefaultBlobSizeLimit, FlushBatchLimit: DefaultFlushBatchLimit, DirtyLimit: DefaultDirtyLimit}},
		{name: "arguments win", attrs: map[string]string{"cache-size": "1024"},
			args: []string{"cache-size=2048", "flush-batch-limit=8", "dirty-limit=0", "backing-module=content-sqlite"},
			want: Config{Hash: "sha1", CacheSize: 2048, BlobSizeLimit: DefaultBlobSizeLimit, FlushBatchLimit: 8, BackingModule: "content-sqlite"}},
		{name: "unknown hash", attrs: map[string]string{"hash": "md5"}, err: true},
		{name: "bad number", args: []string{"cache-size=lots"}, err: true},
		{name: "negative size", args: []string{"cache-size=-1"}, err: true},
		{name: "zero batch", args: []string{"flush-batch-limit=0"}, err: true},
		{name: "negative dirty limit", args: []string{"dirty-limit=-1"}, err: true},
		{name: "unknown option", args: []string{"purge=1"}, err: true},
		{name: "not name=value", args: []string{"cache-size"}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.attrs, tc.args)
			if tc.err {
				if !errors.Is(err, syscall.EINVAL) {
					t.Fatalf("err = %v, want EINVAL", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
