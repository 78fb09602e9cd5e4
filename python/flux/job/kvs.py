"""A job's KVS directory (RFC 16: job.<dothex> in the primary namespace)."""

import errno

from flux.job.JobID import JobID
from flux.kvs import KVSDir


def job_kvs(flux_handle, jobid):
    """KVSDir of the job's directory (eventlog, jobspec, R, guest ...)."""
    return KVSDir(flux_handle, JobID(jobid).kvs)


def job_kvs_guest(flux_handle, jobid):
    """KVSDir of the job's guest data: its guest namespace while it runs,
    else the guest directory it was moved to."""
    jobid = JobID(jobid)
    ns = "job-%d" % int(jobid)
    try:
        guest = KVSDir(flux_handle, ".", namespace=ns)
        guest.keys()
        return guest
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTSUP, errno.EPERM):
            raise
    return KVSDir(flux_handle, jobid.kvs + ".guest")
