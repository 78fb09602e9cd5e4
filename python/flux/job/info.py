"""JobInfo: a job as job-list reports it (RFC 43 attributes), with the
derived fields flux jobs shows (state and result names, status,
returncode, runtime, username ...)."""

import json
import os
import pwd
import signal
import time

from flux import constants as C
from flux.job.JobID import JobID
from flux.util import fsd

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
    """A job's exception summary: occurred, severity, type, note ("" for
    fields job-list did not report)."""

    def __init__(self, occurred="", severity="", type="", note=""):  # pylint: disable=redefined-builtin
        self.occurred = occurred
        self.severity = severity
        self.type = type
        self.note = note

    def __bool__(self):
        return bool(self.occurred)

    def to_dict(self):
        return {
            "occurred": self.occurred,
            "severity": self.severity,
            "type": self.type,
            "note": self.note,
        }

    def __repr__(self):
        return "ExceptionInfo(occurred=%r, severity=%r, type=%r, note=%r)" % (
            self.occurred,
            self.severity,
            self.type,
            self.note,
        )


class _Empty:
    """What a missing annotation reads as: "" in strings and formats, and
    itself for any further attribute."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __str__(self):
        return ""

    __repr__ = __str__

    def __format__(self, spec):
        return format("", spec.rstrip("bcdoxXeEfFgGn%"))

    def __bool__(self):
        return False

    def __eq__(self, other):
        return other == "" or isinstance(other, _Empty)

    __hash__ = None


class AnnotationsInfo:
    """Job annotations with attribute access (info.annotations.sched.
    reason_pending); a missing key reads as an empty value. str() is the
    JSON of the annotations ("" when there are none)."""

    def __init__(self, annotations):
        self.annotationsDict = dict(annotations or {})

    def __getattr__(self, name):
        if name.startswith("__") or name == "annotationsDict":
            raise AttributeError(name)
        try:
            value = self.annotationsDict[name]
        except KeyError:
            return _Empty()
        if isinstance(value, dict):
            return AnnotationsInfo(value)
        return value

    def __str__(self):
        return json.dumps(self.annotationsDict) if self.annotationsDict else ""

    __repr__ = __str__

    def __format__(self, spec):
        return format(str(self), spec)

    def __bool__(self):
        return bool(self.annotationsDict)


class JobInfo:
    """A job as job-list reports it. Each job-list attribute is an
    attribute (info.ntasks, info.nodelist ...; "" or 0.0 when job-list
    did not report it), plus the derived fields flux jobs shows: state and
    result names, status, returncode, runtime, username, t_remaining,
    exception (ExceptionInfo), annotations/sched/user (attribute access),
    uri, contextual_info, contextual_time, inactive_reason. state_id and
    result_id are the raw bits. to_dict() gives them as a dict."""

    _DEFAULTS = {
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
        "priority": "",
        "ranks": "",
        "nodelist": "",
        "success": "",
        "result": "",
        "waitstatus": "",
    }
    # fields to_dict() adds to the _DEFAULTS keys
    _DICT_FIELDS = (
        "id",
        "t_submit",
        "t_remaining",
        "state",
        "result",
        "username",
        "userid",
        "urgency",
        "runtime",
        "status",
        "returncode",
        "dependencies",
    )

    def __init__(self, info_dict):
        self._info = dict(info_dict)
        if "id" not in self._info:
            raise ValueError("JobInfo: job-list entry has no 'id'")
        self.id = JobID(self._info["id"])
        self.annotations = AnnotationsInfo(self._info.get("annotations"))
        self.dependencies = list(self._info.get("dependencies") or [])

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        info = self.__dict__.get("_info", {})
        if name in info:
            return info[name]
        if name in self._DEFAULTS:
            return self._DEFAULTS[name]
        raise AttributeError("invalid JobInfo attribute '%s'" % name)

    def get(self, key, default=None):
        """The raw job-list attribute key."""
        return self._info.get(key, default)

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
        return self._info.get("result", "")

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
        """The state name while active, the result name once inactive."""
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
        if not isinstance(ws, int):
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
            self._info.get("exception_occurred", ""),
            self._info.get("exception_severity", ""),
            self._info.get("exception_type", ""),
            self._info.get("exception_note", ""),
        )

    # -- derived -----------------------------------------------------------
    @property
    def runtime(self):
        """Seconds run so far (or in total once finished); 0.0 if it
        never ran."""
        t_run = self._info.get("t_run", 0.0)
        if not t_run:
            return 0.0
        t_end = self._info.get("t_cleanup") or time.time()
        return max(0.0, t_end - t_run)

    @property
    def t_remaining(self):
        """Seconds until the running job's expiration (0.0 otherwise)."""
        expiration = self._info.get("expiration", 0.0)
        if self.state_id != C.FLUX_JOB_STATE_RUN or not expiration:
            return 0.0
        return max(0.0, expiration - time.time())

    @property
    def username(self):
        uid = self._info.get("userid")
        if uid is None:
            return ""
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return str(uid)

    @property
    def sched(self):
        return self.annotations.sched

    @property
    def user(self):
        return self.annotations.user

    @property
    def uri(self):
        """The URI of a job that is a Flux instance (annotations.user.uri),
        or None."""
        uri = self.annotations.user.uri
        return str(uri) if uri else None

    @property
    def contextual_info(self):
        """What flux jobs shows as INFO: priority-wait, depends:..., eta
        or held while pending; the nodelist once it has resources."""
        state = self.state
        if state == "PRIORITY":
            return "priority-wait"
        if state == "DEPEND":
            return "depends:" + ",".join(self.dependencies)
        if state == "SCHED":
            t_estimate = self.annotations.sched.t_estimate
            if isinstance(t_estimate, (int, float)):
                eta = t_estimate - time.time()
                return "eta:" + ("now" if eta < 0 else fsd(eta))
            if self._info.get("urgency") == 0:
                return "held"
            if self._info.get("priority") == 0:
                return "priority-hold"
            return ""
        return self.nodelist

    @property
    def contextual_time(self):
        """The requested duration while pending, the runtime after."""
        if self.state in ("DEPEND", "PRIORITY", "SCHED"):
            return self.duration
        return self.runtime

    @property
    def inactive_reason(self):
        """Why an inactive job ended ("Exit 1", "Canceled: note",
        "Timeout", a signal name ...); "" while active."""
        if self.state != "INACTIVE":
            return ""
        result = self.result
        exc = self.exception
        if result == "CANCELED":
            if exc.occurred and exc.type == "cancel" and exc.note:
                return "Canceled: %s" % exc.note
            return "Canceled"
        if result == "TIMEOUT":
            return "Timeout"
        if result == "FAILED":
            if exc.occurred and exc.type != "exec" and exc.severity == 0:
                text = "Exception: type=%s" % exc.type
                if exc.note:
                    text += " note=%s" % exc.note
                return text
            code = self.returncode
            if isinstance(code, int) and code > 128:
                try:
                    return signal.strsignal(code - 128) or "Signaled %d" % (code - 128)
                except ValueError:
                    return "Signaled %d" % (code - 128)
            if code == 126:
                return "Command invoked cannot execute"
            if code == 127:
                return "command not found"
            if code == 128:
                return "Invalid argument to exit"
        return "Exit %s" % self.returncode

    def to_dict(self, filtered=True):
        """The job as a dict of readable fields: the job-list attributes
        with state, result and status as names, plus username, runtime,
        returncode, t_remaining, dependencies, annotations (dict) and
        exception (dict); uri for a job that is a Flux instance.

        filtered=True (the default) drops unset fields: empty strings,
        zero timestamps (t_*), a zero runtime or expiration, and the
        exception details when none occurred."""
        out = {}
        for key in list(self._DEFAULTS) + list(self._DICT_FIELDS):
            try:
                value = getattr(self, key)
            except AttributeError:
                continue
            if value is not None:
                out[key] = value
        out["annotations"] = dict(self.annotations.annotationsDict)
        out["exception"] = self.exception.to_dict()
        uri = self.uri
        if uri is not None:
            out["uri"] = uri
        if not filtered:
            return out
        for key in list(out):
            value = out[key]
            if isinstance(value, str) and value == "":
                del out[key]
            elif (key.startswith("t_") or key in ("runtime", "expiration")) and value == 0:
                del out[key]
        if not out["exception"]["occurred"]:
            out["exception"] = {"occurred": False}
        if uri is not None:
            user = dict(out["annotations"].get("user") or {})
            user.pop("uri", None)
            if user:
                out["annotations"]["user"] = user
            else:
                out["annotations"].pop("user", None)
        return out

    def __repr__(self):
        return "JobInfo(id=%s, state=%s, result=%s)" % (
            self.id.f58,
            self.state,
            self.result,
        )


def job_fields_to_attrs(fields):
    """job-list attributes needed for JobInfo fields (format field names
    as flux jobs uses them: "status", "exception.type", "sched.t_estimate",
    "id.f58" ...)."""
    derived = {
        "status": ("state", "result"),
        "status_abbrev": ("state", "result"),
        "returncode": ("waitstatus", "result"),
        "state_single": ("state",),
        "state_id": ("state",),
        "result_abbrev": ("result",),
        "result_id": ("result",),
        "runtime": ("t_run", "t_cleanup"),
        "username": ("userid",),
        "t_remaining": ("expiration", "state", "result"),
        "expiration": ("expiration", "state", "result"),
        "contextual_info": (
            "state",
            "dependencies",
            "annotations",
            "nodelist",
            "priority",
            "urgency",
        ),
        "contextual_time": ("state", "t_run", "t_cleanup", "duration"),
        "inactive_reason": (
            "state",
            "result",
            "waitstatus",
            "exception_occurred",
            "exception_severity",
            "exception_type",
            "exception_note",
        ),
    }
    attrs = set()
    for f in fields:
        if f == "id" or f.startswith("id."):
            continue
        if f in derived:
            attrs.update(derived[f])
        elif f.split(".")[0] in ("annotations", "sched", "user", "uri"):
            attrs.add("annotations")
        elif f.startswith("exception"):
            attrs.update(
                (
                    "exception_occurred",
                    "exception_severity",
                    "exception_type",
                    "exception_note",
                )
            )
        else:
            attrs.add(f)
    return attrs
