// Package integration tests the job pipeline end to end the way users
// drive it: each test starts a real `flux start -s 4` instance (real
// broker processes, job-ingest, job-manager and its jobtap plugins,
// sched-simple, job-exec, job-list, job-info, kvs) and runs the real
// flux command against it, checking what flux-core's man pages document.
//
// Jobs use the test executor (attributes.system.exec.test.run_duration)
// unless a test needs real processes, so the suite stays fast.
package integration
