package benchkit

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// LoadAvg is the machine's 1, 5 and 15-minute load averages as
// /proc/loadavg gives them ("?" if unknown), to print beside figures
// taken on a shared machine.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// StartWeb runs `flux web` of instance uri on a free port and returns it
// with its URL, once it prints that it listens.
func StartWeb(bin, uri string) (*exec.Cmd, string, error) {
	cmd := exec.Command(bin, "web", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "FLUX_URI="+uri)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("flux web printed %q: %v", line, err)
	}
	return cmd, u, nil
}
