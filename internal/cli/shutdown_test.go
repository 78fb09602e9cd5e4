package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

func TestShutdown(t *testing.T) {
	for _, o := range []shutdownOptions{{}, {verbose: 1}, {background: true}} {
		tb := startBrokers(t, 2, true)
		h := tb.handle(t)
		var stderr testinstance.Buffer
		if err := shutdown(testCtx(t), h, o, &stderr); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		for r, d := range tb.done {
			select {
			case code := <-d:
				d <- code
			case <-time.After(20 * time.Second):
				t.Fatalf("%+v: broker %d still running after flux shutdown", o, r)
			}
		}
		// --verbose shows debug messages, like the module being unloaded
		if o.verbose > 0 && !strings.Contains(stderr.String(), "testmod.debug[0]") {
			t.Errorf("--verbose showed no debug log:\n%s", stderr.String())
		}
		if o.verbose == 0 && strings.Contains(stderr.String(), ".debug[") {
			t.Errorf("%+v showed debug messages:\n%s", o, stderr.String())
		}
	}
}

func TestShutdownLogLevel(t *testing.T) {
	if (shutdownOptions{}).logLevel() != 6 || (shutdownOptions{quiet: true}).logLevel() != 4 || (shutdownOptions{verbose: 1}).logLevel() != 7 {
		t.Error("wrong log levels")
	}
}

func TestShutdownTarget(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"shutdown", "ƒ123"}, strings.NewReader(""), &out, &errb); code == 0 || !strings.Contains(errb.String(), "native URI") {
		t.Errorf("high-level URI: exit %d, %q", code, errb.String())
	}

}
