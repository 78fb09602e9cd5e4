"""2018's job request (seed 004): rpc_send("job.submit", jobreq) with
jobreq = {"nnodes": N, "ntasks": n, "walltime": seconds, "cmdline": [...]}.
Today a job is an RFC 14 jobspec submitted to job-ingest; this turns the
old request into one and answers as the old service did."""

import json
import os

from flux.job.JobID import JobID
from flux.job.Jobspec import JobspecV1
from flux.job.submit import submit

_KEYS = {"nnodes", "ntasks", "walltime", "cmdline", "ncores", "environ", "cwd"}


def submit_jobreq(flux_handle, payload):
    """Submit a 2018 job request; return {"jobid", "state", "kvs_dir"}."""
    req = json.loads(payload) if isinstance(payload, (str, bytes)) else dict(payload or {})
    if not isinstance(req, dict):
        raise ValueError("job.submit: the job request must be a JSON object")
    unknown = set(req) - _KEYS
    if unknown:
        raise ValueError(f"job.submit: unknown keys {sorted(unknown)} (known: {sorted(_KEYS)})")
    cmdline = req.get("cmdline")
    if not isinstance(cmdline, list) or not cmdline or not all(isinstance(a, str) for a in cmdline):
        raise ValueError("job.submit: cmdline must be a non-empty list of strings")
    ntasks = int(req.get("ntasks", 1))
    nnodes = req.get("nnodes")
    jobspec = JobspecV1.from_command(
        cmdline,
        num_tasks=ntasks,
        num_nodes=int(nnodes) if nnodes else None,
        duration=float(req["walltime"]) if req.get("walltime") else None,
        environment=req.get("environ") or dict(os.environ),
        cwd=req.get("cwd") or os.getcwd(),
    )
    jobid = JobID(submit(flux_handle, jobspec))
    return {"jobid": int(jobid), "state": "submitted", "kvs_dir": jobid.kvs}
