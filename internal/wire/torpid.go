package wire

// OverlayTorpidTopic is the event a broker publishes when one of its
// children goes torpid (silent for tbon.torpid_max) or is heard again:
// payload OverlayTorpid. The resource module on rank 0 follows it and
// withholds torpid ranks from scheduling, as flux-core does with its
// broker.torpid group.
const OverlayTorpidTopic = "overlay.torpid"

// OverlayTorpid is the payload of OverlayTorpidTopic.
type OverlayTorpid struct {
	Rank   uint32 `json:"rank"`
	Torpid bool   `json:"torpid"`
}

// JobShellFence is the request a broker sends its own job-shell module
// when it loses its parent by silence (nothing heard for tbon.timeout):
// its parent has found it lost too, or soon will, and the instance
// ends the jobs of this node as node failures (once
// job-exec.reattach-timeout has passed). The module kills the tasks of
// every job its shells hold (SIGKILL) and answers once each shell has
// taken its signal, so that nothing of a job the instance ends runs on
// here while the node is cut off, or beside a rerun. A parent that
// closed the link (restarted, killed) does not fence: its jobs outlive
// the restart. Payload JobShellFenceRequest, answer
// JobShellFenceResponse.
const JobShellFence = "job-shell.fence"

// JobShellFenceRequest says why the node fences.
type JobShellFenceRequest struct {
	Reason string `json:"reason"`
}

// JobShellFenceResponse lists the jobs whose tasks were killed.
type JobShellFenceResponse struct {
	Jobs []string `json:"jobs"`
}
