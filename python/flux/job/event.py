"""Job eventlogs (RFC 21): watch a job's events as they are posted
(job-info.eventlog-watch, a streaming RPC ended by ENODATA when the
eventlog is complete), or wait for one event."""

import errno
import json
import time

from flux import constants as C
from flux.core.rpc import RPC

# Events of the main job eventlog (RFC 21)
MAIN_EVENTS = frozenset(
    {
        "submit",
        "validate",
        "invalidate",
        "set",
        "depend",
        "dependency-add",
        "dependency-remove",
        "priority",
        "flux-restart",
        "requeue",
        "urgency",
        "alloc",
        "prolog-start",
        "prolog-finish",
        "free",
        "start",
        "release",
        "finish",
        "epilog-start",
        "epilog-finish",
        "clean",
        "debug",
        "exception",
        "memo",
        "jobspec-update",
        "resource-update",
    }
)


class EventLogEvent:
    """One eventlog entry: name, timestamp, context (a dict)."""

    def __init__(self, event):
        if isinstance(event, (str, bytes)):
            event = json.loads(event)
        self._name = event["name"]
        self._timestamp = event["timestamp"]
        self._context = event.get("context") or {}

    @property
    def name(self):
        return self._name

    @property
    def timestamp(self):
        return self._timestamp

    @property
    def context(self):
        return self._context

    @property
    def context_string(self):
        if not self._context:
            return ""
        return json.dumps(self._context, separators=(",", ":"), ensure_ascii=False)

    def to_dict(self):
        d = {"timestamp": self._timestamp, "name": self._name}
        if self._context:
            d["context"] = self._context
        return d

    def __str__(self):
        return "{0.timestamp:<0.5f}: {0.name} {0.context}".format(self)

    def __repr__(self):
        return "EventLogEvent(%r)" % (self.to_dict(),)


class JobEventWatchFuture(RPC):
    """A job-info.eventlog-watch stream. get_event() returns the next
    EventLogEvent, or None once the eventlog is complete; cancel() ends
    the watch early."""

    def __init__(self, flux_handle, jobid, eventlog="eventlog", flags=0):
        self.jobid = int(jobid)
        self.path = eventlog
        self.needs_cancel = True
        super().__init__(
            flux_handle,
            "job-info.eventlog-watch",
            {"id": self.jobid, "path": eventlog, "flags": flags},
            flags=C.FLUX_RPC_STREAMING,
            _compact=True,
        )

    def get_event(self, autoreset=True):
        """The next event (waits for it), or None at the end of the
        eventlog. The future is reset afterwards unless autoreset=False."""
        try:
            resp = self.get()
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                self.needs_cancel = False
                return None
            raise
        event = EventLogEvent(resp["event"])
        if autoreset:
            self.reset()
        return event

    def __iter__(self):
        while True:
            event = self.get_event()
            if event is None:
                return
            yield event

    def cancel(self, stop=False):
        """Stop the watch: the service ends the stream with ENODATA."""
        if self.needs_cancel and self._handle._error is None:
            self._handle._rpc_compact(
                "job-info.eventlog-watch-cancel",
                {"matchtag": self.matchtag},
                flags=C.FLUX_RPC_NORESPONSE,
            )
        self.needs_cancel = False
        if stop:
            self.stop()


def event_watch_async(flux_handle, jobid, eventlog="eventlog"):
    """Start watching eventlog ("eventlog", or e.g. "guest.exec.eventlog")
    of job jobid; returns a JobEventWatchFuture (use get_event() directly
    or from a then() callback)."""
    return JobEventWatchFuture(flux_handle, jobid, eventlog)


def event_watch(flux_handle, jobid, eventlog="eventlog"):
    """Generator of a job's EventLogEvents, past and future, until the
    eventlog is complete. Closing the generator early cancels the watch."""
    watcher = event_watch_async(flux_handle, jobid, eventlog)
    try:
        while True:
            event = watcher.get_event()
            if event is None:
                return
            yield event
    finally:
        if watcher.needs_cancel:
            watcher.cancel()


class JobException(Exception):
    """A fatal job exception seen while waiting for an event:
    timestamp, type, note, severity."""

    def __init__(self, event):
        self.timestamp = event.timestamp
        self.type = event.context.get("type")
        self.note = event.context.get("note", "")
        self.severity = event.context.get("severity")
        super().__init__(str(self))

    def __str__(self):
        return "job.exception: type=%s: %s" % (self.type, self.note)


def event_wait(flux_handle, jobid, name, eventlog="eventlog", raiseJobException=True):
    """Wait for event `name` in a job's eventlog and return it
    (EventLogEvent). Raises JobException if a fatal exception comes first
    (unless raiseJobException=False), OSError(ENODATA) if the eventlog
    ends without it."""
    for event in event_watch(flux_handle, jobid, eventlog):
        if event.name == name:
            return event
        if (
            raiseJobException
            and event.name == "exception"
            and event.context.get("severity") == 0
        ):
            raise JobException(event)
    raise OSError(errno.ENODATA, "eventlog ended before event=%r" % name)


def wait_for(flux_handle, jobid, name="clean", eventlog="eventlog", timeout=None):
    """Like event_wait() without raising on exceptions, and with an
    optional timeout in seconds (raises OSError(ETIMEDOUT))."""
    deadline = None if timeout is None else time.monotonic() + timeout
    watcher = event_watch_async(flux_handle, jobid, eventlog)
    try:
        while True:
            if deadline is not None:
                watcher.wait_for(max(0.0, deadline - time.monotonic()))
            event = watcher.get_event()
            if event is None:
                raise OSError(errno.ENODATA, "eventlog ended before event=%r" % name)
            if event.name == name:
                return event
    finally:
        if watcher.needs_cancel:
            watcher.cancel()
