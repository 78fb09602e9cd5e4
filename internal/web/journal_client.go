package web

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

var _ JournalWatcher = (*Client)(nil)

// WatchJournal implements JournalWatcher with a connection of its own
// (Client.Dial): the job manager ends a journal subscription only when
// its requestor disconnects, so closing that connection is how the
// stream stops when no one watches.
func (c *Client) WatchJournal(ctx context.Context, events []string) (JournalStream, error) {
	if c.Dial == nil {
		return nil, errors.New("this server cannot open a second connection to the instance")
	}
	h, err := c.Dial()
	if err != nil {
		return nil, fmt.Errorf("connecting to the instance: %w", err)
	}
	allow := make(map[string]int, len(events))
	for _, n := range events {
		allow[n] = 1
	}
	f, err := h.RPC("job-manager.events-journal", flux.NodeidAny, map[string]any{"full": true, "allow": allow}, flux.Streaming)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &journalStream{h: h, f: f}, nil
}

type journalStream struct {
	h *flux.Handle
	f *flux.Future
}

func (s *journalStream) Next(ctx context.Context) (wire.JournalEntry, bool, error) {
	m, err := s.f.Next(ctx)
	if errors.Is(err, io.EOF) {
		return wire.JournalEntry{}, false, errors.New("the job manager ended the journal")
	}
	if err != nil {
		return wire.JournalEntry{}, false, err
	}
	e, end, err := wire.DecodeJournalEntry(m.JSON())
	if err != nil {
		return wire.JournalEntry{}, false, fmt.Errorf("events-journal response: %w", err)
	}
	return e, end, nil
}

func (s *journalStream) Close() { s.h.Close() }
