package builtin

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/mail"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// mailbox is a FIFO the configured mail command writes each message to
// (sh -c 'cat > FIFO'), so a test reads what the plugin sent without
// sleeping: opening the FIFO waits for a writer.
type mailbox struct {
	path string
}

// newMailbox makes a mailbox and returns the [mail] command for it.
func newMailbox(t *testing.T) (*mailbox, []string) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run the mail command with")
	}
	path := filepath.Join(t.TempDir(), "mailbox")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return &mailbox{path}, []string{sh, "-c", `exec cat > "$0"`, path}
}

// session reads what the writers that open the FIFO next write, until
// they all close it.
func (mb *mailbox) session(t *testing.T) string {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		f, err := os.Open(mb.path)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		ch <- result{b, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return string(r.data)
	case <-time.After(30 * time.Second): // a deadline for a broken plugin, not a wait
		if f, err := os.OpenFile(mb.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close() // lets the reader go
		}
		t.Fatal("no mail arrived")
		return ""
	}
}

// until reads messages until each of the subjects (decoded) has
// arrived, and returns every message read.
func (mb *mailbox) until(t *testing.T, subjects ...string) []*mail.Message {
	t.Helper()
	var all []*mail.Message
	missing := map[string]bool{}
	for _, s := range subjects {
		missing[s] = true
	}
	for len(missing) > 0 {
		data := mb.session(t)
		for _, raw := range splitMessages(data) {
			m, err := mail.ReadMessage(strings.NewReader(raw))
			if err != nil {
				t.Fatalf("unreadable message %q: %v", raw, err)
			}
			all = append(all, m)
			delete(missing, decodedSubject(t, m))
		}
	}
	return all
}

// splitMessages cuts the output of concurrent writers into messages
// (each begins with its To: header).
func splitMessages(data string) []string {
	var out []string
	for _, part := range strings.Split(data, "\nTo: ") {
		if part == "" {
			continue
		}
		if !strings.HasPrefix(part, "To: ") {
			part = "To: " + part
		}
		out = append(out, part)
	}
	return out
}

func decodedSubject(t *testing.T, m *mail.Message) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("Subject %q: %v", m.Header.Get("Subject"), err)
	}
	return s
}

func loadMail(t *testing.T, conf string) (*Mail, *testHost) {
	t.Helper()
	h := newTestHost(t)
	m := &Mail{}
	if err := m.Load(h, nil); err != nil {
		t.Fatal(err)
	}
	apply, err := m.ConfigUpdate(json.RawMessage(conf))
	if err != nil {
		t.Fatal(err)
	}
	apply()
	m.timeout = 20 * time.Second // stray senders of a failing test end soon
	return m, h
}

// mailJob is a job of userid called name that asks for mail (attr nil:
// it does not), created (JobNew) in the plugin.
func newMailJob(t *testing.T, m *Mail, h *testHost, id jobid.ID, name string, attr any) *jobtap.Job {
	t.Helper()
	js := newSpec(t, "/bin/hostname", "-s")
	if name != "" {
		if err := js.SetJobName(name); err != nil {
			t.Fatal(err)
		}
	}
	if attr != nil {
		if err := js.SetAttribute("system.mail", attr); err != nil {
			t.Fatal(err)
		}
	}
	j := h.addJob(&jobtap.Job{ID: id, Userid: alice, State: jobtap.StateNew, WaitStatus: -1, Jobspec: js, TSubmit: 1.7e9})
	if err := m.Validate(j, false); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	m.JobNew(j)
	return j
}

func toRun(m *Mail, h *testHost, id jobid.ID) {
	h.rs[id] = rOf("0-1", "node[0-1]")
	m.JobState(h.setJob(id, func(j *jobtap.Job) { j.State, j.Ran = jobtap.StateRun, true }), jobtap.StateSched)
}

func toInactive(m *Mail, h *testHost, id jobid.ID, result string, ran bool, status int, exception string) {
	j := h.setJob(id, func(j *jobtap.Job) {
		j.State, j.Result, j.Ran, j.Started, j.WaitStatus, j.Exception = jobtap.StateInactive, result, ran, ran, status, exception
	})
	m.JobState(j, jobtap.StateCleanup)
}

func mailAttr(user string, events ...string) map[string]any {
	l := make([]any, len(events))
	for i, e := range events {
		l[i] = e
	}
	a := map[string]any{"events": l}
	if user != "" {
		a["user"] = user
	}
	return a
}

// TestMailHeadersAreSafe: the job name, which the user chooses, reaches
// the Subject only RFC 2047 encoded (a CR/LF in it cannot start a header
// of its own), the body only as one line; the message has exactly the
// To, From and Subject headers, To naming the one recipient.
func TestMailHeadersAreSafe(t *testing.T) {
	mb, cmd := newMailbox(t)
	conf, _ := json.Marshal(map[string]any{"mail": map[string]any{"command": cmd, "from": "flux@cluster.example"}})
	m, h := loadMail(t, string(conf))
	name := "café ☕\r\nBcc: mallory@evil.example"
	id := jobid.ID(777)
	newMailJob(t, m, h, id, name, mailAttr("alice@example.org", "begin"))
	toRun(m, h, id)
	subject := "Flux job " + id.String() + " (" + name + ") began"
	msgs := mb.until(t, subject)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	msg := msgs[0]
	if keys := sortedKeys(msg.Header); !sameStrings(keys, []string{"From", "Subject", "To"}) {
		t.Errorf("headers %v, want From, Subject and To only", keys)
	}
	if got := msg.Header.Get("To"); got != "alice@example.org" {
		t.Errorf("To %q", got)
	}
	if list, err := msg.Header.AddressList("To"); err != nil || len(list) != 1 {
		t.Errorf("To is %d addresses (%v), want one", len(list), err)
	}
	if got := msg.Header.Get("From"); got != "flux@cluster.example" {
		t.Errorf("From %q", got)
	}
	raw := msg.Header.Get("Subject")
	for _, r := range raw {
		if r < ' ' || r > '~' {
			t.Errorf("raw Subject %q has %q: want encoded ASCII", raw, r)
			break
		}
	}
	if !strings.HasPrefix(raw, "=?utf-8?q?") {
		t.Errorf("raw Subject %q is not RFC 2047 Q-encoded", raw)
	}
	body, _ := io.ReadAll(msg.Body)
	for _, line := range []string{
		"Job:       " + id.String() + " (777)",
		"Name:      café ☕  Bcc: mallory@evil.example",
		"State:     RUN",
		"Nodes:     node[0-1]",
		"Submitted: " + time.Unix(1.7e9, 0).Format(time.RFC1123),
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("body lacks %q:\n%s", line, body)
		}
	}
	if strings.Contains(string(body), "Result:") {
		t.Errorf("begin mail has a Result line:\n%s", body)
	}
}

// TestMailEndMessages: the end and fail mail say how the job ended: its
// result, exit code or signal, and its exception.
func TestMailEndMessages(t *testing.T) {
	mb, cmd := newMailbox(t)
	conf, _ := json.Marshal(map[string]any{"mail": map[string]any{"command": cmd, "from": "flux@x"}})
	m, h := loadMail(t, string(conf))
	type ending struct {
		result    string
		ran       bool
		status    int
		exception string
		what      string
	}
	endings := []ending{
		{"COMPLETED", true, 0, "", "ended: COMPLETED, exit 0"},
		{"FAILED", true, 3 << 8, "", "failed: FAILED, exit 3"},
		{"FAILED", true, int(syscall.SIGKILL), "", "failed: FAILED, killed"},
		{"TIMEOUT", true, int(syscall.SIGTERM), "timeout", "failed: TIMEOUT, terminated, timeout exception"},
		{"CANCELED", false, -1, "cancel", "failed: CANCELED, cancel exception"},
	}
	var subjects []string
	for i, e := range endings {
		id := jobid.ID(100 + i)
		newMailJob(t, m, h, id, "", mailAttr("", "end"))
		if e.ran {
			toRun(m, h, id)
		}
		toInactive(m, h, id, e.result, e.ran, e.status, e.exception)
		subjects = append(subjects, "Flux job "+id.String()+" (/bin/hostname) "+e.what)
	}
	msgs := mb.until(t, subjects...)
	if len(msgs) != len(endings) {
		t.Errorf("%d messages, want %d", len(msgs), len(endings))
	}
	for _, msg := range msgs {
		s := decodedSubject(t, msg)
		body, _ := io.ReadAll(msg.Body)
		_, detail, _ := strings.Cut(s, ": ")
		if !strings.Contains(string(body), "Result:    "+detail+"\n") || !strings.Contains(string(body), "State:     INACTIVE\n") {
			t.Errorf("%s: body\n%s", s, body)
		}
	}
}

// TestMailOnlyForRequestedEvents: begin mail at RUN, end mail at the
// end, fail mail only for a result other than COMPLETED, one message
// when end and fail both apply, none for a job that did not ask. The
// messages are sent in the background, so a wrongly sent one is seen
// when it arrives before the expected ones (as it usually does: it was
// sent first); a correct plugin passes every time.
func TestMailOnlyForRequestedEvents(t *testing.T) {
	mb, cmd := newMailbox(t)
	conf, _ := json.Marshal(map[string]any{"mail": map[string]any{"command": cmd}})
	m, h := loadMail(t, string(conf))
	// none of these may send anything
	newMailJob(t, m, h, 1, "begin-only", mailAttr("", "begin"))
	toInactive(m, h, 1, "CANCELED", false, -1, "cancel")
	newMailJob(t, m, h, 2, "fail-only", mailAttr("", "fail"))
	toRun(m, h, 2)
	toInactive(m, h, 2, "COMPLETED", true, 0, "")
	newMailJob(t, m, h, 3, "end-only", mailAttr("", "end"))
	toRun(m, h, 3)
	newMailJob(t, m, h, 4, "no-mail", nil)
	toRun(m, h, 4)
	toInactive(m, h, 4, "FAILED", true, 1<<8, "")
	// these send one message each
	newMailJob(t, m, h, 5, "end-and-fail", mailAttr("", "end", "fail"))
	toRun(m, h, 5)
	toInactive(m, h, 5, "FAILED", true, 1<<8, "")
	toInactive(m, h, 3, "COMPLETED", true, 0, "")
	want := []string{
		"Flux job " + jobid.ID(5).String() + " (end-and-fail) failed: FAILED, exit 1",
		"Flux job " + jobid.ID(3).String() + " (end-only) ended: COMPLETED, exit 0",
	}
	msgs := mb.until(t, want...)
	var got []string
	for _, msg := range msgs {
		got = append(got, decodedSubject(t, msg))
	}
	if len(got) != 2 {
		t.Errorf("mail sent: %q, want only %q", got, want)
	}
}

// TestMailRecipient: without mail.user the mail goes to the job's user
// by name (its uid if it has none).
func TestMailRecipient(t *testing.T) {
	m, h := loadMail(t, `{"mail":{"command":["true"]}}`)
	newMailJob(t, m, h, 1, "", mailAttr("", "end"))
	want := strconv.Itoa(int(alice))
	if u, err := user.LookupId(want); err == nil {
		want = u.Username
	}
	if mj, _ := h.Aux(1, "mail").(*mailJob); mj == nil || mj.to != want || mj.name != "/bin/hostname" {
		t.Errorf("mail job %+v, want to %q name /bin/hostname", mj, want)
	}
	newMailJob(t, m, h, 2, "named", mailAttr("Alice Example <alice@example.org>", "end"))
	if mj, _ := h.Aux(2, "mail").(*mailJob); mj == nil || mj.to != "Alice Example <alice@example.org>" || mj.name != "named" {
		t.Errorf("mail job %+v", mj)
	}
}

// TestMailValidate: attributes.system.mail must be {events, user} with
// known events and exactly one recipient, and mail must be configured.
func TestMailValidate(t *testing.T) {
	m, h := loadMail(t, `{"mail":{"command":"/usr/sbin/sendmail -t"}}`)
	for _, c := range []struct {
		attr any
		want string
	}{
		{mailAttr("", "begin", "end", "fail"), ""},
		{mailAttr("alice", "end"), ""},
		{mailAttr("alice.smith+flux@example.org", "end"), ""},
		{mailAttr("Alice <alice@example.org>", "end"), ""},
		{"begin", "attributes.system.mail must be an object {events, user}"},
		{map[string]any{"user": "alice"}, "attributes.system.mail.events must be a list of begin, end, fail"},
		{mailAttr(""), "attributes.system.mail.events must be a list of begin, end, fail"},
		{mailAttr("", "begin", "start"), "attributes.system.mail.events: start is not one of begin, end, fail"},
		{mailAttr("a@example.org, b@example.org", "end"), `attributes.system.mail.user="a@example.org, b@example.org": not one address (a user name or name@host)`},
		{mailAttr("a@example.org; b@example.org", "end"), `attributes.system.mail.user="a@example.org; b@example.org": not one address (a user name or name@host)`},
		{mailAttr("a@example.org\r\nBcc: b@example.org", "end"), `attributes.system.mail.user="a@example.org\r\nBcc: b@example.org": not one address (a user name or name@host)`},
		{mailAttr("team: a@example.org;", "end"), `attributes.system.mail.user="team: a@example.org;": not one address (a user name or name@host)`},
		{mailAttr("not an address", "end"), `attributes.system.mail.user="not an address": not one address (a user name or name@host)`},
		{map[string]any{"events": []any{"end"}, "user": ""}, `attributes.system.mail.user="": not one address (a user name or name@host)`},
		{map[string]any{"events": []any{"end"}, "user": 5}, `attributes.system.mail.user="5": not one address (a user name or name@host)`},
		{map[string]any{"events": []any{"end"}, "cc": "bob"}, "attributes.system.mail.cc: unknown key (events, user)"},
	} {
		js := newSpec(t)
		if err := js.SetAttribute("system.mail", c.attr); err != nil {
			t.Fatal(err)
		}
		err := m.Validate(h.addJob(&jobtap.Job{ID: 1, Jobspec: js}), false)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v refused: %v", c.attr, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%v: %v, want %q", c.attr, err, c.want)
		}
	}
	// without a [mail] command, asking for mail is refused
	off, h2 := loadMail(t, `{}`)
	js := newSpec(t)
	if err := js.SetAttribute("system.mail", mailAttr("", "end")); err != nil {
		t.Fatal(err)
	}
	want := "e-mail notification is not configured on this instance (no [mail] command)"
	if err := off.Validate(h2.addJob(&jobtap.Job{ID: 1, Jobspec: js}), false); err == nil || err.Error() != want {
		t.Errorf("unconfigured: %v, want %q", err, want)
	}
	if err := off.Validate(h2.addJob(&jobtap.Job{ID: 2, Jobspec: newSpec(t)}), false); err != nil {
		t.Errorf("job without mail, unconfigured: %v", err)
	}
}

// TestMailConfig: [mail] command is a command line or an argument list,
// never empty; from defaults to flux@HOSTNAME.
func TestMailConfig(t *testing.T) {
	m, _ := loadMail(t, `{"mail":{"command":"/usr/sbin/sendmail  -t -oi","from":"flux@cluster.example"}}`)
	if !sameStrings(m.command, []string{"/usr/sbin/sendmail", "-t", "-oi"}) || m.from != "flux@cluster.example" {
		t.Errorf("command %q from %q", m.command, m.from)
	}
	m, _ = loadMail(t, `{"mail":{"command":["/opt/mail tool/send","a b"]}}`)
	host, _ := os.Hostname()
	if !sameStrings(m.command, []string{"/opt/mail tool/send", "a b"}) || m.from != "flux@"+host {
		t.Errorf("command %q from %q", m.command, m.from)
	}
	for conf, want := range map[string]string{
		`{"mail":{"command":5}}`:    "mail.command must be a command line or an array of arguments, not 5: invalid argument",
		`{"mail":{"command":""}}`:   "mail.command is empty: invalid argument",
		`{"mail":{"command":"  "}}`: "mail.command is empty: invalid argument",
		`{"mail":{"command":[]}}`:   "mail.command is empty: invalid argument",
		`{"mail":{"command":[""]}}`: "mail.command is empty: invalid argument",
	} {
		if _, err := (&Mail{}).ConfigUpdate(json.RawMessage(conf)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
	_, err := (&Mail{}).ConfigUpdate(json.RawMessage(`{"mail":[1]}`))
	if err == nil || !strings.HasPrefix(err.Error(), "[mail]: ") || !errors.Is(err, syscall.EINVAL) {
		t.Errorf("[mail] not a table: %v", err)
	}
}

// TestMailToHeaderIsEncoded: mail.user may carry a display name, which
// the user chooses like the job name; it must reach the To header RFC
// 2047 encoded as the Subject is (net/mail's Address.String does this).
func TestMailToHeaderIsEncoded(t *testing.T) {
	mb, cmd := newMailbox(t)
	conf, _ := json.Marshal(map[string]any{"mail": map[string]any{"command": cmd, "from": "flux@x"}})
	m, h := loadMail(t, string(conf))
	newMailJob(t, m, h, 1, "j", mailAttr("Jöhn Doe <john@example.org>", "begin"))
	toRun(m, h, 1)
	msgs := mb.until(t, "Flux job "+jobid.ID(1).String()+" (j) began")
	raw := msgs[0].Header.Get("To")
	want := (&mail.Address{Name: "Jöhn Doe", Address: "john@example.org"}).String()
	if raw != want {
		t.Errorf("To %q, want %q", raw, want)
	}
}
