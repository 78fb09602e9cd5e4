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
	// after dictRetrain blobs, the next dictionary (from recent samples)
	st.dicts.used = dictRetrain
	blobs = append(blobs, jobLikeBlob(1000))
	digests = append(digests, storeAll(t, st, blobs[len(blobs)-1])...)
	if st.dicts.cur != 2 {
		t.Errorf("dictionary %d after %d blobs with dictionary 1", st.dicts.cur, dictRetrain)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openT(t, Options{Path: path, Hash: "sha1", Compress: "s2"})
	if st.dicts.cur != 2 || len(st.dicts.byID) != 2 {
		t.Errorf("reopened with dictionary %d of %d", st.dicts.cur, len(st.dicts.byID))
	}
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

// BenchmarkEncodeJobBlob: the cost of compressing one jobspec-shaped
// blob with s2 alone and with a dictionary (the store's appendRow).
func BenchmarkEncodeJobBlob(b *testing.B) {
	var samples [][]byte
	for i := 0; i < 64; i++ {
		samples = append(samples, jobLikeBlob(i))
	}
	for _, mode := range []string{"s2", "s2+dict"} {
		b.Run(mode, func(b *testing.B) {
			st := &Store{opts: Options{Compress: "s2"}}
			st.dicts.byID = map[uint64]*s2.Dict{}
			if mode == "s2+dict" {
				for _, s := range samples {
					st.dicts.sample(s)
				}
				d := s2.MakeDict(st.dicts.samples, nil)
				st.dicts.byID[1], st.dicts.cur = s2.NewDict(d.Bytes()), 1
			}
			t := &Tx{s: st}
			var out int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				blob := samples[i%len(samples)]
				if mode == "s2" {
					out += len(s2.Encode(nil, blob))
					continue
				}
				st.dicts.used = 0
				args := t.appendRow(nil, nil, blob)
				out += len(args[3].([]byte))
			}
			b.ReportMetric(float64(out)/float64(b.N), "B/blob")
		})
	}
}
