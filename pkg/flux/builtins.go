package flux

import (
	"encoding/json"
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

// OverlayTraceEntry is one message summary of an overlay.trace stream
// (flux overlay trace).
type OverlayTraceEntry struct {
	Timestamp float64         `json:"timestamp"`
	Prefix    string          `json:"prefix"` // "rx" or "tx"
	Rank      uint32          `json:"rank"`   // the overlay peer
	Type      string          `json:"type"`   // request, response, event, control
	Topic     string          `json:"topic,omitempty"`
	Nodeid    *uint32         `json:"nodeid,omitempty"`
	Matchtag  *uint32         `json:"matchtag,omitempty"`
	Errnum    int             `json:"errnum,omitempty"`
	Control   *uint32         `json:"control,omitempty"` // control message type
	Size      int             `json:"payload_size"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Dropped   int             `json:"dropped,omitempty"` // entries lost before this one
}

// OverlayStatus is an overlay.status response: a broker and the state of
// each of its children in the tree (flux overlay status).
type OverlayStatus struct {
	Rank     uint32               `json:"rank"`
	Size     uint32               `json:"size"`
	Hostname string               `json:"hostname"`
	State    string               `json:"state"`
	Uptime   float64              `json:"uptime"`
	Children []OverlayChildStatus `json:"children"`
}

// OverlayChildStatus is one child of an overlay.status response.
type OverlayChildStatus struct {
	Rank     uint32  `json:"rank"`
	Status   string  `json:"status"`
	Duration float64 `json:"duration"`
	Error    string  `json:"error,omitempty"` // why a lost child was lost
	// Torpid: the child has been silent for tbon.torpid_max
	Torpid bool `json:"torpid,omitempty"`
}
