package jobexec

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// job-exec.start carries the jobspec and R of every job; they are read
// with jsonwire in one pass each, for the few members job-exec uses,
// and the responses are written by hand.

// startRequest is a job-exec.start request (wire.ExecStart).
type startRequest = wire.ExecStart

// jobspecInfo is what job-exec reads from a jobspec.
type jobspecInfo struct {
	// test is attributes.system.exec.test (nil: not a test job).
	test *testConfig
	// signal is attributes.system.shell.options.signal, if any.
	signal *signalOption
}

// signalOption is --signal=SIG@TIME.
type signalOption struct {
	Signum   int
	Timeleft float64
}

// member calls fn with the value of member name of object p, if present.
func member(p []byte, name string, fn func(val []byte) error) error {
	val, found, err := jsonwire.Member(p, name)
	if err != nil || !found {
		return err
	}
	return fn(val)
}

// object checks that val (the value at path) is an object.
func object(val []byte, path string) error {
	if len(val) == 0 || val[0] != '{' {
		return fmt.Errorf("%s: want an object", path)
	}
	return nil
}

// readJobspec finds the test executor settings and the signal option.
func readJobspec(js []byte) (jobspecInfo, error) {
	var info jobspecInfo
	if len(js) == 0 {
		return info, fmt.Errorf("no jobspec")
	}
	err := member(js, "attributes", func(attrs []byte) error {
		if err := object(attrs, "attributes"); err != nil {
			return err
		}
		return member(attrs, "system", func(sys []byte) error {
			if err := object(sys, "attributes.system"); err != nil {
				return err
			}
			return jsonwire.Object(sys, func(key, val []byte) error {
				switch string(key) {
				case "exec":
					if err := object(val, "attributes.system.exec"); err != nil {
						return err
					}
					return member(val, "test", func(t []byte) error {
						if jsonwire.IsNull(t) {
							return nil
						}
						cfg, err := decodeTestConfig(t)
						info.test = cfg
						return err
					})
				case "shell":
					// malformed shell options are the shell's business
					info.signal = readSignal(val)
				}
				return nil
			})
		})
	})
	return info, err
}

// decodeTestConfig reads attributes.system.exec.test.
func decodeTestConfig(p []byte) (*testConfig, error) {
	if err := object(p, "attributes.system.exec.test"); err != nil {
		return nil, err
	}
	cfg := &testConfig{}
	err := jsonwire.Object(p, func(key, val []byte) error {
		var err error
		switch string(key) {
		case "run_duration":
			switch {
			case val[0] == '"':
				cfg.RunDuration, err = jsonwire.String(val)
			case jsonwire.IsNull(val):
			case val[0] == '-' || val[0] >= '0' && val[0] <= '9':
				cfg.RunDuration, err = jsonwire.Float(val)
			default:
				var v any
				err = json.Unmarshal(val, &v)
				cfg.RunDuration = v
			}
		case "wait_status":
			var n int64
			n, err = jsonwire.Int(val)
			cfg.WaitStatus = int(n)
		case "mock_exception":
			if !jsonwire.IsNull(val) {
				cfg.MockException, err = jsonwire.String(val)
			}
		}
		if err != nil {
			return fmt.Errorf("attributes.system.exec.test.%s: %w", key, err)
		}
		return nil
	})
	return cfg, err
}

// readSignal reads attributes.system.shell.options.signal (nil if absent
// or malformed).
func readSignal(shell []byte) *signalOption {
	var sig *signalOption
	if len(shell) == 0 || shell[0] != '{' {
		return nil
	}
	member(shell, "options", func(opts []byte) error {
		if len(opts) == 0 || opts[0] != '{' {
			return nil
		}
		return member(opts, "signal", func(s []byte) error {
			if len(s) == 0 || s[0] != '{' {
				return nil
			}
			o := &signalOption{}
			err := jsonwire.Object(s, func(key, val []byte) error {
				var err error
				switch string(key) {
				case "signum":
					var n int64
					n, err = jsonwire.Int(val)
					o.Signum = int(n)
				case "timeleft":
					o.Timeleft, err = jsonwire.Float(val)
				}
				return err
			})
			if err == nil {
				sig = o
			}
			return nil
		})
	})
	return sig
}

// readExpiration returns R's execution.expiration (0 if none).
func readExpiration(R []byte) float64 { return readExecution(R, "expiration") }

// readStarttime reads R's execution.starttime (0 if absent).
func readStarttime(R []byte) float64 { return readExecution(R, "starttime") }

// readExecution reads a number of R's execution object.
func readExecution(R []byte, name string) float64 {
	var exp float64
	if len(R) == 0 || R[0] != '{' {
		return 0
	}
	member(R, "execution", func(ex []byte) error {
		if len(ex) == 0 || ex[0] != '{' {
			return nil
		}
		return member(ex, name, func(v []byte) error {
			if f, err := jsonwire.Float(v); err == nil {
				exp = f
			}
			return nil
		})
	})
	return exp
}

// appendResponse appends a job-exec.start response:
// {"data":D,"id":N,"type":T}.
func appendResponse(b []byte, id jobid.ID, typ string, data []byte) []byte {
	b = append(b, `{"data":`...)
	b = append(b, data...)
	b = append(b, `,"id":`...)
	b = jsonwire.AppendUint(b, uint64(id))
	b = append(b, `,"type":`...)
	b = jsonwire.AppendString(b, typ)
	return append(b, '}')
}
