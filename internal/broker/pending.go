package broker

import (
	"fmt"
	"sync"
	"syscall"
	"time"
)

// defaultMaxUserPending is access.max-user-pending's default: the bytes
// a guest's half-received messages may hold at once, across all of the
// guest's connections (one message of the largest size the wire allows).
const defaultMaxUserPending = 1 << 30

// pendingBytes counts, per guest, what the buffers of the messages still
// arriving on the guest's connections hold, so that many connections
// each trickling a large message cannot together take more than
// access.max-user-pending (each alone is bounded by the wire's maximum
// and the stall timeout; the connections by access.max-user-connections).
type pendingBytes struct {
	b  *Broker
	mu sync.Mutex
	n  map[uint32]int64
	// warnedAt: when a refusal was last logged for a user
	warnedAt map[uint32]time.Time
}

// userBudget is one guest's share of pendingBytes (a message.Budget).
type userBudget struct {
	p   *pendingBytes
	uid uint32
}

func (u userBudget) Take(k int) error {
	p := u.p
	limit := p.b.maxUserPending.Load()
	p.mu.Lock()
	have := p.n[u.uid]
	ok := have+int64(k) <= limit
	if ok {
		if p.n == nil {
			p.n = make(map[uint32]int64)
		}
		p.n[u.uid] = have + int64(k)
	}
	warn := !ok && time.Since(p.warnedAt[u.uid]) > 10*time.Second
	if warn {
		if p.warnedAt == nil {
			p.warnedAt = make(map[uint32]time.Time)
		}
		p.warnedAt[u.uid] = time.Now()
	}
	p.mu.Unlock()
	if ok {
		return nil
	}
	err := fmt.Errorf("uid %d has %d bytes of messages still arriving, the most a user may hold is %d (access.max-user-pending): %w",
		u.uid, have, limit, syscall.ENOMEM)
	if warn {
		p.b.log.Warn("local connector: dropping a connection: " + err.Error())
	}
	return err
}

func (u userBudget) Give(k int) {
	p := u.p
	p.mu.Lock()
	if p.n[u.uid] -= int64(k); p.n[u.uid] <= 0 {
		delete(p.n, u.uid)
	}
	p.mu.Unlock()
}
