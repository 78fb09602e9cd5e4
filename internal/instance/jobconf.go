package instance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fluxgo/fluxgo/internal/broker"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// JobConfFile is the name of the configuration a job carries in its
// jobspec's files (flux batch/alloc --conf), which its brokers load
// with --job-config.
const JobConfFile = "conf.json"

// JSONTable decodes a JSON object as a configuration table, its numbers
// typed as TOML's are (an integer is int64: "inactive-num-limit": 10000
// is refused as a float).
func JSONTable(b []byte) (map[string]any, error) {
	var t map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if t == nil {
		return nil, fmt.Errorf("not a JSON object: null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not a JSON object: data after the object")
	}
	broker.TypedNumbers(t)
	return t, nil
}

// jobConfig fetches the configuration the enclosing job carries
// (flux batch/alloc --conf) for a broker started with --job-config.
func (e *enclosing) jobConfig(ctx context.Context) (map[string]any, error) {
	if e == nil || e.id == 0 {
		return nil, fmt.Errorf("--job-config: this broker is not running as a job")
	}
	h, err := flux.Open(e.uri)
	if err != nil {
		return nil, fmt.Errorf("--job-config: enclosing instance: %w", err)
	}
	defer h.Close()
	var resp struct {
		Jobspec string `json:"jobspec"`
	}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": e.id, "keys": []string{"jobspec"}, "flags": 0}, &resp); err != nil {
		return nil, fmt.Errorf("--job-config: jobspec of job %s: %w", e.id.String(), err)
	}
	js, err := jobspec.Parse([]byte(resp.Jobspec))
	if err != nil {
		return nil, fmt.Errorf("--job-config: jobspec of job %s: %w", e.id.String(), err)
	}
	entry := js.Files()[JobConfFile]
	if entry == nil {
		return nil, fmt.Errorf("--job-config: job %s carries no %s", e.id.String(), JobConfFile)
	}
	data, _, err := jobspec.DecodeFileEntry(entry)
	if err != nil {
		return nil, fmt.Errorf("--job-config: %s: %w", JobConfFile, err)
	}
	t, err := JSONTable(data)
	if err != nil {
		return nil, fmt.Errorf("--job-config: %s: %w", JobConfFile, err)
	}
	return t, nil
}
