package kvs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// refCommit is parseCommit's result as the reference decoder finds it.
type refCommit struct {
	namespace, name string
	flags           *int
	nprocs          int
	rawOps          []byte
	haveOps         bool
	ops             []op
}

// refMembers walks the JSON object raw, found inside outer arrays or
// objects of the payload, with encoding/json, calling fn with each member
// in order (duplicates included). Errors of JSON are EPROTO; fn's are
// returned as they are.
func refMembers(raw []byte, outer int, fn func(key string, val json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not an object (%v): %w", err, syscall.EPROTO)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("member name: %v: %w", err, syscall.EPROTO)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("member value: %v: %w", err, syscall.EPROTO)
		}
		// as deep in the payload as it is (encoding/json bounds the
		// nesting of a whole document)
		in := strings.Repeat("[", outer+1) + string(val) + strings.Repeat("]", outer+1)
		if !json.Valid([]byte(in)) {
			return fmt.Errorf("member value nested too deeply: %w", syscall.EPROTO)
		}
		if err := fn(tok.(string), val); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("object end: %v: %w", err, syscall.EPROTO)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data: %w", syscall.EPROTO)
	}
	return nil
}

// refString and refInt decode with encoding/json (which takes null for
// "no change": here it is a value of the wrong type). A string the KVS
// keeps must be UTF-8.
func refString(val json.RawMessage) (string, error) {
	var s string
	if val[0] != '"' || json.Unmarshal(val, &s) != nil {
		return "", syscall.EPROTO
	}
	if !utf8.Valid(val) {
		return "", syscall.EPROTO
	}
	return s, nil
}

func refInt(val json.RawMessage) (int, error) {
	var n int
	if string(val) == "null" || json.Unmarshal(val, &n) != nil {
		return 0, syscall.EPROTO
	}
	return n, nil
}

// refParseCommit decodes a commit payload as parseCommit is specified to
// (see decode.go), with encoding/json for the JSON.
func refParseCommit(in []byte, guest bool) (*refCommit, error) {
	r := &refCommit{}
	err := refMembers(in, 0, func(key string, val json.RawMessage) error {
		var err error
		switch key {
		case "namespace":
			r.namespace, err = refString(val)
		case "name":
			r.name, err = refString(val)
		case "flags":
			var n int
			n, err = refInt(val)
			r.flags = &n
		case "nprocs":
			r.nprocs, err = refInt(val)
		case "ops":
			r.ops, err = refOps(val, guest)
			r.rawOps, r.haveOps = val, true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !r.haveOps {
		return nil, syscall.EPROTO
	}
	return r, nil
}

func refOps(val json.RawMessage, guest bool) ([]op, error) {
	var elems []json.RawMessage
	if string(val) == "null" || json.Unmarshal(val, &elems) != nil {
		return nil, syscall.EPROTO
	}
	var ops []op
	for _, e := range elems {
		if e[0] != '{' {
			return nil, syscall.EPROTO
		}
		var o op
		haveKey, haveDirent := false, false
		err := refMembers(e, 2, func(key string, val json.RawMessage) error {
			var err error
			switch key {
			case "key":
				o.key, err = refString(val)
				haveKey = true
			case "flags":
				o.flags, err = refInt(val)
			case "dirent":
				o.dirent, err = treeobj.DecodeNullable(val)
				haveDirent = true
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if !haveKey || !haveDirent {
			return nil, syscall.EPROTO
		}
		o.comps = treeobj.SplitKey(o.key)
		switch d := o.dirent; {
		case o.flags&^flagAppend != 0, len(o.comps) == 0:
			return nil, syscall.EINVAL
		case guest && d != nil && d.Type != treeobj.Val && (d.Type != treeobj.Dir || d.Len() > 0):
			return nil, syscall.EPERM
		}
		ops = append(ops, o)
	}
	return ops, nil
}

// errnoOf is the errno an error is answered with.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// checkParseCommit compares parseCommit with the reference decoder, and
// with its own decoding member by member (no canonical form fast path).
func checkParseCommit(t *testing.T, in []byte) {
	for _, guest := range []bool{false, true} {
		req, ops, err := parseCommit(in, guest, nil)
		ref, rerr := refParseCommit(in, guest)
		if (err == nil) != (rerr == nil) || errnoOf(err) != errnoOf(rerr) {
			t.Fatalf("guest %v: %.300q: error %.300v, reference %.300v", guest, in, err, rerr)
		}
		greq, gops, haveOps, gerr := decodePayload(in, guest, false)
		if gerr == nil && !haveOps {
			gerr = fmt.Errorf("missing ops array: %w", syscall.EPROTO)
		}
		if errnoOf(gerr) != errnoOf(err) || err != nil && gerr.Error() != err.Error() {
			t.Fatalf("guest %v: %.300q: error %.300v, decoded member by member %.300v", guest, in, err, gerr)
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(req, greq) || !reflect.DeepEqual(ops, gops) {
			t.Fatalf("guest %v: %.300q: decoded %+v %+v, member by member %+v %+v", guest, in, req, ops, greq, gops)
		}
		if req.Namespace != ref.namespace || req.Name != ref.name || req.Nprocs != ref.nprocs ||
			(req.Flags == nil) != (ref.flags == nil) || req.Flags != nil && *req.Flags != *ref.flags ||
			!bytes.Equal(req.Ops, ref.rawOps) {
			t.Fatalf("%.300q: decoded %+v, reference %+v", in, req, ref)
		}
		if len(ops) != len(ref.ops) {
			t.Fatalf("%.300q: %d ops, reference %d", in, len(ops), len(ref.ops))
		}
		for i := range ops {
			o, r := &ops[i], &ref.ops[i]
			if o.key != r.key || o.flags != r.flags || !slices.Equal(o.comps, r.comps) ||
				(o.dirent == nil) != (r.dirent == nil) ||
				o.dirent != nil && !bytes.Equal(o.dirent.Encode(), r.dirent.Encode()) {
				t.Fatalf("%.300q: op %d %+v, reference %+v", in, i, o, r)
			}
		}
	}
}

var parseCommitSeeds = []string{
	`{"namespace":"primary","flags":0,"ops":[{"key":"test.a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}}]}`,
	`{"name":"x","nprocs":4,"namespace":"n","flags":1,"ops":[{"key":"a","flags":32,"dirent":null}],"z":[[{}]]}`,
	` {"namespace" : "p" , "flags" : 0 , "ops" : [ { "key" : "a.b" , "flags" : 0 , "dirent" : null } ] } `,
	`{"namespace":"p","flags":0,"ops":[]}`,
	`{"namespace":"p","flags":0,"ops":null}`,
	`{"namespace":null,"flags":0,"ops":[]}`,
	`{"namespace":"p","flags":null,"ops":[]}`,
	`{"namespace":"p","flags":-0,"ops":[]}`,
	`{"namespace":"p","flags":1e0,"ops":[]}`,
	`{"namespace":"p","flags":01,"ops":[]}`,
	`{"namespace":"p","flags":9223372036854775808,"ops":[]}`,
	`{"namespace":"p","flags":-9223372036854775808,"ops":[]}`,
	`{"namespace":"p","flags":"0","ops":[]}`,
	`{"namespace":"p","flags":0,"ops":[null]}`,
	`{"namespace":"p","flags":0,"ops":[[]]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","key":"..","flags":0,"dirent":null}]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","dirent":{"ver":2},"dirent":null}]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":2,"dirent":null}],"ops":[]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"..a..b.","flags":0,"dirent":{"data":{},"type":"dir","ver":1}}]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"data":{"x":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}}]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"data":{"target":"x"},"type":"symlink","ver":1}}]}`,
	`{"na\u006despace":"p\u00e9\ud83d\ude00","flags":0,"ops":[{"k\u0065y":"a\ud800","flags":0,"dirent":null}]}`,
	"{\"namespace\":\"p\xff\",\"flags\":0,\"ops\":[]}",
	"{\"namespace\":\"p\",\"flags\":0,\"ops\":[{\"key\":\"a\xc3\",\"flags\":0,\"dirent\":null}]}",
	"{\"namespace\":\"p\",\"flags\":0,\"ops\":[],\"x\":\"\xff\",\"\xfe\":1}",
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}}],"x":[1,2,{"a":[true,false,null]}]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}}]}` + "\x00",
	`{"namespace":"p","flags":0,"ops":[{"key":".","flags":0,"dirent":null}],"x":[}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}]}`,
	`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}}]}{}`,
	`[]`, `"x"`, ``, `{}`, `{"ops":[]}`,
}

func TestParseCommitDifferential(t *testing.T) {
	for _, s := range parseCommitSeeds {
		checkParseCommit(t, []byte(s))
	}
	for _, n := range []int{1, 7, 64} {
		checkParseCommit(t, benchCommitPayload(n))
	}
}

// FuzzParseCommitDifferential checks parseCommit against a decoder built
// on encoding/json.
func FuzzParseCommitDifferential(f *testing.F) {
	for _, s := range parseCommitSeeds {
		f.Add([]byte(s))
	}
	f.Add(benchCommitPayload(4))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkParseCommit(t, in)
	})
}

// The payloads fluxkvs and flux-core write are decoded in one pass (the
// framed decoding does not give up on them), and others member by
// member, to the same result.
func TestParseCommitFramed(t *testing.T) {
	var txn fluxkvs.Txn
	txn.Put("a.b", []byte("value"))
	txn.Append("job.x.eventlog", []byte(`{"timestamp":1,"name":"x"}`+"\n"))
	txn.Unlink("a.c")
	txn.Mkdir("d")
	txn.Symlink("l", "ns", "a.b")
	txn.PutTreeobj("t", treeobj.NewValref("sha1-79dd254ffe5bc4f58474bf1c560edc06ce5f586e"))
	wire, err := fluxkvs.AttachedOps(txn.Ops).Payload([]byte(`{"namespace":"primary","flags":0}`))
	if err != nil {
		t.Fatal(err)
	}
	canonical := [][]byte{
		bytes.TrimSuffix(wire, []byte{0}),
		benchCommitPayload(1),
		benchCommitPayload(64),
		[]byte(`{"name":"f","nprocs":2,"namespace":"p","flags":0,"ops":[]}`),
		[]byte(`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null},{"dirent":null,"key":"b"}]}`),
	}
	for _, in := range canonical {
		if _, _, _, err := decodePayload(in, false, true); err != nil {
			t.Errorf("%.300q: %v", in, err)
		}
		checkParseCommit(t, in)
	}
	other := []string{
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null} ]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null}]} `,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null }]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","dirent":null,"flags":0}]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null}],"x":1}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null,"dirent":null}]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":nul}]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"ver":1}}]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":2,"dirent":null}]}`,
		`{"namespace":"p","flags":0,"ops":[{}]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null},]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null}`,
		`{"namespace":"p","flags":0,"ops":[`,
		`{"namespace":"p","flags":0,"ops":[]`,
		`{"namespace":"p","flags":0,"ops":[]]`,
		`{"namespace":"p","flags":0,"ops":[],"ops":[{"key":"a","flags":0,"dirent":null}]}`,
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null}],"ops":[]}`,
	}
	for _, in := range other {
		checkParseCommit(t, []byte(in))
	}
	// nesting is measured in the whole payload (at most 10000 levels)
	for n := 9995; n <= 10000; n++ {
		deep := strings.Repeat("[", n) + strings.Repeat("]", n)
		checkParseCommit(t, []byte(`{"namespace":"p","flags":0,"ops":[{"key":"a","x":`+deep+`,"flags":0,"dirent":null}]}`))
		checkParseCommit(t, []byte(`{"namespace":"p","x":`+deep+`,"flags":0,"ops":[]}`))
	}
}

// A relayed commit or fence is read in one pass.
func TestParseCommitRelayFramed(t *testing.T) {
	for _, in := range []string{
		`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null}]}`,
		`{"name":"f","nprocs":2,"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":null}]}`,
	} {
		req, _, err := parseCommit([]byte(in), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		relayed, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := decodePayload(relayed, false, true); err != nil {
			t.Errorf("relay %s: %v", relayed, err)
		}
	}
}
