"""Resource status (resource.status) combined with the scheduler's
allocated ranks: which ranks are online, offline, excluded, drained,
draining, allocated and available, and why ranks were drained."""

import errno
from typing import NamedTuple

from flux.core.rpc import RPC
from flux.idset import IDset
from flux.resource.list import resource_list
from flux.resource.ResourceSet import ResourceSet


class DrainInfo(NamedTuple):
    """Ranks drained at the same time for the same reason."""

    ranks: IDset
    timestamp: float
    reason: str


class ResourceStatus:
    """Rank sets (IDset) by status:

    all, online, offline, exclude (by configuration), torpid, allocated
    (running one or more jobs), drained (drained, not allocated), draining
    (drained and allocated), avail (neither excluded nor drained);
    nodelist (Hostlist of all ranks), drain_info (list of DrainInfo),
    get_drain_info(rank), get_idset(*states), status["online"].
    """

    def __init__(self, rstatus=None, allocated_ranks=None):
        if rstatus is None:
            rstatus = {"R": None, "online": "", "offline": "", "exclude": "", "drain": {}}
        self.rstatus = rstatus
        self.rset = ResourceSet(rstatus.get("R"))
        self.nodelist = self.rset.nodelist
        self.allocated_ranks = IDset(allocated_ranks) if allocated_ranks is not None else IDset()
        self._recalculate()

    def _recalculate(self, include=None):
        def keep(ids):
            return ids if include is None else ids.intersect(include)

        self.all = keep(self.rset.ranks)
        self.online = keep(IDset(self.rstatus.get("online", "")))
        self.offline = keep(IDset(self.rstatus.get("offline", "")))
        self.exclude = keep(IDset(self.rstatus.get("exclude", "")))
        self.torpid = keep(IDset(self.rstatus.get("torpid", "")))
        self.allocated = keep(self.allocated_ranks)
        drained = IDset()
        self.drain_info = []
        self._drain_by_rank = {}
        for ranks, entry in (self.rstatus.get("drain") or {}).items():
            ids = keep(IDset(ranks))
            info = DrainInfo(ids, entry.get("timestamp", 0.0), entry.get("reason", ""))
            self.drain_info.append(info)
            drained.add(ids)
            for rank in ids:
                self._drain_by_rank[rank] = info
        self.draining = drained.intersect(self.allocated)
        self.drained = drained.difference(self.draining)
        self.avail = self.all.difference(self.exclude, self.drained, self.draining)

    def filter(self, include):
        """Keep only the given ranks (IDset or idset string) or hosts (RFC
        29 hostlist string)."""
        try:
            ranks = IDset(include)
        except (ValueError, TypeError):
            ranks = IDset(self.rset.host_ranks(include, ignore_nomatch=True))
        self._recalculate(ranks)

    def __getitem__(self, state):
        return getattr(self, state)

    def get_idset(self, *states):
        """The union of the rank sets of states."""
        ids = IDset()
        for state in states:
            ids.add(self[state])
        return ids

    def get_drain_info(self, rank):
        """The DrainInfo of rank, or None if it is not drained."""
        if rank not in self.all:
            raise ValueError("invalid rank %s" % rank)
        return self._drain_by_rank.get(rank)


class ResourceStatusRPC:
    """resource.status and the scheduler's resource list, asked
    together; get() returns a ResourceStatus."""

    def __init__(self, flux_handle):
        self.handle = flux_handle
        self.rpcs = [RPC(flux_handle, "resource.status", nodeid=0), resource_list(flux_handle)]
        self.rstatus = None
        self.rlist = None
        self.allocated_ranks = None

    def get_status(self):
        if self.rstatus is None:
            self.rstatus = self.rpcs[0].get()
        return self.rstatus

    def get_allocated_ranks(self):
        if self.allocated_ranks is None:
            try:
                self.rlist = self.rpcs[1].get()
                self.allocated_ranks = self.rlist.allocated.ranks
            except OSError as exc:
                # no scheduler loaded: nothing is allocated
                if exc.errno not in (errno.ENOSYS, errno.EAGAIN):
                    raise
                self.allocated_ranks = IDset()
        return self.allocated_ranks

    def get(self):
        return ResourceStatus(self.get_status(), self.get_allocated_ranks())


def resource_status(flux_handle):
    """Ask for resource status; returns a ResourceStatusRPC whose get()
    is a ResourceStatus."""
    return ResourceStatusRPC(flux_handle)
