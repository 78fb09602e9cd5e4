"""The scheduler's view of resources (resource.sched-status): all, down
and allocated resource sets, from which up and free are derived."""

import errno
import os

from flux.core.rpc import RPC
from flux.idset import IDset
from flux.resource.ResourceSet import ResourceSet


class SchedResourceList:
    """The resource sets of a resource.sched-status answer.

    all, down, allocated: ResourceSet objects as the scheduler reports
    them; up (all - down) and free (up - allocated) are derived. Each set's
    .state names it. Indexing works too: rl["free"].
    """

    STATES = ("all", "down", "allocated", "up", "free")

    def __init__(self, resp):
        if not isinstance(resp, dict):
            raise TypeError("SchedResourceList needs a dict, got %s" % type(resp).__name__)
        for state in ("all", "down", "allocated"):
            rset = resp.get(state)
            if not isinstance(rset, ResourceSet):
                rset = ResourceSet(rset)
            rset.state = state
            setattr(self, state, rset)
        self._derive()

    def _derive(self):
        self.up = self.all - self.down
        self.up.state = "up"
        self.free = self.up - self.allocated
        self.free.state = "free"

    def __getitem__(self, state):
        if state not in self.STATES:
            raise KeyError("invalid resource state %r" % (state,))
        return getattr(self, state)

    def filter(self, include):
        """Keep only the given ranks (an IDset or idset string) or hosts
        (an RFC 29 hostlist string) in every set."""
        try:
            ranks = IDset(include)
        except (ValueError, TypeError):
            ranks = IDset(self.all.host_ranks(include, ignore_nomatch=True))
        for state in ("all", "down", "allocated"):
            rset = getattr(self, state).copy_ranks(ranks)
            rset.state = state
            setattr(self, state, rset)
        self._derive()


class ResourceListRPC(RPC):
    """A resource.sched-status request; get() returns a
    SchedResourceList. A broker without resource.sched-status (ENOSYS) is
    asked sched.resource-status instead, as flux-core does."""

    def __init__(self, flux_handle, topic="resource.sched-status", nodeid=0):
        super().__init__(flux_handle, topic, nodeid=nodeid)
        self._nodeid = nodeid
        self._fallback = None

    def get(self):
        if self._fallback is not None:
            return SchedResourceList(self._fallback.get())
        try:
            resp = super().get()
        except OSError as exc:
            if exc.errno != errno.ENOSYS or self.topic == "sched.resource-status":
                raise
            self._fallback = RPC(self.get_flux(), "sched.resource-status", nodeid=self._nodeid)
            return SchedResourceList(self._fallback.get())
        return SchedResourceList(resp)


def resource_list(flux_handle):
    """Ask for the scheduler's resource sets; returns a ResourceListRPC
    whose get() is a SchedResourceList. $FLUX_RESOURCE_LIST_RPC overrides
    the topic."""
    topic = os.environ.get("FLUX_RESOURCE_LIST_RPC") or "resource.sched-status"
    return ResourceListRPC(flux_handle, topic, nodeid=0)
