"""Job counts from job-list.job-stats: jobs per state, and totals of
inactive jobs by result (what flux jobs --stats prints)."""

from flux.core.rpc import RPC

_STATES = ("depend", "priority", "sched", "run", "cleanup", "inactive", "total")
_RESULTS = ("successful", "failed", "timeout", "canceled", "inactive_purged")


class JobStats:
    """Job statistics of an instance, or of one queue (queue=name).

    After update_sync() (or update() and the reactor): depend, priority,
    sched, run, cleanup, inactive, total (jobs per state); pending
    (depend+priority+sched), running (run+cleanup), active
    (total-inactive); successful, timeout, canceled, inactive_purged; and
    failed, which counts every unsuccessful job (failed, timed out or
    canceled), as flux jobs --stats does. Counts are -1 before the first
    update.
    """

    def __init__(self, handle, queue=None):
        self.handle = handle
        self.queue = queue
        self.callback = None
        self.cb_kwargs = {}
        for name in _STATES + _RESULTS + ("pending", "running", "active"):
            setattr(self, name, -1)

    def _query(self):
        return RPC(self.handle, "job-list.job-stats", {})

    def _apply(self, resp):
        if self.queue:
            match = [q for q in resp.get("queues") or [] if q.get("name") == self.queue]
            if not match:
                raise ValueError("no stats available for queue %s" % self.queue)
            resp = match[0]
        states = resp.get("job_states", {})
        for name in _STATES:
            setattr(self, name, states.get(name, 0))
        for name in _RESULTS:
            setattr(self, name, resp.get(name, 0))
        self.pending = self.depend + self.priority + self.sched
        self.running = self.run + self.cleanup
        self.active = self.total - self.inactive
        self.failed += self.timeout + self.canceled

    def _update_cb(self, rpc):
        self._apply(rpc.get())
        if self.callback:
            self.callback(self, **self.cb_kwargs)

    def update(self, callback=None, **kwargs):
        """Fetch the counts asynchronously: the handle's reactor must run;
        callback(self, **kwargs) is called once they are in."""
        self.callback = callback
        self.cb_kwargs = kwargs
        self._query().then(self._update_cb)

    def update_sync(self):
        """Fetch the counts now; returns self."""
        self._apply(self._query().get())
        return self

    def __repr__(self):
        return "JobStats(PD:%d R:%d CD:%d F:%d)" % (
            self.pending,
            self.running,
            self.successful,
            self.failed,
        )
