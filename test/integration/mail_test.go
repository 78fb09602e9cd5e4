package integration

import (
	"mime"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// TestMailNotification: with a [mail] command configured, a job asking
// for mail on all events gets a "began" and a "failed" message through
// that command (a script standing in for sendmail); without one, asking
// for mail is refused at submission.
func TestMailNotification(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	dir := t.TempDir()
	box := filepath.Join(dir, "mailbox")
	sendmail := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sendmail, []byte("#!/bin/sh\n{ cat; echo '----'; } >> "+box+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "mail.toml"), []byte(`[mail]
command = ["`+sendmail+`", "-t"]
from = "flux@cluster.example.org"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1, Args: []string{"--config-path", conf}})}
	id := e.submit("--mail-type=ALL", "--mail-user=ann@example.org", "--job-name=sim", "sh", "-c", "exit 3")
	quiet := e.submit("--mail-type=fail", "true") // succeeds: no mail
	e.waitEvent(id, "clean")
	e.waitEvent(quiet, "clean")
	// a job name that tries to add a header (sendmail -t reads the
	// recipients from them), and a recipient list
	evil := e.submit("--mail-type=end", "--job-name=x\nBcc: eve@example.org", "true")
	e.waitEvent(evil, "clean")
	e.fail("not one address", "submit", "--mail-type=end", "--mail-user=ann@example.org,eve@example.org", "true")
	var text string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(box)
		if text = string(b); strings.Count(text, "----") >= 3 {
			break
		}
	}
	if strings.Contains(text, "\nBcc:") {
		t.Errorf("a job name added a header:\n%s", text)
	}
	// subjects are RFC 2047 encoded (the job id's ƒ is not ASCII)
	var dec mime.WordDecoder
	decoded := text
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "Subject: ") {
			if d, err := dec.DecodeHeader(strings.TrimPrefix(line, "Subject: ")); err == nil {
				decoded += "\nSubject: " + d
			}
		}
	}
	text = decoded
	for _, want := range []string{
		"To: ann@example.org", "From: flux@cluster.example.org",
		"Subject: Flux job " + id.String() + " (sim) began",
		"Subject: Flux job " + id.String() + " (sim) failed: FAILED, exit 3",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("mailbox lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, quiet.String()) {
		t.Errorf("a job that succeeded with --mail-type=fail was mailed:\n%s", text)
	}
	e.fail("is not begin, end, fail", "submit", "--mail-type=weekly", "true")
	// no [mail] command: refused, not silently dropped
	e2 := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 1})}
	e2.fail("e-mail notification is not configured", "submit", "--mail-type=end", "true")
}
