package content

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// DefaultCheckpointKey is the key the KVS checkpoints its root under.
const DefaultCheckpointKey = "kvs-primary"

// CheckpointVersion is the checkpoint format written by CheckpointPut.
// Version 0 is a bare root blobref, as very old instances stored it; the
// backing store returns it wrapped as {"version":0,"rootref":...}.
const CheckpointVersion = 1

// Checkpoint is the value stored under a checkpoint key: the KVS root
// blobref, its sequence number and when it was taken (seconds since the
// epoch).
type Checkpoint struct {
	Version   int     `json:"version"`
	Rootref   string  `json:"rootref"`
	Sequence  int     `json:"sequence"`
	Timestamp float64 `json:"timestamp"`
}

// Validate checks the fields a reader depends on.
func (c Checkpoint) Validate() error {
	if c.Version != 0 && c.Version != 1 {
		return fmt.Errorf("checkpoint version %d is not 0 or 1: %w", c.Version, syscall.EINVAL)
	}
	if err := Validate(c.Rootref); err != nil {
		return fmt.Errorf("checkpoint rootref: %w", err)
	}
	if c.Sequence < 0 {
		return fmt.Errorf("checkpoint sequence %d is negative: %w", c.Sequence, syscall.EINVAL)
	}
	return nil
}

// checkpointPut is the content.checkpoint-put request payload.
type checkpointPut struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// checkpointGet is the content.checkpoint-get request payload; the
// response is {"value": <value>}.
type checkpointGet struct {
	Key string `json:"key"`
}

type checkpointValue struct {
	Value json.RawMessage `json:"value"`
}

// CheckpointPutRaw stores value (a JSON object) under key. The request
// goes to rank 0's content service, which answers once the backing store
// has it (or, with no backing store, once rank 0 holds it in memory).
func CheckpointPutRaw(ctx context.Context, h *flux.Handle, key string, value json.RawMessage) error {
	if key == "" {
		return fmt.Errorf("checkpoint-put: empty key: %w", syscall.EINVAL)
	}
	return h.Call(ctx, "content.checkpoint-put", 0, checkpointPut{Key: key, Value: value}, nil)
}

// CheckpointGetRaw returns the JSON value stored under key (ENOENT when
// there is none).
func CheckpointGetRaw(ctx context.Context, h *flux.Handle, key string) (json.RawMessage, error) {
	var resp checkpointValue
	if err := h.Call(ctx, "content.checkpoint-get", 0, checkpointGet{Key: key}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Value) == 0 {
		return nil, fmt.Errorf("checkpoint-get %s: response has no value: %w", key, syscall.EPROTO)
	}
	return resp.Value, nil
}

// CheckpointPut stores checkpoint c under key (DefaultCheckpointKey for
// the KVS). A zero Version is written as CheckpointVersion.
func CheckpointPut(ctx context.Context, h *flux.Handle, key string, c Checkpoint) error {
	if c.Version == 0 {
		c.Version = CheckpointVersion
	}
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return CheckpointPutRaw(ctx, h, key, b)
}

// CheckpointGet returns the checkpoint stored under key.
func CheckpointGet(ctx context.Context, h *flux.Handle, key string) (Checkpoint, error) {
	raw, err := CheckpointGetRaw(ctx, h, key)
	if err != nil {
		return Checkpoint{}, err
	}
	var c Checkpoint
	if err := json.Unmarshal(raw, &c); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %v: %w", key, err, syscall.EPROTO)
	}
	if err := c.Validate(); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", key, err)
	}
	return c, nil
}
