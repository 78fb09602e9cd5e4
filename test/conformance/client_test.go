package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// proxy sits between clients and a broker's local socket, as the
// recording proxy did, and keeps the messages clients send.
type proxy struct {
	ln     *net.UnixListener
	target string
	mu     sync.Mutex
	sent   []*message.Message
	open   int // client connections whose end has not been read yet
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, brokerURI string) *proxy {
	t.Helper()
	target, err := flux.SocketPath(brokerURI)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) uri() string { return "local://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("unix", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		p.mu.Lock()
		p.open++
		p.mu.Unlock()
		go func() { // broker -> client: the auth byte, then messages
			defer p.wg.Done()
			io.Copy(c, b)
			// Only our sending side: closing c here would throw away
			// what the client sent last and the other goroutine has
			// not read yet (a command that exits right after its last
			// request makes this copy fail on its next write).
			c.(*net.UnixConn).CloseWrite()
		}()
		go func() { // client -> broker, recorded
			defer p.wg.Done()
			defer c.Close()
			defer b.Close()
			defer func() {
				p.mu.Lock()
				p.open--
				p.mu.Unlock()
			}()
			r := message.NewReader(c)
			for {
				m, err := r.Read()
				if err != nil {
					return
				}
				p.mu.Lock()
				p.sent = append(p.sent, m)
				p.mu.Unlock()
				if _, err := b.Write(message.AppendFramed(nil, m)); err != nil {
					return
				}
			}
		}()
	}
}

// settle waits (up to 10 s) until every client that connected has
// closed and all it sent is recorded: the commands have exited, but the
// proxy may not have read their last messages yet.
func (p *proxy) settle() {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		n := p.open
		p.mu.Unlock()
		if n == 0 {
			return
		}
	}
}

// take returns and forgets what clients sent so far.
func (p *proxy) take() []*message.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.sent
	p.sent = nil
	return out
}

// clientScenarios are the commands each transcript recorded (see
// testdata/wire/README.md). $JOB is a completed job, $LAST the output of
// the previous command, $R the R of $JOB.
var clientScenarios = []struct {
	transcript string
	commands   [][]string
}{
	{"getattr", [][]string{{"getattr", "size"}}},
	{"kvs-put", [][]string{{"kvs", "put", "test.a=42"}}},
	{"kvs-get", [][]string{{"kvs", "get", "test.a"}}},
	{"kvs-ls", [][]string{{"kvs", "ls", "test"}}},
	{"submit-py", [][]string{{"submit", "-n1", "true"}, {"job", "wait-event", "$LAST", "clean"}}},
	{"jobs", [][]string{{"jobs", "-a"}}},
	{"job-info-R", [][]string{{"job", "info", "$JOB", "R"}}},
	{"job-eventlog", [][]string{{"job", "eventlog", "$JOB"}}},
	{"attach", [][]string{{"job", "attach", "$JOB"}}},
	{"run", [][]string{{"run", "-n2", "echo", "hi"}}},
	{"resource-list", [][]string{{"resource", "list"}}},
	{"jobtap-load", [][]string{{"jobtap", "load", "alloc-bypass.so"}}},
	{"jobtap-list", [][]string{{"jobtap", "list"}, {"job", "info", "$JOB", "R"}}},
	{"alloc-bypass", [][]string{{"run", "-o", "per-resource.type=node", "--setattr=system.alloc-bypass.R=$R", "flux", "getattr", "rank"}}},
	{"cancel-pending", [][]string{{"submit", "--urgency=hold", "true"}, {"cancel", "$LAST"}, {"job", "wait-event", "$LAST", "clean"}}},
	{"event-pub", [][]string{{"event", "pub", "test.topic", `{"x":1}`}}},
	{"ping", [][]string{{"ping", "--count=1", "1"}}},
}

// optionalRequests are requests flux-core's commands make that fluxgo's
// need not: they only feed what the command prints.
var optionalRequests = map[string]map[string]string{
	"attach": {
		"job-list.list-id": "the queue name in its status line",
		// the recorded job had ended: its shell was gone (ENOSYS)
		"SHELL.stdin": "closing the stdin of a shell that may be gone",
	},
	"run": {
		"job-list.list-id": "the queue name in its status line",
		// echo ends at once: under load its job is done before the
		// command has closed stdin, which then no longer matters
		"SHELL.stdin": "closing the stdin of a job that may have ended",
	},
	"alloc-bypass": {
		"job-list.list-id": "the queue name in its status line",
		"SHELL.stdin":      "closing the stdin of a job that may have ended",
	},
	"resource-list": {"config.get": "the queue configuration"},
	"ping":          {"attr.get": "the target's hostname in its output"},
}

// shellService matches a job shell's service name in a topic.
var shellService = regexp.MustCompile(`^\d+-shell-f\w+\.`)

func normTopic(t string) string { return shellService.ReplaceAllString(t, "SHELL.") }

// TestClientRequests runs fluxgo's own commands through a proxy and
// checks they send what flux-core's commands sent: the same requests
// (topics, flags, payload shapes; a submitted J is compared as the
// jobspec it carries).
func TestClientRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an instance")
	}
	trs, err := loadTranscripts()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*transcript{}
	for _, tr := range trs {
		byName[tr.name] = tr
	}
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	p := startProxy(t, inst.URI)
	run := func(args ...string) testinstance.Result {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, inst.Bin, args...)
		cmd.Env = append(os.Environ(), "FLUX_URI="+p.uri(), "PATH="+filepath.Dir(inst.Bin)+":"+os.Getenv("PATH"))
		cmd.Dir = t.TempDir()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.Run()
		code := -1
		if cmd.ProcessState != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return testinstance.Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
	}
	vars := map[string]string{}
	for _, sc := range clientScenarios {
		t.Run(sc.transcript, func(t *testing.T) {
			tr := byName[sc.transcript]
			if tr == nil {
				t.Skipf("no transcript %s", sc.transcript)
			}
			p.take()
			var ran []string
			for _, argv := range sc.commands {
				args := make([]string, len(argv))
				for i, a := range argv {
					for k, v := range vars {
						a = strings.ReplaceAll(a, "$"+k, v)
					}
					args[i] = a
				}
				r := run(args...)
				ran = append(ran, fmt.Sprintf("flux %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr))
				if r.Code != 0 {
					t.Fatalf("flux %s: %+v", strings.Join(args, " "), r)
				}
				if out := strings.TrimSpace(r.Stdout); strings.HasPrefix(out, "ƒ") {
					vars["LAST"] = out // a job id
				}
			}
			p.settle() // the proxy has recorded the commands' last messages
			got := p.take()
			diffs := compareClient(t, tr, got)
			for _, d := range diffs {
				t.Error(d)
			}
			if len(diffs) > 0 { // what ran, and what reached the broker
				for _, l := range ran {
					t.Log(l)
				}
				for _, m := range got {
					t.Logf("sent %s matchtag %d flags %#x %s", m.Topic, m.Matchtag, m.Flags, m.JSON())
				}
			}
			if sc.transcript == "submit-py" {
				vars["JOB"] = vars["LAST"]
				vars["R"] = strings.TrimSpace(run("job", "info", vars["JOB"], "R").Stdout)
				p.take()
			}
		})
	}
}

// compareClient lists how the messages fluxgo's commands sent differ
// from the recorded ones; requests flux-core's commands did not send are
// only logged.
func compareClient(t *testing.T, tr *transcript, got []*message.Message) []string {
	want := map[string][]*message.Message{}
	var order []string
	for _, r := range tr.recs {
		if !r.fromClient() {
			continue
		}
		k := normTopic(r.msg.Topic)
		if want[k] == nil {
			order = append(order, k)
		}
		want[k] = append(want[k], r.msg)
	}
	have := map[string][]*message.Message{}
	for _, m := range got {
		k := normTopic(m.Topic)
		have[k] = append(have[k], m)
		if want[k] == nil {
			want[k] = nil // logged once below
		}
	}
	var out []string
	for _, k := range order {
		g := have[k]
		if len(g) == 0 {
			if why, ok := optionalRequests[tr.name][k]; ok {
				t.Logf("fluxgo's command does not send %s (flux-core's uses it for %s)", k, why)
				continue
			}
			out = append(out, "fluxgo's command never sends "+k)
			continue
		}
		for i, w := range want[k] {
			m := g[min(i, len(g)-1)]
			if m.Type != w.Type {
				out = append(out, k+": message type "+m.Type.String()+", want "+w.Type.String())
			}
			if m.Flags != w.Flags {
				out = append(out, k+": flags "+flagString(m.Flags)+", want "+flagString(w.Flags))
			}
			for _, d := range compareRequestPayload(w, m) {
				out = append(out, k+": payload "+d)
			}
		}
	}
	for k, g := range have {
		if len(tr.rpcsByTopic(k)) == 0 && !contains(order, k) {
			t.Logf("fluxgo's command also sends %s (%d times: %q); flux-core's did not", k, len(g), g[0].Topic)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func (tr *transcript) rpcsByTopic(topic string) []*rpc {
	var out []*rpc
	for _, c := range tr.rpcs {
		if normTopic(c.topic) == topic {
			out = append(out, c)
		}
	}
	return out
}

func flagString(f uint8) string {
	b, _ := json.Marshal(f)
	return string(b)
}

// compareRequestPayload compares request payload shapes; a J is
// unwrapped and its jobspec compared, except for the contents of maps
// whose keys are data (environment, rlimit).
func compareRequestPayload(want, got *message.Message) []string {
	wv, werr := requestValue(want)
	gv, gerr := requestValue(got)
	switch {
	case werr != nil:
		return nil
	case gerr != nil:
		return []string{gerr.Error()}
	case wv == nil || gv == nil:
		if (wv == nil) != (gv == nil) {
			return []string{"presence differs: got " + string(got.JSON()) + ", want " + string(want.JSON())}
		}
		return nil
	}
	var d shapeDiff
	d.compare("", wv, gv, false)
	return d.diffs
}

func requestValue(m *message.Message) (any, error) {
	p := m.JSON()
	if len(p) == 0 {
		return nil, nil
	}
	v, err := parseOrdered(p)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*object)
	if !ok {
		return v, nil
	}
	if J, ok := o.vals["J"].(string); ok {
		if env, err := sign.Unwrap(J); err == nil {
			if js, err := parseOrdered(env.Payload); err == nil {
				blankDataMaps(js)
				o.vals["J"] = js
			}
		}
	}
	return o, nil
}

// blankDataMaps empties the objects whose keys are data, not schema.
func blankDataMaps(v any) {
	o, ok := v.(*object)
	if !ok {
		if a, ok := v.([]any); ok {
			for _, e := range a {
				blankDataMaps(e)
			}
		}
		return
	}
	for _, k := range o.keys {
		switch k {
		case "environment", "rlimit":
			o.vals[k] = &object{vals: map[string]any{}}
		default:
			blankDataMaps(o.vals[k])
		}
	}
}
