package subprocess

import (
	"encoding/base64"
	"fmt"
	"syscall"
	"unicode/utf8"
)

// This file holds the RFC 42 wire format shared by the client in this
// package and the broker's rexec module.

// Service is the broker's subprocess server (RFC 42 "rexec").
const Service = "rexec"

// Exec request flags (RFC 42 exec request "flags").
const (
	FlagStdout      = 1  // forward standard output to the client
	FlagStderr      = 2  // forward standard error to the client
	FlagChannel     = 4  // forward auxiliary channel output
	FlagWriteCredit = 8  // send add-credit responses for stdin
	FlagWaitable    = 16 // background process may be waited on
)

// Exec request local flags (RFC 42 exec request "local_flags").
const (
	LocalStdioFallthrough = 1 // inherit the server's stdin/stdout/stderr
	LocalNoSetpgrp        = 2 // do not put the process in its own group
	LocalForkExec         = 4 // fork/exec rather than posix_spawn (ignored)
)

// Response types (RFC 42 exec responses, key "type").
const (
	TypeStarted   = "started"
	TypeStopped   = "stopped"
	TypeFinished  = "finished"
	TypeOutput    = "output"
	TypeAddCredit = "add-credit"
	TypeAttached  = "attached" // first response to rexec.attach
)

// DefaultCredit is the stdin buffer space a client may borrow before the
// server's first add-credit response (RFC 42 "Input Flow Control").
const DefaultCredit = 4096

// OptStdinBufsize is the command option (Command.Opts key) that sets the
// server's stdin buffer size in bytes.
const OptStdinBufsize = "stdin_BUFSIZE"

// CommandObject is the RFC 42 command object.
type CommandObject struct {
	Cwd      string            `json:"cwd,omitempty"`
	Cmdline  []string          `json:"cmdline"`
	Env      map[string]string `json:"env"`
	Opts     map[string]string `json:"opts"`
	Channels []string          `json:"channels"`
	Label    string            `json:"label,omitempty"`
}

// ExecRequest is the payload of rexec.exec.
type ExecRequest struct {
	Cmd        CommandObject `json:"cmd"`
	Flags      int           `json:"flags"`
	LocalFlags int           `json:"local_flags,omitempty"`
}

// StartedResponse reports the pid of a process that was started.
type StartedResponse struct {
	Type string `json:"type"` // TypeStarted
	Pid  int    `json:"pid"`
}

// OutputResponse carries a chunk of output, or the end of a stream.
type OutputResponse struct {
	Type string `json:"type"` // TypeOutput
	Pid  int    `json:"pid"`
	IO   IO     `json:"io"`
}

// FinishedResponse reports the wait(2) status of a process that ended.
type FinishedResponse struct {
	Type   string `json:"type"` // TypeFinished
	Status int    `json:"status"`
}

// AddCreditResponse returns stdin buffer space to the client.
type AddCreditResponse struct {
	Type     string         `json:"type"` // TypeAddCredit
	Channels map[string]int `json:"channels"`
}

// Response is any exec response, for decoding: Type says which fields
// are set.
type Response struct {
	Type     string         `json:"type"`
	Pid      int            `json:"pid,omitempty"`
	Status   *int           `json:"status,omitempty"`
	IO       *IO            `json:"io,omitempty"`
	Channels map[string]int `json:"channels,omitempty"`
}

// WriteRequest is the payload of rexec.write (sent without a response):
// data for the stdin of the process started by the sender's exec request
// with Matchtag.
type WriteRequest struct {
	Matchtag uint32 `json:"matchtag"`
	IO       IO     `json:"io"`
}

// KillRequest is the payload of rexec.kill. With Label set, Pid is
// ignored.
type KillRequest struct {
	Pid    int    `json:"pid"`
	Signum int    `json:"signum"`
	Label  string `json:"label,omitempty"`
}

// WaitRequest is the payload of rexec.wait: the waitable background
// process to wait for, by Label or, without one, by Pid.
type WaitRequest struct {
	Pid   int    `json:"pid"`
	Label string `json:"label,omitempty"`
}

// WaitResponse is the answer to rexec.wait once the process has ended:
// its wait status and the most recent output the server kept (bounded,
// possibly incomplete).
type WaitResponse struct {
	Status int  `json:"status"`
	Output []IO `json:"output,omitempty"`
}

// AttachRequest is the payload of the streaming rexec.attach: the
// background process (by Label or Pid) and which streams to forward
// (FlagStdout, FlagStderr).
type AttachRequest struct {
	Pid   int    `json:"pid"`
	Label string `json:"label,omitempty"`
	Flags int    `json:"flags"`
}

// AttachedResponse is the first response to rexec.attach; output,
// finished and the end of the stream follow as for a streaming exec.
type AttachedResponse struct {
	Type string        `json:"type"` // TypeAttached
	Pid  int           `json:"pid"`
	Cmd  CommandObject `json:"cmd"`
}

// ListResponse is the answer to rexec.list.
type ListResponse struct {
	Rank  int        `json:"rank"`
	Procs []ProcInfo `json:"procs"`
}

// ProcInfo describes one process in a ListResponse.
type ProcInfo struct {
	Pid      int    `json:"pid"`
	Cmd      string `json:"cmd"`
	Label    string `json:"label"`
	State    string `json:"state"` // "R" running, "Z" exited
	Bg       bool   `json:"bg"`
	Waitable bool   `json:"waitable"`
	Attached bool   `json:"attached"`
}

// IO is the RFC 42 I/O object (the RFC 24 data event context).
type IO struct {
	Stream   string `json:"stream"`
	Rank     string `json:"rank"`
	Data     string `json:"data,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	EOF      bool   `json:"eof,omitempty"`
}

// EncodeIO builds an I/O object: data is sent as a UTF-8 string when it
// is valid UTF-8, base64 otherwise.
func EncodeIO(stream, rank string, data []byte, eof bool) IO {
	o := IO{Stream: stream, Rank: rank, EOF: eof}
	if len(data) == 0 {
		return o
	}
	if utf8.Valid(data) {
		o.Data = string(data)
	} else {
		o.Data = base64.StdEncoding.EncodeToString(data)
		o.Encoding = "base64"
	}
	return o
}

// Bytes returns the object's data, decoded.
func (o IO) Bytes() ([]byte, error) {
	switch o.Encoding {
	case "", "UTF-8", "utf-8":
		return []byte(o.Data), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil {
			return nil, fmt.Errorf("io object for %s: bad base64 data: %w", o.Stream, syscall.EPROTO)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("io object for %s: unknown encoding %q: %w", o.Stream, o.Encoding, syscall.EPROTO)
	}
}

// Status is a process's wait(2) status as the server reports it.
type Status int

// Exited reports whether the process exited normally.
func (s Status) Exited() bool { return syscall.WaitStatus(s).Exited() }

// ExitStatus is the exit status of a process that exited normally.
func (s Status) ExitStatus() int { return syscall.WaitStatus(s).ExitStatus() }

// Signaled reports whether a signal ended the process.
func (s Status) Signaled() bool { return syscall.WaitStatus(s).Signaled() }

// Signal is the signal that ended the process.
func (s Status) Signal() syscall.Signal { return syscall.WaitStatus(s).Signal() }

// Code is the shell-style exit code: the exit status, or 128 plus the
// signal number for a process a signal ended.
func (s Status) Code() int {
	if s.Signaled() {
		return 128 + int(s.Signal())
	}
	return s.ExitStatus()
}

// String describes the status the way a shell user reads it.
func (s Status) String() string {
	if s.Signaled() {
		return fmt.Sprintf("killed by signal %d (%v)", int(s.Signal()), s.Signal())
	}
	return fmt.Sprintf("exit code %d", s.ExitStatus())
}
