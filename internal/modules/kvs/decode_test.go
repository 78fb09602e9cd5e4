package kvs

import (
	"encoding/json"
	"errors"
	"syscall"
	"testing"
)

func TestParseCommit(t *testing.T) {
	good := `{"namespace":"primary","flags":0,"ops":[` +
		`{"key":"a.b","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}},` +
		`{"key":"c","flags":32,"dirent":{"data":"eA==","type":"val","ver":1}},` +
		`{"flags":0,"dirent":null,"key":"gone"}],"name":"f","nprocs":2,"extra":[1,{"x":null},"s"]}`
	req, ops, err := parseCommit([]byte(good), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.Namespace != "primary" || *req.Flags != 0 || req.Name != "f" || req.Nprocs != 2 || len(ops) != 3 {
		t.Fatalf("parsed %+v %d ops", req, len(ops))
	}
	if ops[1].flags != flagAppend || ops[2].dirent != nil || len(ops[0].comps) != 2 {
		t.Errorf("ops %+v", ops)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(req.Ops, &raw); err != nil || len(raw) != 3 {
		t.Errorf("raw ops %s: %v", req.Ops, err)
	}
	bad := []struct {
		name, in string
		errno    syscall.Errno
	}{
		{"not json", `x`, syscall.EPROTO},
		{"no ops", `{"namespace":"p","flags":0}`, syscall.EPROTO},
		{"ops not array", `{"namespace":"p","flags":0,"ops":{}}`, syscall.EPROTO},
		{"op without dirent", `{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0}]}`, syscall.EPROTO},
		{"bad dirent", `{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":{"ver":2}}]}`, syscall.EINVAL},
		{"root key", `{"namespace":"p","flags":0,"ops":[{"key":".","flags":0,"dirent":null}]}`, syscall.EINVAL},
		{"bad op flags", `{"namespace":"p","flags":0,"ops":[{"key":"a","flags":2,"dirent":null}]}`, syscall.EINVAL},
		{"float flags", `{"namespace":"p","flags":1.5,"ops":[]}`, syscall.EPROTO},
		{"trailing", `{"namespace":"p","flags":0,"ops":[]} x`, syscall.EPROTO},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parseCommit([]byte(tc.in), false, nil)
			if !errors.Is(err, tc.errno) {
				t.Errorf("error %v, want %v", err, tc.errno)
			}
		})
	}
	// guests: vals, empty dirs and unlinks only
	for in, ok := range map[string]bool{
		`{"data":"","type":"val","ver":1}`: true,
		`{"data":{},"type":"dir","ver":1}`: true,
		`null`:                             true,
		`{"data":{"target":"x"},"type":"symlink","ver":1}`:                                   false,
		`{"data":["sha1-79dd254ffe5bc4f58474bf1c560edc06ce5f586e"],"type":"dirref","ver":1}`: false,
	} {
		_, _, err := parseCommit([]byte(`{"namespace":"p","flags":0,"ops":[{"key":"a","flags":0,"dirent":`+in+`}]}`), true, nil)
		if (err == nil) != ok || (!ok && !errors.Is(err, syscall.EPERM)) {
			t.Errorf("guest op %s: %v", in, err)
		}
	}
}

func FuzzParseCommit(f *testing.F) {
	f.Add([]byte(`{"namespace":"primary","flags":0,"ops":[{"key":"test.a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}}]}`))
	f.Add([]byte(`{"name":"x","nprocs":4,"namespace":"n","flags":1,"ops":[{"key":"a","flags":32,"dirent":null}],"z":[[{}]]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		req, ops, err := parseCommit(in, false, nil)
		if err != nil {
			return
		}
		if len(req.Ops) == 0 || !json.Valid(req.Ops) {
			t.Fatalf("raw ops %q not valid JSON", req.Ops)
		}
		for _, o := range ops {
			if len(o.comps) == 0 {
				t.Fatalf("op without path: %+v", o)
			}
		}
	})
}
