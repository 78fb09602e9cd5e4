package flux

import (
	"fmt"
	"time"
)

// Payloads of the broker's own services that both the broker and its
// clients read: one definition for both sides.

// LogEntry is one entry of the broker's log ring buffer, as a
// log.dmesg response carries it.
type LogEntry struct {
	Seq       uint64  `json:"seq"`
	Timestamp float64 `json:"timestamp"`
	Rank      uint32  `json:"rank"`
	Severity  int     `json:"severity"`
	Name      string  `json:"name"`
	Message   string  `json:"message"`
}

// Time returns the entry's timestamp.
func (e LogEntry) Time() time.Time { return time.Unix(0, int64(e.Timestamp*1e9)) }

// Format renders the entry the way flux dmesg prints it by default.
func (e LogEntry) Format() string {
	ts := e.Time().UTC().Format("2006-01-02T15:04:05.000000Z")
	return fmt.Sprintf("%s %s.%s[%d]: %s", ts, e.Name, SeverityName(e.Severity), e.Rank, e.Message)
}

// severityNames are the syslog severities, by number (RFC 5424).
var severityNames = []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// SeverityName returns the name of a syslog severity (0-7), or its
// number.
func SeverityName(sev int) string {
	if sev >= 0 && sev < len(severityNames) {
		return severityNames[sev]
	}
	return fmt.Sprint(sev)
}

// ParseSeverity returns the number of a syslog severity name.
func ParseSeverity(s string) (int, error) {
	for i, n := range severityNames {
		if s == n {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (valid: emerg, alert, crit, err, warning, notice, info, debug)", s)
}

// ModuleInfo is one module of a module.list response.
type ModuleInfo struct {
	Name     string   `json:"name"`
	Path     string   `json:"path"`
	Idle     int      `json:"idle"`
	Status   int      `json:"status"`
	Services []string `json:"services"`
	Args     []string `json:"args"`
	Loaded   float64  `json:"loaded"`
	Rx       uint64   `json:"rx"`
	Tx       uint64   `json:"tx"`
}

// ModuleList is a module.list response.
type ModuleList struct {
	Mods      []ModuleInfo `json:"mods"`
	Available []string     `json:"available,omitempty"`
}
