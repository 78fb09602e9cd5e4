"""Job submission: job-ingest.submit {J, urgency, flags}, J being the
jobspec signed with the "none" mechanism (RFC 39)."""

import json

from flux import constants as C
from flux import sign
from flux.core.rpc import RPC
from flux.job.JobID import JobID
from flux.job.Jobspec import Jobspec


class SubmitFuture(RPC):
    """The job-ingest.submit RPC; get_id() is the new job's JobID."""

    def get_id(self):
        return JobID(self.get()["id"])


def _jobspec_text(jobspec):
    if isinstance(jobspec, Jobspec):
        return jobspec.dumps()
    if isinstance(jobspec, bytes):
        return jobspec.decode("utf-8")
    if isinstance(jobspec, str):
        return jobspec
    if isinstance(jobspec, dict):
        return json.dumps(jobspec, ensure_ascii=False)
    raise TypeError("jobspec must be a Jobspec, a mapping or JSON text")


def submit_async(
    flux_handle,
    jobspec,
    urgency=C.FLUX_JOB_URGENCY_DEFAULT,
    waitable=False,
    debug=False,
    pre_signed=False,
    novalidate=False,
):
    """Submit jobspec (Jobspec, mapping or JSON text); returns a
    SubmitFuture. waitable=True allows flux.job.wait() on the job.
    pre_signed=True: jobspec is already a signed J."""
    if not isinstance(urgency, int) or not (
        C.FLUX_JOB_URGENCY_MIN <= urgency <= C.FLUX_JOB_URGENCY_MAX
    ):
        raise ValueError("urgency must be an integer in 0-31")
    flags = 0
    if waitable:
        flags |= C.FLUX_JOB_WAITABLE
    if debug:
        flags |= C.FLUX_JOB_DEBUG
    if novalidate:
        flags |= C.FLUX_JOB_NOVALIDATE
    if pre_signed:
        J = jobspec.decode() if isinstance(jobspec, bytes) else jobspec
    else:
        J = sign.wrap(_jobspec_text(jobspec))
    payload = {"J": J, "urgency": urgency, "flags": flags}
    return SubmitFuture(flux_handle, "job-ingest.submit", payload, _compact=True)


def submit_get_id(future):
    """The JobID of a submit_async() future."""
    return future.get_id()


def submit(
    flux_handle,
    jobspec,
    urgency=C.FLUX_JOB_URGENCY_DEFAULT,
    waitable=False,
    debug=False,
    pre_signed=False,
    novalidate=False,
):
    """Submit jobspec and return the new job's JobID."""
    return submit_async(
        flux_handle, jobspec, urgency, waitable, debug, pre_signed, novalidate
    ).get_id()
