// Package bothways runs every protocol that has an in-broker fast path
// (message.Attached: kvs.commit, content.store-batch, job-manager.submit,
// job-manager.events-journal, sched.alloc, job-exec.start) both ways
// against the real modules of one instance: once from a module in the
// broker, where the Go value travels attached, and once over the local
// socket, where the broker turns it into its JSON payload. Each test
// requires the same result from both, so what production runs inside
// the broker is what a socket client sees.
package bothways
