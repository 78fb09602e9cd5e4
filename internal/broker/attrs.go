package broker

import (
	"fmt"
	"sort"
	"sync"
	"syscall"
)

// Attribute flags as flux-core reports them in attr.get responses.
const (
	attrImmutable = 1 // fixed for the life of the broker
	attrReadOnly  = 2 // can't be set by users (but may change)
)

type attr struct {
	value string
	flags int
	get   func() string // computed attributes
	// put validates and applies a runtime change to an attribute backed
	// by a broker setting (log-level ...); such an attribute is computed
	// (get) and cannot be removed.
	put func(string) error
}

// attrTable holds broker attributes (flux getattr/setattr/lsattr).
type attrTable struct {
	mu sync.RWMutex
	m  map[string]*attr
}

func newAttrTable() *attrTable { return &attrTable{m: make(map[string]*attr)} }

func (t *attrTable) set(name, value string, flags int) {
	t.mu.Lock()
	t.m[name] = &attr{value: value, flags: flags}
	t.mu.Unlock()
}

func (t *attrTable) setFunc(name string, flags int, get func() string) {
	t.mu.Lock()
	t.m[name] = &attr{flags: flags, get: get}
	t.mu.Unlock()
}

func (t *attrTable) get(name string) (string, int, error) {
	t.mu.RLock()
	a, ok := t.m[name]
	t.mu.RUnlock()
	if !ok {
		return "", 0, fmt.Errorf("attribute %q is not set: %w", name, syscall.ENOENT)
	}
	if a.get != nil {
		return a.get(), a.flags, nil
	}
	return a.value, a.flags, nil
}

// setRuntime adds an attribute backed by a broker setting: get reads the
// setting, put validates and changes it (flux setattr).
func (t *attrTable) setRuntime(name string, get func() string, put func(string) error) {
	t.mu.Lock()
	t.m[name] = &attr{get: get, put: put}
	t.mu.Unlock()
}

// userSet changes an attribute on behalf of a client.
func (t *attrTable) userSet(name, value string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.m[name]
	if ok && a.flags&(attrImmutable|attrReadOnly) != 0 {
		return fmt.Errorf("attribute %q is read-only: %w", name, syscall.EPERM)
	}
	if ok && a.put != nil {
		return a.put(value)
	}
	if ok && a.get != nil {
		return fmt.Errorf("attribute %q is computed and read-only: %w", name, syscall.EPERM)
	}
	t.m[name] = &attr{value: value}
	return nil
}

func (t *attrTable) userRemove(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.m[name]
	if !ok {
		return fmt.Errorf("attribute %q is not set: %w", name, syscall.ENOENT)
	}
	if a.put != nil {
		return fmt.Errorf("attribute %q is a broker setting and cannot be removed: %w", name, syscall.EPERM)
	}
	if a.flags&(attrImmutable|attrReadOnly) != 0 || a.get != nil {
		return fmt.Errorf("attribute %q is read-only: %w", name, syscall.EPERM)
	}
	delete(t.m, name)
	return nil
}

func (t *attrTable) names() []string {
	t.mu.RLock()
	out := make([]string, 0, len(t.m))
	for n := range t.m {
		out = append(out, n)
	}
	t.mu.RUnlock()
	sort.Strings(out)
	return out
}
