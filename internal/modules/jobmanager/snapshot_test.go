package jobmanager

import (
	"errors"
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/snapfile"
)

func snapRecs() []snapRec {
	return []snapRec{
		{id: 1 << 40, rec: inactiveRec{tSubmit: 1.5, tInactive: 9.25, expiration: 100, priority: -3, userid: 1001,
			waitStatus: 256, finishStatus: 256, flags: 4, urgency: 31, bits: recRan | recStarted | recFinished},
			exception: "", result: "FAILED"},
		{id: 7, rec: inactiveRec{tSubmit: 2, tInactive: 3, userid: 0, urgency: -1, bits: recFatal | recFatalBeforeFinish},
			exception: "cancel", result: "CANCELED"},
	}
}

func TestSnapshotCodec(t *testing.T) {
	in := snapRecs()
	out, err := decodeSnapshot(encodeSnapshot(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	data := encodeSnapshot(in)
	for _, bad := range [][]byte{nil, data[:len(data)-1], append([]byte("fluxgo job-list snapshot 1\n"), data[30:]...)} {
		if _, err := decodeSnapshot(bad); !errors.Is(err, snapfile.ErrDamaged) {
			t.Errorf("damaged snapshot accepted or wrong error: %v", err)
		}
	}
}

func FuzzSnapshot(f *testing.F) {
	f.Add(encodeSnapshot(snapRecs()))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := decodeSnapshot(data)
		if err != nil {
			return
		}
		again, err := decodeSnapshot(encodeSnapshot(recs))
		if err != nil || !reflect.DeepEqual(recs, again) && len(recs) > 0 {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}
