package wire

import "github.com/fluxgo/fluxgo/pkg/jsonwire"

// AttachedJobspec is the jobspec text the job manager attaches to a
// sched.alloc request made inside the broker (message.Attached) instead
// of copying it into the payload: a pending job then keeps one copy of
// its jobspec, not two. It does so only for a scheduler that said
// "attached": true in its job-manager.sched-ready request (a module of
// the broker: sched-simple); any other scheduler, one connected over a
// socket above all, gets the jobspec in the payload (RFC 27). A
// scheduler reads it when the payload has no "jobspec". The job manager
// hands job-exec the jobspec of a start request the same way (RFC 32's
// job-exec.start; "attached": true in job-manager.exec-hello).
type AttachedJobspec []byte

// Payload returns the request's payload with the jobspec in its
// "jobspec" member (a message.Attachment).
func (a AttachedJobspec) Payload(partial []byte) ([]byte, error) {
	return jsonwire.WithMember(partial, "jobspec", a)
}
