"""Dynamic resources (RFC 51): a running job grows or shrinks.

From inside a job (FLUX_JOB_ID set, no jobid given) requests go to the
job shell's service, ``<userid>-shell-<jobid f58>``:

- ``<svc>.realloc`` {spec_add?, spec_sub?, R?, nowait?}
- ``<svc>.realloc-cancel`` {}
- ``<svc>.release`` {R}

With a jobid, the job's owner asks the job manager directly:
``job-manager.realloc`` {id, spec_add?, spec_sub?, R?, nowait?} and
``job-manager.realloc-cancel`` {id}.

spec_add (resources to add) and spec_sub (resources to give back) are
jobspecs: a :class:`flux.job.Jobspec`, a dict, or JSON text.
:func:`realloc_spec` builds one for a count of whole nodes or of cores.
As a dict, a jobspec for 2 whole nodes is::

    {"version": 1,
     "resources": [{"type": "node", "count": 2, "exclusive": True,
                    "with": [{"type": "slot", "count": 1, "label": "task",
                              "with": [{"type": "core", "count": 1}]}]}],
     "tasks": [{"command": ["realloc"], "slot": "task",
                "count": {"per_slot": 1}}],
     "attributes": {"system": {"duration": 0}}}

The answer (a dict) is {alloc_id, type, note?, R_delta_add?,
R_delta_sub?, R}: type is one of REALLOC_SUCCESS, REALLOC_DENY,
REALLOC_CANCEL, REALLOC_UNSUPPORTED, and R is the job's R after the
change. A SUCCESS with R_delta_sub changes nothing until the job gives
those resources back with :func:`shell_release` (R_delta_sub as R).

A request that cannot be met now waits in the scheduler's queue unless
nowait=True (then it is answered DENY); :func:`realloc_cancel`, or the
future's ``cancel()``, ends a waiting request, which is then answered
CANCEL. A requestor that disconnects cancels its waiting request.
"""

import json
import os

from flux.core.rpc import RPC
from flux.job.JobID import JobID, id_encode
from flux.job.Jobspec import Jobspec, JobspecV1

REALLOC_SUCCESS = 0
REALLOC_DENY = 1
REALLOC_CANCEL = 2
REALLOC_UNSUPPORTED = 3

# short names, as RFC 51 has them
SUCCESS = REALLOC_SUCCESS
DENY = REALLOC_DENY
CANCEL = REALLOC_CANCEL
UNSUPPORTED = REALLOC_UNSUPPORTED

_TYPE_NAMES = {
    REALLOC_SUCCESS: "success",
    REALLOC_DENY: "denied",
    REALLOC_CANCEL: "canceled",
    REALLOC_UNSUPPORTED: "not supported by the scheduler",
}


def realloc_type_name(rtype):
    """A response type as flux job realloc names it."""
    return _TYPE_NAMES.get(rtype, "response type %d" % rtype)


def shell_service(jobid=None, userid=None):
    """The job shell's service name, ``<userid>-shell-<jobid f58>``, of job
    jobid (default $FLUX_JOB_ID) run by userid (default os.getuid())."""
    jobid = _own_jobid() if jobid is None else JobID(jobid)
    if userid is None:
        userid = os.getuid()
    return "%d-shell-%s" % (int(userid), id_encode(jobid, "f58plain"))


def _own_jobid():
    env = os.environ.get("FLUX_JOB_ID")
    if not env:
        raise ValueError(
            "give a jobid (or run inside a job, where FLUX_JOB_ID names it)"
        )
    return JobID(env)


def _json_object(value, what):
    """value (a Jobspec, a dict or JSON text) as a dict."""
    if isinstance(value, Jobspec):
        return json.loads(value.dumps())
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise TypeError("%s must be a Jobspec, a dict or JSON text of an object" % what)
    return value


def realloc_spec(num_nodes=None, num_cores=None, exclusive=True):
    """A JobspecV1 for spec_add or spec_sub: num_nodes whole nodes
    (exclusive by default), or num_cores cores (one slot of one core
    each, anywhere); give one of the two."""
    if (num_nodes is None) == (num_cores is None):
        raise ValueError("give num_nodes or num_cores")
    if num_nodes is not None:
        return JobspecV1.from_command(
            ["realloc"],
            num_tasks=num_nodes,
            num_nodes=num_nodes,
            exclusive=exclusive,
            environment={},
        )
    return JobspecV1.from_command(["realloc"], num_tasks=num_cores, environment={})


class ReallocFuture(RPC):
    """A realloc request in flight: ``get()`` is the answer dict;
    ``cancel()`` asks for a waiting request to end (it is then answered
    with type REALLOC_CANCEL)."""

    def __init__(self, flux_handle, topic, payload, cancel_topic, cancel_payload):
        super().__init__(flux_handle, topic, payload, _compact=True)
        self._cancel_topic = cancel_topic
        self._cancel_payload = cancel_payload

    def cancel(self):
        """Send the cancel request; returns its future (ENOENT once the
        request is no longer waiting)."""
        return RPC(
            self.get_flux(), self._cancel_topic, self._cancel_payload, _compact=True
        )


def realloc_async(
    flux_handle, jobid=None, spec_add=None, spec_sub=None, R=None, nowait=False
):
    """Ask for more resources (spec_add) and/or offer some back (spec_sub,
    with R naming them) for job jobid, through the job manager; without
    jobid, for the job this runs in, through its shell. Returns a
    ReallocFuture."""
    if spec_add is None and spec_sub is None:
        raise ValueError("give spec_add and/or spec_sub")
    payload = {}
    if spec_add is not None:
        payload["spec_add"] = _json_object(spec_add, "spec_add")
    if spec_sub is not None:
        payload["spec_sub"] = _json_object(spec_sub, "spec_sub")
    if R is not None:
        payload["R"] = _json_object(R, "R")
    if nowait:
        payload["nowait"] = True
    if jobid is None:
        svc = shell_service()
        return ReallocFuture(
            flux_handle, svc + ".realloc", payload, svc + ".realloc-cancel", {}
        )
    payload["id"] = int(JobID(jobid))
    return ReallocFuture(
        flux_handle,
        "job-manager.realloc",
        payload,
        "job-manager.realloc-cancel",
        {"id": payload["id"]},
    )


def realloc(
    flux_handle, jobid=None, spec_add=None, spec_sub=None, R=None, nowait=False
):
    """realloc_async(...).get(): the answer dict {alloc_id, type, note?,
    R_delta_add?, R_delta_sub?, R}. DENY, CANCEL and UNSUPPORTED are
    answers, not errors; an invalid request raises OSError."""
    return realloc_async(flux_handle, jobid, spec_add, spec_sub, R, nowait).get()


def realloc_cancel_async(flux_handle, jobid=None):
    """End job jobid's waiting realloc request (job-manager.realloc-cancel
    {id}); without jobid, this job's request made through its shell
    (<svc>.realloc-cancel {}). The request itself is then answered
    CANCEL; this RPC fails with ENOENT if none is waiting."""
    if jobid is None:
        return RPC(flux_handle, shell_service() + ".realloc-cancel", {}, _compact=True)
    return RPC(
        flux_handle,
        "job-manager.realloc-cancel",
        {"id": int(JobID(jobid))},
        _compact=True,
    )


def realloc_cancel(flux_handle, jobid=None):
    """realloc_cancel_async(...).get()."""
    return realloc_cancel_async(flux_handle, jobid).get()


def shell_release_async(flux_handle, R, jobid=None):
    """Give back R (typically a SUCCESS's R_delta_sub) through the shell of
    job jobid (default $FLUX_JOB_ID): <svc>.release {R}. It is answered
    once the job's shells there have stopped and the job manager has
    been told."""
    return RPC(
        flux_handle,
        shell_service(jobid) + ".release",
        {"R": _json_object(R, "R")},
        _compact=True,
    )


def shell_release(flux_handle, R, jobid=None):
    """shell_release_async(...).get()."""
    return shell_release_async(flux_handle, R, jobid).get()
