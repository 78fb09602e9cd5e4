"""JobInfo: a job as job-list reports it (RFC 43 attributes), with the
derived fields flux jobs shows (state and result names, status,
returncode, runtime, username ...)."""

import os
import pwd
import time

from flux import constants as C
from flux.job.JobID import JobID

_STATES = [
    (C.FLUX_JOB_STATE_NEW, "NEW", "N"),
    (C.FLUX_JOB_STATE_DEPEND, "DEPEND", "D"),
    (C.FLUX_JOB_STATE_PRIORITY, "PRIORITY", "P"),
    (C.FLUX_JOB_STATE_SCHED, "SCHED", "S"),
    (C.FLUX_JOB_STATE_RUN, "RUN", "R"),
    (C.FLUX_JOB_STATE_CLEANUP, "CLEANUP", "C"),
    (C.FLUX_JOB_STATE_INACTIVE, "INACTIVE", "I"),
]
_RESULTS = [
    (C.FLUX_JOB_RESULT_COMPLETED, "COMPLETED", "CD"),
    (C.FLUX_JOB_RESULT_FAILED, "FAILED", "F"),
    (C.FLUX_JOB_RESULT_CANCELED, "CANCELED", "CA"),
    (C.FLUX_JOB_RESULT_TIMEOUT, "TIMEOUT", "TO"),
]


def statetostr(state, fmt="L"):
    """Name of a job state bit ("RUN"), or its letter with fmt="S"."""
    for value, long, short in _STATES:
        if value == state:
            return short if fmt.upper().startswith("S") else long
    return "(unknown)"


def strtostate(name):
    """Job state bit of a name or letter (case-insensitive)."""
    for value, long, short in _STATES:
        if name.upper() in (long, short):
            return value
    raise ValueError("invalid job state %r" % name)


def resulttostr(result, fmt="L"):
    """Name of a job result bit ("COMPLETED"), or "CD" with fmt="S"."""
    for value, long, short in _RESULTS:
        if value == result:
            return short if fmt.upper().startswith("S") else long
    return "(unknown)"


def strtoresult(name):
    """Job result bit of a name or abbreviation (case-insensitive)."""
    for value, long, short in _RESULTS:
        if name.upper() in (long, short):
            return value
    raise ValueError("invalid job result %r" % name)


class ExceptionInfo:
    """A job's exception summary: occurred, severity, type, note."""

    def __init__(self, occurred=False, severity=None, type=None, note=None):  # pylint: disable=redefined-builtin
        self.occurred = occurred
        self.severity = severity
        self.type = type
        self.note = note

    def __bool__(self):
        return bool(self.occurred)

    def __repr__(self):
        return "ExceptionInfo(occurred=%r, severity=%r, type=%r, note=%r)" % (
            self.occurred,
            self.severity,
            self.type,
            self.note,
        )


class JobInfo:
    """A job-list entry. Raw attributes are available as attributes
    (info.ntasks, info.nodelist ...) and via to_dict()."""

    _DEFAULTS = {
        "t_submit": 0.0,
        "t_depend": 0.0,
        "t_run": 0.0,
        "t_cleanup": 0.0,
        "t_inactive": 0.0,
        "duration": 0.0,
        "expiration": 0.0,
        "name": "",
        "cwd": "",
        "queue": "",
        "project": "",
        "bank": "",
        "ntasks": "",
        "ncores": "",
        "nnodes": "",
        "nodelist": "",
        "ranks": "",
        "priority": "",
        "urgency": "",
        "userid": "",
        "waitstatus": None,
        "success": None,
        "annotations": {},
        "dependencies": [],
    }

    def __init__(self, info_dict):
        self._info = dict(info_dict)
        self.id = JobID(self._info["id"])

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        info = self.__dict__.get("_info", {})
        if name in info:
            return info[name]
        if name in self._DEFAULTS:
            return self._DEFAULTS[name]
        raise AttributeError("JobInfo has no attribute %r" % name)

    def get(self, key, default=None):
        return self._info.get(key, default)

    def to_dict(self, filtered=True):
        """The job-list attributes as a dict (id as an int)."""
        d = dict(self._info)
        d["id"] = int(self.id)
        return d

    # -- state and result --------------------------------------------------
    @property
    def state_id(self):
        return self._info.get("state", 0)

    @property
    def state(self):
        return statetostr(self.state_id) if self.state_id else ""

    @property
    def state_single(self):
        return statetostr(self.state_id, "S") if self.state_id else ""

    @property
    def result_id(self):
        return self._info.get("result", 0)

    @property
    def result(self):
        return resulttostr(self.result_id) if self.result_id else ""

    @property
    def result_abbrev(self):
        return resulttostr(self.result_id, "S") if self.result_id else ""

    @property
    def active(self):
        return bool(self.state_id & C.FLUX_JOB_STATE_ACTIVE)

    @property
    def status(self):
        """The state while active, the result once inactive."""
        if self.state_id & C.FLUX_JOB_STATE_ACTIVE or not self.result_id:
            return self.state
        return self.result

    @property
    def status_abbrev(self):
        if self.state_id & C.FLUX_JOB_STATE_ACTIVE or not self.result_id:
            return self.state_single
        return self.result_abbrev

    @property
    def returncode(self):
        """Exit code; -N if killed by signal N; -128 if canceled before it
        ran; 1 for another failure before it ran; "" while unknown."""
        ws = self._info.get("waitstatus")
        if ws is None:
            if self.result_id == C.FLUX_JOB_RESULT_CANCELED:
                return -128
            if self.result_id == C.FLUX_JOB_RESULT_FAILED:
                return 1
            return ""
        if os.WIFSIGNALED(ws):
            return -os.WTERMSIG(ws)
        return os.WEXITSTATUS(ws)

    @property
    def exception(self):
        return ExceptionInfo(
            self._info.get("exception_occurred", False),
            self._info.get("exception_severity"),
            self._info.get("exception_type"),
            self._info.get("exception_note"),
        )

    # -- derived -----------------------------------------------------------
    @property
    def runtime(self):
        """Seconds run so far (or in total once finished)."""
        t_run = self._info.get("t_run", 0.0)
        if not t_run:
            return 0.0
        t_end = self._info.get("t_cleanup") or time.time()
        return max(0.0, t_end - t_run)

    @property
    def username(self):
        uid = self._info.get("userid")
        if uid is None:
            return ""
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return str(uid)

    def __repr__(self):
        return "JobInfo(id=%s, state=%s, result=%s)" % (
            self.id.f58,
            self.state,
            self.result,
        )


def job_fields_to_attrs(fields):
    """job-list attributes needed for JobInfo fields (best effort: fields
    that are attributes, plus state/result for derived ones)."""
    attrs = set()
    for f in fields:
        if f in ("status", "status_abbrev", "returncode"):
            attrs.update(("state", "result", "waitstatus"))
        elif f in ("state_single", "state_id"):
            attrs.add("state")
        elif f in ("result_abbrev", "result_id"):
            attrs.add("result")
        elif f == "runtime":
            attrs.update(("t_run", "t_cleanup"))
        elif f == "username":
            attrs.add("userid")
        elif f.startswith("exception"):
            attrs.update(
                (
                    "exception_occurred",
                    "exception_severity",
                    "exception_type",
                    "exception_note",
                )
            )
        elif f != "id":
            attrs.add(f)
    return attrs
