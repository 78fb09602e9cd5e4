package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/mail"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Mail sends e-mail about a job's start and end when its submitter asked
// (seed 003: "users request email notification for job events"): flux
// submit --mail-type=begin,end,fail --mail-user=ADDR writes
// attributes.system.mail = {events: [...], user: ADDR}. The instance's
// [mail] table says how to send:
//
//	[mail]
//	command = ["/usr/sbin/sendmail", "-t"]  # reads the message on stdin
//	from = "flux@cluster.example.org"       # default: flux@HOSTNAME
//
// Without a command, jobs asking for mail are refused at submission
// rather than silently getting none. Messages go out from the job
// manager's broker (rank 0), one command per message, with a 60 s limit;
// a failure is logged (flux dmesg), never the job's problem.
type Mail struct {
	h       jobtap.Host
	log     *slog.Logger
	command []string
	from    string
	timeout time.Duration
}

// mailEvents are the --mail-type words and what they mean.
var mailEvents = map[string]bool{"begin": true, "end": true, "fail": true}

// mailJob is what Mail remembers of a job that asked for mail.
type mailJob struct {
	events   map[string]bool
	to       string
	name     string
	nodelist string
}

// Name implements jobtap.Plugin.
func (*Mail) Name() string { return ".mail" }

// Load implements jobtap.Loader.
func (m *Mail) Load(h jobtap.Host, _ json.RawMessage) error {
	m.h, m.log, m.timeout = h, h.Log(), 60*time.Second
	return nil
}

// ConfigUpdate implements jobtap.ConfigUpdater: the [mail] table.
func (m *Mail) ConfigUpdate(conf json.RawMessage) (func(), error) {
	var top struct {
		Mail *struct {
			Command json.RawMessage `json:"command"`
			From    string          `json:"from"`
		} `json:"mail"`
	}
	if len(conf) > 0 {
		if err := json.Unmarshal(conf, &top); err != nil {
			return nil, fmt.Errorf("[mail]: %v: %w", err, syscall.EINVAL)
		}
	}
	var cmd []string
	from := ""
	if t := top.Mail; t != nil {
		if len(t.Command) > 0 {
			var s string
			if json.Unmarshal(t.Command, &s) == nil {
				cmd = strings.Fields(s)
			} else if err := json.Unmarshal(t.Command, &cmd); err != nil {
				return nil, fmt.Errorf("mail.command must be a command line or an array of arguments, not %s: %w", t.Command, syscall.EINVAL)
			}
			if len(cmd) == 0 || cmd[0] == "" {
				return nil, fmt.Errorf("mail.command is empty: %w", syscall.EINVAL)
			}
		}
		from = t.From
	}
	if from == "" {
		host, _ := os.Hostname()
		from = "flux@" + host
	}
	return func() { m.command, m.from = cmd, from }, nil
}

// parseMailAttr reads attributes.system.mail.
func parseMailAttr(v any) (map[string]bool, string, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("attributes.system.mail must be an object {events, user}")
	}
	events := map[string]bool{}
	list, ok := obj["events"].([]any)
	if !ok || len(list) == 0 {
		return nil, "", fmt.Errorf("attributes.system.mail.events must be a list of begin, end, fail")
	}
	for _, e := range list {
		s, _ := e.(string)
		if !mailEvents[s] {
			return nil, "", fmt.Errorf("attributes.system.mail.events: %v is not one of begin, end, fail", e)
		}
		events[s] = true
	}
	to, _ := obj["user"].(string)
	if u, ok := obj["user"]; ok {
		if to == "" || !oneRecipient(to) {
			return nil, "", fmt.Errorf("attributes.system.mail.user=%q: not one address (a user name or name@host)", fmt.Sprint(u))
		}
	}
	for k := range obj {
		if k != "events" && k != "user" {
			return nil, "", fmt.Errorf("attributes.system.mail.%s: unknown key (events, user)", k)
		}
	}
	return events, to, nil
}

// localName reports whether s is a user name standing for a local
// mailbox: letters, digits and . _ + - (checked by hand: a package-level
// regexp is compiled by every flux process at start-up).
func localName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._+-", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// oneRecipient reports whether to names one mailbox: a local user name
// or a single RFC 5322 address (a list would let a job name recipients
// of its own choosing; sendmail -t reads them from the headers).
func oneRecipient(to string) bool {
	if localName(to) {
		return true
	}
	a, err := mail.ParseAddress(to)
	return err == nil && a.Address != "" && !strings.ContainsAny(to, "\r\n,;")
}

// headerAddress writes a recipient or sender for a header: plain ASCII
// as it is (oneRecipient let no CR, LF or list through), anything else
// as net/mail writes the address (its display name RFC 2047 encoded).
func headerAddress(s string) string {
	plain := true
	for _, c := range []byte(s) {
		plain = plain && c >= ' ' && c < 0x7f
	}
	if plain {
		return s
	}
	if a, err := mail.ParseAddress(s); err == nil {
		return a.String()
	}
	return headerText(s)
}

// headerText makes user-controlled text safe in a header: RFC 2047
// encoded (CR, LF and other control characters become =0D and the like)
// when it is not plain printable ASCII.
func headerText(s string) string { return mime.QEncoding.Encode("utf-8", s) }

// lineText makes user-controlled text one plain line of a message body.
func lineText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// Validate implements jobtap.Validator.
func (m *Mail) Validate(j *jobtap.Job, _ bool) error {
	if j.Jobspec == nil {
		return nil
	}
	v, ok := j.Jobspec.Attribute("system.mail")
	if !ok {
		return nil
	}
	if _, _, err := parseMailAttr(v); err != nil {
		return err
	}
	if len(m.command) == 0 {
		return fmt.Errorf("e-mail notification is not configured on this instance (no [mail] command)")
	}
	return nil
}

// JobNew implements jobtap.NewHook: it remembers who wants what.
func (m *Mail) JobNew(j *jobtap.Job) {
	if j.Jobspec == nil {
		return
	}
	v, ok := j.Jobspec.Attribute("system.mail")
	if !ok {
		return
	}
	events, to, err := parseMailAttr(v)
	if err != nil {
		return
	}
	if to == "" {
		to = strconv.FormatUint(uint64(j.Userid), 10)
		if u, err := user.LookupId(to); err == nil {
			to = u.Username
		}
	}
	name := ""
	if len(j.Jobspec.Tasks) > 0 && len(j.Jobspec.Tasks[0].Command) > 0 {
		name = j.Jobspec.Tasks[0].Command[0]
	}
	if v, ok := j.Jobspec.Attribute("system.job.name"); ok {
		if s, ok := v.(string); ok {
			name = s
		}
	}
	m.h.SetAux(j.ID, "mail", &mailJob{events: events, to: to, name: name})
}

// JobState implements jobtap.StateHook.
func (m *Mail) JobState(j *jobtap.Job, prev jobtap.State) {
	mj, _ := m.h.Aux(j.ID, "mail").(*mailJob)
	if mj == nil {
		return
	}
	switch {
	case j.State == jobtap.StateRun && prev != jobtap.StateRun:
		if R := m.h.R(j.ID); R != nil {
			if r, err := rset.Parse(R); err == nil {
				mj.nodelist = r.Nodelist().String()
			}
		}
		if mj.events["begin"] {
			m.send(j, mj, "began", "")
		}
	case j.State == jobtap.StateInactive:
		failed := j.Result != "COMPLETED"
		what := "ended"
		if failed {
			what = "failed"
		}
		if mj.events["end"] || failed && mj.events["fail"] {
			detail := j.Result
			if j.WaitStatus >= 0 && j.Ran {
				ws := syscall.WaitStatus(j.WaitStatus)
				if ws.Signaled() {
					detail += ", " + ws.Signal().String()
				} else {
					detail += fmt.Sprintf(", exit %d", ws.ExitStatus())
				}
			}
			if j.Exception != "" {
				detail += ", " + j.Exception + " exception"
			}
			m.send(j, mj, what, detail)
		}
	}
}

// send mails one message (in the background).
func (m *Mail) send(j *jobtap.Job, mj *mailJob, what, detail string) {
	var b strings.Builder
	subject := fmt.Sprintf("Flux job %s (%s) %s", j.ID.String(), mj.name, what)
	if detail != "" {
		subject += ": " + detail
	}
	fmt.Fprintf(&b, "To: %s\nFrom: %s\nSubject: %s\n\n", headerAddress(mj.to), headerAddress(m.from), headerText(subject))
	fmt.Fprintf(&b, "Job:       %s (%d)\nName:      %s\n", j.ID.String(), uint64(j.ID), lineText(mj.name))
	if u, err := user.LookupId(strconv.FormatUint(uint64(j.Userid), 10)); err == nil {
		fmt.Fprintf(&b, "User:      %s\n", u.Username)
	}
	fmt.Fprintf(&b, "State:     %s\n", j.State)
	if j.Result != "" {
		fmt.Fprintf(&b, "Result:    %s\n", detail)
	}
	fmt.Fprintf(&b, "Submitted: %s\n", time.Unix(int64(j.TSubmit), 0).Format(time.RFC1123))
	if mj.nodelist != "" {
		fmt.Fprintf(&b, "Nodes:     %s\n", mj.nodelist)
	}
	fmt.Fprintf(&b, "Date:      %s\n", time.Now().Format(time.RFC1123))
	cmd, timeout, log := append([]string(nil), m.command...), m.timeout, m.log
	id := j.ID.String()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
		c.Stdin = strings.NewReader(b.String())
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			log.Error("mail: sending failed", "id", id, "command", strings.Join(cmd, " "), "err", err,
				"output", strings.TrimSpace(out.String()))
		}
	}()
}
