package jobexec

import (
	"encoding/json"
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
)

func TestReadJobspec(t *testing.T) {
	for _, tc := range []struct {
		name, js  string
		test      bool
		run       any
		wait      int
		mock      string
		signum    int
		timeleft  float64
		wantError bool
	}{
		{name: "plain", js: `{"attributes":{"system":{"duration":0,"environment":{"A":"b"}}}}`},
		{name: "test string", js: `{"attributes":{"system":{"exec":{"test":{"run_duration":"0.001s","wait_status":256}}}}}`,
			test: true, run: "0.001s", wait: 256},
		{name: "test number", js: `{"attributes":{"system":{"exec":{"test":{"run_duration":2.5,"mock_exception":"run"}}}}}`,
			test: true, run: 2.5, mock: "run"},
		{name: "test empty", js: `{"attributes":{"system":{"exec":{"test":{}}}}}`, test: true},
		{name: "signal", js: `{"attributes":{"system":{"shell":{"options":{"signal":{"signum":10,"timeleft":60}}}}}}`,
			signum: 10, timeleft: 60},
		{name: "exec not an object", js: `{"attributes":{"system":{"exec":"x"}}}`, wantError: true},
		{name: "bad wait status", js: `{"attributes":{"system":{"exec":{"test":{"wait_status":"x"}}}}}`, wantError: true},
		{name: "not json", js: `{"attributes":`, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := readJobspec([]byte(tc.js))
			if (err != nil) != tc.wantError {
				t.Fatalf("error %v, want error %v", err, tc.wantError)
			}
			if err != nil {
				return
			}
			if (info.test != nil) != tc.test {
				t.Fatalf("test config %+v", info.test)
			}
			if info.test != nil && (info.test.RunDuration != tc.run || info.test.WaitStatus != tc.wait || info.test.MockException != tc.mock) {
				t.Errorf("test config %+v", *info.test)
			}
			if tc.signum != 0 && (info.signal == nil || info.signal.Signum != tc.signum || info.signal.Timeleft != tc.timeleft) {
				t.Errorf("signal %+v", info.signal)
			}
		})
	}
}

func TestStartWire(t *testing.T) {
	req, err := wire.DecodeExecStart([]byte(`{"R":{"execution":{"expiration":1764486000.5}},"flags":0,"id":42,"jobspec":{"a":1},"userid":1000}`))
	if err != nil || req.ID != 42 || req.Userid != 1000 || string(req.Jobspec) != `{"a":1}` {
		t.Fatalf("%+v %v", req, err)
	}
	if exp := readExpiration(req.R); exp != 1764486000.5 {
		t.Errorf("expiration %v", exp)
	}
	if exp := readExpiration([]byte(`{"execution":{}}`)); exp != 0 {
		t.Errorf("no expiration: %v", exp)
	}
	got := appendResponse(nil, 42, "release", []byte(`{"final":true,"ranks":"all"}`))
	want, _ := json.Marshal(map[string]any{"id": 42, "type": "release", "data": map[string]any{"ranks": "all", "final": true}})
	if string(got) != string(want) {
		t.Errorf("response %s, want %s", got, want)
	}
}
