"""Waiting for jobs: job-manager.wait (for jobs submitted waitable=True)
and result() (any job: its job-list entry once inactive)."""

from flux import constants as C
from flux.core.rpc import RPC
from flux.job.JobID import JobID
from flux.job.list import JobListIdRPC


class JobWaitResult:
    """jobid, success (bool) and errstr of a waited-for job."""

    def __init__(self, jobid, success, errstr):
        self.jobid = JobID(jobid)
        self.success = bool(success)
        self.errstr = errstr

    def __iter__(self):
        return iter((self.jobid, self.success, self.errstr))

    def __repr__(self):
        return "JobWaitResult(jobid=%s, success=%r, errstr=%r)" % (
            self.jobid,
            self.success,
            self.errstr,
        )


class JobWaitFuture(RPC):
    """The job-manager.wait RPC; get_status() is a JobWaitResult."""

    def get_status(self):
        resp = self.get()
        return JobWaitResult(resp["id"], resp["success"], resp.get("errstr", ""))

    def get_id(self):
        return self.get_status().jobid


def wait_async(flux_handle, jobid=C.FLUX_JOBID_ANY):
    """Wait for a job submitted with waitable=True to become inactive."""
    return JobWaitFuture(
        flux_handle, "job-manager.wait", {"id": int(jobid)}, _compact=True
    )


def wait_get_status(future):
    """The JobWaitResult of a wait_async() future."""
    return future.get_status()


def wait(flux_handle, jobid=C.FLUX_JOBID_ANY):
    """Wait for a waitable job; returns a JobWaitResult."""
    return wait_async(flux_handle, jobid).get_status()


class JobResultFuture(JobListIdRPC):
    """Completes when the job is inactive: get_info() is its JobInfo,
    get_dict() the job-list attributes."""

    def get_info(self):
        return self.get_jobinfo()

    def get_dict(self):
        return self.get_job()


def result_async(flux_handle, jobid, attrs=("all",)):
    """A JobResultFuture for job jobid (no waitable flag needed)."""
    payload = {
        "id": int(jobid),
        "attrs": list(attrs),
        "state": C.FLUX_JOB_STATE_INACTIVE,
    }
    return JobResultFuture(flux_handle, "job-list.list-id", payload, _compact=True)


def result(flux_handle, jobid, flags=0, timeout=None):
    """Wait for job jobid to become inactive and return its JobInfo
    (result, returncode, runtime ...). timeout in seconds raises
    OSError(ETIMEDOUT)."""
    fut = result_async(flux_handle, jobid)
    if timeout is not None:
        fut.wait_for(timeout)
    return fut.get_info()
