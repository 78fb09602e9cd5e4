package contentsqlite

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/s2"
)

// jobLikeBlob is a jobspec-shaped blob: the same keys and environment,
// one job's own values.
func jobLikeBlob(i int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":1,"tasks":[{"command":["app","--input=run%d.dat"],"slot":"task","count":{"per_slot":1}}],`, i)
	b.WriteString(`"attributes":{"system":{"cwd":"/home/user/project","environment":{`)
	for k := 0; k < 40; k++ {
		fmt.Fprintf(&b, `"VAR_%02d":"/usr/local/lib/value-%02d:/opt/site/lib/value",`, k, k)
	}
	fmt.Fprintf(&b, `"JOB":"%d"},"duration":%d}}}`, i, 60+i)
	return b.Bytes()
}

// TestDictCompression: with s2, blobs of one shape are soon stored with
// a dictionary, much smaller than s2 alone makes them; they read back
// after a reopen, and dictionaries of a rolled-back transaction are
// forgotten with it.
func TestDictCompression(t *testing.T) {
	path := filepath.Join(t.TempDir(), "content.sqlite")
	st := openT(t, Options{Path: path, Hash: "sha1", Compress: "s2"})
	var blobs [][]byte
	for i := 0; i < 200; i++ {
		blobs = append(blobs, jobLikeBlob(i))
	}
	// a rolled-back transaction that made dictionary 1
	tx, err := st.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.StoreAll(blobs[:100], nil); err != nil {
		t.Fatal(err)
	}
	if st.dicts.cur != 1 {
		t.Fatalf("no dictionary after %d bytes of samples", len(st.dicts.samples))
	}
	tx.Rollback()
	if st.dicts.cur != 0 || len(st.dicts.byID) != 0 {
		t.Fatalf("rollback kept dictionary %d (%d)", st.dicts.cur, len(st.dicts.byID))
	}
	var digests [][]byte
	for _, b := range blobs {
		digests = append(digests, storeAll(t, st, b)...)
	}
	var dictBytes, plain int64
	rows, err := st.db.Query("SELECT encoding, length(object), size FROM objects")
	if err != nil {
		t.Fatal(err)
	}
	withDict := 0
	for rows.Next() {
		var enc int
		var n, size int64
		rows.Scan(&enc, &n, &size)
		if enc == encodingS2Dict {
			withDict++
			dictBytes += n
			plain += size
		}
	}
	rows.Close()
	if withDict < 150 || dictBytes*10 > plain {
		t.Errorf("%d of 200 blobs with a dictionary, %d bytes for %d (want most, under a tenth)", withDict, dictBytes, plain)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openT(t, Options{Path: path, Hash: "sha1", Compress: "s2"})
	defer st.Close()
	for i, d := range digests {
		got, err := st.Load(d)
		if err != nil || !bytes.Equal(got, blobs[i]) {
			t.Fatalf("blob %d after reopen: %v", i, err)
		}
	}
	// a missing dictionary is damage, named as such
	if _, err := st.db.Exec("DELETE FROM dicts"); err != nil {
		t.Fatal(err)
	}
	st.dicts.byID = map[uint64]*s2.Dict{}
	if _, err := st.Load(digests[len(digests)-1]); err == nil {
		t.Error("a blob read without its dictionary")
	}
}
