"""Job listings from job-list (RFC 43): job-list.list (filtered by an RFC
31 constraint) and job-list.list-id (one job, optionally waiting until it
reaches a state)."""

import errno
import os
import pwd

from flux import constants as C
from flux.core.rpc import RPC
from flux.job.info import JobInfo, strtoresult, strtostate
from flux.job.JobID import JobID

_FILTER_GROUPS = {
    "pending": C.FLUX_JOB_STATE_PENDING,
    "running": C.FLUX_JOB_STATE_RUNNING,
    "active": C.FLUX_JOB_STATE_ACTIVE,
}


class JobListRPC(RPC):
    """A job-list.list RPC (streaming: the jobs come in chunks, then
    ENODATA). get() is {"jobs": [all jobs]}; get_jobs() the list;
    get_jobinfos() the list as JobInfo objects."""

    def _all(self):
        if not hasattr(self, "_jobs"):
            jobs = []
            while True:
                try:
                    resp = RPC.get(self)
                except OSError as exc:
                    if exc.errno == errno.ENODATA:
                        break
                    raise
                if resp:
                    jobs.extend(resp.get("jobs", []))
                self.reset()
            self._jobs = jobs
        return self._jobs

    def get(self):
        if not self._streaming:
            return super().get()
        return {"jobs": self._all()}

    def get_jobs(self):
        return self.get()["jobs"]

    def get_jobinfos(self):
        return [JobInfo(job) for job in self.get_jobs()]


def _constraint(userid, states, results, name, queue):
    terms = []
    if userid is not None and userid != C.FLUX_USERID_UNKNOWN:
        terms.append({"userid": [userid]})
    if name:
        terms.append({"name": [name]})
    if queue:
        terms.append({"queue": [queue]})
    # states and results each select jobs; given both, a job matching
    # either is listed (e.g. running jobs plus completed ones)
    if states and results:
        terms.append({"or": [{"states": [states]}, {"results": [results]}]})
    elif states:
        terms.append({"states": [states]})
    elif results:
        terms.append({"results": [results]})
    if not terms:
        return None
    return {"and": terms}


def job_list(
    flux_handle,
    max_entries=1000,
    attrs=("all",),
    userid=None,
    states=0,
    results=0,
    since=0.0,
    name=None,
    queue=None,
    constraint=None,
):
    """List jobs: pending first, then running, then inactive (most recent
    first). userid defaults to the caller's (FLUX_USERID_UNKNOWN: all
    users); states/results are masks of FLUX_JOB_STATE_* /
    FLUX_JOB_RESULT_* bits (given both, jobs matching either); constraint an RFC 31 constraint overriding
    those filters. Returns a JobListRPC (get_jobs())."""
    if userid is None:
        userid = os.getuid()
    payload = {"max_entries": int(max_entries), "attrs": list(attrs), "since": float(since)}
    if constraint is None:
        constraint = _constraint(userid, states, results, name, queue)
    if constraint is not None:
        payload["constraint"] = constraint
    return JobListRPC(
        flux_handle, "job-list.list", payload, flags=C.FLUX_RPC_STREAMING
    )


def job_list_inactive(
    flux_handle, since=0.0, max_entries=1000, attrs=("all",), name=None, queue=None
):
    """List inactive jobs of all users, most recently finished first."""
    return job_list(
        flux_handle,
        max_entries=max_entries,
        attrs=attrs,
        userid=C.FLUX_USERID_UNKNOWN,
        states=C.FLUX_JOB_STATE_INACTIVE,
        since=since,
        name=name,
        queue=queue,
    )


class JobListIdRPC(RPC):
    """A job-list.list-id RPC: get_job() the job's dict, get_jobinfo()
    a JobInfo."""

    def get_job(self):
        return self.get()["job"]

    def get_jobinfo(self):
        return JobInfo(self.get_job())


def job_list_id(flux_handle, jobid, attrs=("all",), state=0):
    """One job's attributes. With state (a FLUX_JOB_STATE_* mask) the
    answer waits until the job has reached one of those states."""
    payload = {"id": int(jobid), "attrs": list(attrs)}
    if state:
        payload["state"] = state
    return JobListIdRPC(flux_handle, "job-list.list-id", payload, _compact=True)


def get_job(flux_handle, jobid):
    """The job as a dict of readable fields, or None if there is no such
    job: JobInfo(...).to_dict(filtered=False), i.e. the job-list
    attributes with state, result and status as names ("RUN",
    "COMPLETED"), username, runtime, returncode, exception and
    annotations; unset fields are "" or 0.0."""
    try:
        return job_list_id(flux_handle, jobid).get_jobinfo().to_dict(filtered=False)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


class JobList:
    """A job listing with filters, like flux jobs.

    filters: state/result names ("pending", "running", "active",
    "inactive", "completed", "failed", "canceled", "timeout", or a state
    name); a job matching any of them is listed. ids: specific job IDs
    (then the filters are ignored); user: a user name, uid, or "all". jobs() returns JobInfo objects; errors lists
    IDs that could not be fetched.
    """

    STATES = {
        "depend": C.FLUX_JOB_STATE_DEPEND,
        "priority": C.FLUX_JOB_STATE_PRIORITY,
        "sched": C.FLUX_JOB_STATE_SCHED,
        "run": C.FLUX_JOB_STATE_RUN,
        "cleanup": C.FLUX_JOB_STATE_CLEANUP,
        "inactive": C.FLUX_JOB_STATE_INACTIVE,
        "pending": C.FLUX_JOB_STATE_PENDING,
        "running": C.FLUX_JOB_STATE_RUNNING,
        "active": C.FLUX_JOB_STATE_ACTIVE,
    }
    RESULTS = {
        "completed": C.FLUX_JOB_RESULT_COMPLETED,
        "failed": C.FLUX_JOB_RESULT_FAILED,
        "canceled": C.FLUX_JOB_RESULT_CANCELED,
        "timeout": C.FLUX_JOB_RESULT_TIMEOUT,
    }

    def __init__(
        self,
        flux_handle,
        attrs=("all",),
        filters=None,
        ids=None,
        user=None,
        max_entries=1000,
        since=0.0,
        name=None,
        queue=None,
    ):
        self.handle = flux_handle
        self.attrs = list(attrs)
        self.states = 0
        self.results = 0
        self.max_entries = max_entries
        self.since = since
        self.name = name
        self.queue = queue
        self.ids = [JobID(i) for i in ids] if ids else []
        self.errors = []
        self.userid = os.getuid()
        if user is not None:
            self.set_user(user)
        for f in filters or []:
            self.add_filter(f)

    def set_user(self, user):
        if user == "all":
            self.userid = C.FLUX_USERID_UNKNOWN
        elif isinstance(user, int) or (isinstance(user, str) and user.isdigit()):
            self.userid = int(user)
        else:
            self.userid = pwd.getpwnam(user).pw_uid

    def add_filter(self, fname):
        """Add state or result filters (comma-separated names); ValueError
        for a name that is neither."""
        for f in str(fname).lower().split(","):
            f = f.strip()
            if f in self.STATES:
                self.states |= self.STATES[f]
                continue
            if f in self.RESULTS:
                self.results |= self.RESULTS[f]
                continue
            try:
                self.states |= strtostate(f)
            except ValueError:
                raise ValueError("Invalid filter specified: %s" % f) from None

    def fetch_jobs(self):
        return job_list(
            self.handle,
            max_entries=self.max_entries,
            attrs=self.attrs,
            userid=self.userid,
            states=self.states,
            results=self.results,
            since=self.since,
            name=self.name,
            queue=self.queue,
        )

    def jobs(self):
        """The matching jobs as JobInfo objects."""
        if not self.ids:
            return self.fetch_jobs().get_jobinfos()
        futures = [(i, job_list_id(self.handle, i, self.attrs)) for i in self.ids]
        out = []
        for jobid, fut in futures:
            try:
                job = fut.get_jobinfo()
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    self.errors.append("JobID %s unknown" % jobid.orig)
                else:
                    self.errors.append("rpc: %s" % exc.strerror)
                continue
            out.append(job)
        return out
