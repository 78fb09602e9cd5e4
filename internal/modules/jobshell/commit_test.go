package jobshell

import (
	"errors"
	"syscall"
	"testing"
)

// TestDecodeGuestCommit: a guest's commit is read strictly: member names
// exact and once each (a check that read "OPS" as "ops" let a guest's
// writes past it), dirents RFC 11 vals.
func TestDecodeGuestCommit(t *testing.T) {
	const val = `{"ver":1,"type":"val","data":"e30="}`
	ok := `{"namespace":"primary","flags":0,"ops":[{"key":"job.0000.0000.0000.0001.guest.output","flags":32,"dirent":` + val + `}]}`
	ns, flags, ops, err := decodeGuestCommit([]byte(ok))
	if err != nil || ns != "primary" || flags != 0 || len(ops) != 1 || ops[0].flags != 32 || string(ops[0].data) != "{}" {
		t.Fatalf("a good commit: %q %d %+v %v", ns, flags, ops, err)
	}
	for _, tc := range []struct {
		name, payload string
		errno         syscall.Errno
	}{
		{"case variant", `{"namespace":"primary","flags":0,"ops":[],"OPS":[]}`, syscall.EPROTO},
		{"ops twice", `{"namespace":"primary","flags":0,"ops":[],"ops":[{"key":"resource.R","dirent":` + val + `}]}`, syscall.EPROTO},
		{"no ops", `{"namespace":"primary","flags":0}`, syscall.EPROTO},
		{"op member unknown", `{"namespace":"primary","ops":[{"key":"k","Key":"x","dirent":` + val + `}]}`, syscall.EPROTO},
		{"op key twice", `{"namespace":"primary","ops":[{"key":"k","key":"x","dirent":` + val + `}]}`, syscall.EPROTO},
		{"op without dirent", `{"namespace":"primary","ops":[{"key":"k"}]}`, syscall.EPROTO},
		{"symlink", `{"namespace":"primary","ops":[{"key":"k","dirent":{"ver":1,"type":"symlink","data":{"target":"x"}}}]}`, syscall.EPERM},
		{"bad base64", `{"namespace":"primary","ops":[{"key":"k","dirent":{"ver":1,"type":"val","data":"!!"}}]}`, syscall.EINVAL},
		{"not JSON", `{"namespace":`, syscall.EPROTO},
	} {
		if _, _, _, err := decodeGuestCommit([]byte(tc.payload)); !errors.Is(err, tc.errno) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.errno)
		}
	}
}
