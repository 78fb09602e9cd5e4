package jobspec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"unicode/utf8"
)

// Files of a job (RFC 37 file archive entries in attributes.system.files,
// keyed by name): flux batch's script, the --conf of a nested instance,
// flux submit --add-file. The job shell writes the regular files into
// the job's FLUX_JOB_TMPDIR.

// FileEntry returns an RFC 37 regular-file entry holding data with
// permission bits perm (utf-8 text as is, anything else base64).
func FileEntry(data []byte, perm os.FileMode) map[string]any {
	e := map[string]any{"mode": int64(syscall.S_IFREG | uint32(perm.Perm())), "size": int64(len(data))}
	if utf8.Valid(data) {
		e["encoding"], e["data"] = "utf-8", string(data)
	} else {
		e["encoding"], e["data"] = "base64", base64.StdEncoding.EncodeToString(data)
	}
	return e
}

// DecodeFileEntry reads an RFC 37 regular-file entry: its data and
// permission bits (0700 when the entry has no mode). An entry with data
// and no encoding holds JSON content: the file is data's JSON encoding.
// An entry with neither is an empty file.
func DecodeFileEntry(e map[string]any) ([]byte, os.FileMode, error) {
	var mode int64 = syscall.S_IFREG | 0o700
	switch m := e["mode"].(type) {
	case int64:
		mode = m
	case float64:
		mode = int64(m)
	case int:
		mode = int64(m)
	}
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, fmt.Errorf("not a regular file (mode %#o)", mode)
	}
	enc, hasEnc := e["encoding"].(string)
	if _, ok := e["encoding"]; ok && !hasEnc {
		return nil, 0, fmt.Errorf("encoding is not a string")
	}
	raw, hasData := e["data"]
	if !hasEnc && hasData {
		// JSON content (RFC 37): the file is the JSON encoding of data
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(raw); err != nil {
			return nil, 0, err
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), os.FileMode(mode & 0o777), nil
	}
	data, ok := raw.(string)
	if hasData && !ok {
		return nil, 0, fmt.Errorf("%s data is not a string", enc)
	}
	switch enc {
	case "utf-8", "":
		return []byte(data), os.FileMode(mode & 0o777), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(data)
		return b, os.FileMode(mode & 0o777), err
	default:
		return nil, 0, fmt.Errorf("unsupported encoding %q", enc)
	}
}

// Files returns the job's file entries by name (nil if it has none).
func (js *Jobspec) Files() map[string]map[string]any {
	v, _ := js.Attribute("system.files")
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]map[string]any, len(m))
	for name, e := range m {
		if entry, ok := e.(map[string]any); ok {
			out[name] = entry
		}
	}
	return out
}

// AddFile adds (or replaces) the file entry name.
func (js *Jobspec) AddFile(name string, entry map[string]any) error {
	v, _ := js.Attribute("system.files")
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	m[name] = entry
	return js.SetAttribute("system.files", m)
}
