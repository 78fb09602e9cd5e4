"""Signalling and cancelling jobs: job-manager.kill and
job-manager.raise, plus job-manager.urgency."""

import signal

from flux import constants as C
from flux.core.rpc import RPC


def kill_async(flux_handle, jobid, signum=None):
    """Send signal signum (default SIGTERM) to a running job's tasks."""
    if signum is None:
        signum = signal.SIGTERM
    return RPC(
        flux_handle,
        "job-manager.kill",
        {"id": int(jobid), "signum": int(signum)},
        _compact=True,
    )


def kill(flux_handle, jobid, signum=None):
    """Send signal signum (default SIGTERM) to a running job's tasks."""
    return kill_async(flux_handle, jobid, signum).get()


def raise_async(flux_handle, jobid, type, severity=0, note=None):  # pylint: disable=redefined-builtin
    """Raise an exception of `type` on a job; severity 0 is fatal."""
    payload = {"id": int(jobid), "type": type, "severity": int(severity)}
    if note:
        payload["note"] = note
    return RPC(flux_handle, "job-manager.raise", payload, _compact=True)


def raise_job(flux_handle, jobid, type, severity=0, note=None):  # pylint: disable=redefined-builtin
    """Raise an exception of `type` on a job; severity 0 is fatal."""
    return raise_async(flux_handle, jobid, type, severity, note).get()


def cancel_async(flux_handle, jobid, reason=None):
    """Cancel a job (a fatal "cancel" exception), with an optional reason."""
    return raise_async(flux_handle, jobid, "cancel", 0, reason)


def cancel(flux_handle, jobid, reason=None):
    """Cancel a job (a fatal "cancel" exception), with an optional reason."""
    return cancel_async(flux_handle, jobid, reason).get()


def set_urgency_async(flux_handle, jobid, urgency):
    """Change a pending job's urgency (0 holds it, 31 expedites it)."""
    if not C.FLUX_JOB_URGENCY_MIN <= int(urgency) <= C.FLUX_JOB_URGENCY_MAX:
        raise ValueError("urgency must be in 0-31")
    return RPC(
        flux_handle,
        "job-manager.urgency",
        {"id": int(jobid), "urgency": int(urgency)},
        _compact=True,
    )


def set_urgency(flux_handle, jobid, urgency):
    """Change a pending job's urgency; returns the previous urgency if the
    service reports it."""
    resp = set_urgency_async(flux_handle, jobid, urgency).get()
    if isinstance(resp, dict):
        return resp.get("old_urgency")
    return None
