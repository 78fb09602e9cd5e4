package kvs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// benchCommitPayload builds a kvs.commit payload of n operations of the
// shapes the job manager sends: eventlog appends (vals), the valrefs of
// a job's J and jobspec, a job's directory (an empty dir) and a small
// dir, cycling through them.
func benchCommitPayload(n int) []byte {
	event := []byte(`{"timestamp":1700000000.123456,"name":"submit","context":{"userid":1000,"urgency":16,"flags":0,"version":1}}` + "\n")
	b := []byte(`{"namespace":"primary","flags":0,"ops":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		dir := fmt.Sprintf("job.0000.%04x.a600.0000", i)
		var key, dirent string
		flags := 0
		switch i % 4 {
		case 0:
			key = dir + ".eventlog"
			flags = flagAppend
			dirent = `{"data":"` + base64.StdEncoding.EncodeToString(event) + `","type":"val","ver":1}`
		case 1:
			key = dir + ".jobspec"
			dirent = fmt.Sprintf(`{"data":["sha1-%040x"],"type":"valref","ver":1}`, i)
		case 2:
			key = dir
			dirent = `{"data":{},"type":"dir","ver":1}`
		case 3:
			key = dir + ".R"
			dirent = `{"data":{"a":{"data":"MQ==","type":"val","ver":1},` +
				fmt.Sprintf(`"b":{"data":["sha1-%040x"],"type":"valref","ver":1}},"type":"dir","ver":1}`, i)
		}
		b = append(b, `{"key":"`...)
		b = append(b, key...)
		b = append(b, `","flags":`...)
		b = strconv.AppendInt(b, int64(flags), 10)
		b = append(b, `,"dirent":`...)
		b = append(b, dirent...)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// Decoding a commit payload: of one operation (a single put) and of 64
// (a batch of the job manager's), as fluxkvs writes them, and of 64
// indented (as a client may write them).
func BenchmarkParseCommit(b *testing.B) {
	var indented bytes.Buffer
	if err := json.Indent(&indented, benchCommitPayload(64), "", " "); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		p    []byte
	}{
		{"ops=1", benchCommitPayload(1)},
		{"ops=64", benchCommitPayload(64)},
		{"ops=64-indented", indented.Bytes()},
	} {
		p := bc.p
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := parseCommit(p, false, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
