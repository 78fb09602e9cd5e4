"""ResourceSet: an RFC 20 (R version 1) resource set, kept per broker rank
as the ids of its cores, gpus and other children, its hostname and its
properties, with the set algebra flux resource list and the scheduler use.

    rs = ResourceSet(R)            # R as a JSON string or decoded dict
    rs.nnodes, rs.ncores, rs.ngpus # counts
    rs.ranks, rs.nodelist          # IDset, Hostlist
    rs.rlist                       # "rank[0-1]/core[0-3],gpu0"
    (rs - other).encode()          # R JSON of the difference
"""

import json
from collections import abc

from flux.hostlist import Hostlist
from flux.idset import IDSET_FLAG_BRACKETS, IDSET_FLAG_RANGE, IDset


def _idset(value, what):
    try:
        return IDset(value)
    except (ValueError, TypeError) as exc:
        raise ValueError("R: invalid idset %r in %s: %s" % (value, what, exc)) from None


class _Node:
    """One rank: its hostname (or None) and children {name: IDset}."""

    __slots__ = ("hostname", "children")

    def __init__(self, hostname=None, children=None):
        self.hostname = hostname
        self.children = children if children is not None else {}

    def copy(self):
        return _Node(self.hostname, {k: v.copy() for k, v in self.children.items()})

    def empty(self):
        return not any(len(ids) for ids in self.children.values())

    def key(self):
        """The children as a hashable value (to group equal ranks)."""
        return tuple(
            (name, str(ids)) for name, ids in sorted(self.children.items()) if len(ids)
        )


class ResourceSet:
    """A set of resources in R version 1 form.

    ResourceSet(arg=None, version=1): arg is R as a JSON string, a decoded
    mapping (which must carry "version"), another ResourceSet, or None for
    an empty set. Raises ValueError for an R that is not version 1 or is
    malformed, TypeError for an argument of another type, KeyError for a
    mapping without "version".
    """

    def __init__(self, arg=None, version=1):
        self._state = None
        self._nodes = {}  # rank -> _Node
        self._props = {}  # property name -> IDset of ranks
        self.starttime = 0.0
        self.expiration = 0.0
        self._scheduling = None
        if isinstance(arg, ResourceSet):
            self._copy_from(arg)
            return
        if isinstance(arg, (bytes, bytearray)):
            arg = arg.decode()
        if isinstance(arg, str):
            arg = json.loads(arg)
        if isinstance(arg, abc.Mapping):
            version = arg["version"]
        elif arg is not None:
            raise TypeError("ResourceSet cannot be instantiated from %s" % type(arg))
        if version != 1:
            raise ValueError("R version %s not supported" % (version,))
        self.version = 1
        if arg is not None:
            self._parse(arg)

    # -- construction ------------------------------------------------------
    def _copy_from(self, other):
        self.version = other.version
        self._state = other._state
        self._nodes = {r: n.copy() for r, n in other._nodes.items()}
        self._props = {k: v.copy() for k, v in other._props.items()}
        self.starttime = other.starttime
        self.expiration = other.expiration
        self._scheduling = other._scheduling

    def _parse(self, R):
        execution = R.get("execution")
        if execution is None:
            raise ValueError("R: missing 'execution' object")
        if not isinstance(execution, abc.Mapping):
            raise ValueError("R: 'execution' is not an object")
        entries = execution.get("R_lite", [])
        if not isinstance(entries, list):
            raise ValueError("R: 'R_lite' is not an array")
        for i, entry in enumerate(entries):
            if not isinstance(entry, abc.Mapping) or "rank" not in entry:
                raise ValueError("R: R_lite[%d] has no 'rank'" % i)
            children = entry.get("children")
            if not isinstance(children, abc.Mapping):
                raise ValueError("R: R_lite[%d] has no 'children' object" % i)
            kids = {
                name: _idset(ids, "R_lite[%d].children.%s" % (i, name))
                for name, ids in children.items()
            }
            for rank in _idset(entry["rank"], "R_lite[%d].rank" % i):
                if rank in self._nodes:
                    raise ValueError("R: rank %d appears twice in R_lite" % rank)
                self._nodes[rank] = _Node(None, {k: v.copy() for k, v in kids.items()})
        nodelist = execution.get("nodelist")
        if nodelist:
            try:
                hosts = Hostlist(nodelist)
            except (ValueError, TypeError) as exc:
                raise ValueError("R: invalid nodelist %r: %s" % (nodelist, exc)) from None
            if len(hosts) != len(self._nodes):
                raise ValueError(
                    "R: nodelist has %d hosts but R_lite has %d ranks"
                    % (len(hosts), len(self._nodes))
                )
            for rank, host in zip(sorted(self._nodes), hosts):
                self._nodes[rank].hostname = host
        props = execution.get("properties") or {}
        if not isinstance(props, abc.Mapping):
            raise ValueError("R: 'properties' is not an object")
        for name, ranks in props.items():
            ids = _idset(ranks, "properties.%s" % name)
            unknown = ids.difference(self.ranks)
            if len(unknown):
                raise ValueError(
                    "R: property %s names ranks %s not in R_lite" % (name, unknown)
                )
            self._props[name] = ids
        self.starttime = float(execution.get("starttime", 0.0) or 0.0)
        self.expiration = float(execution.get("expiration", 0.0) or 0.0)
        self._scheduling = R.get("scheduling")

    # -- representations -----------------------------------------------------
    def _groups(self):
        """(ranks IDset, node) per distinct set of children, ordered by
        lowest rank."""
        groups = {}
        for rank in sorted(self._nodes):
            node = self._nodes[rank]
            key = node.key()
            if key not in groups:
                groups[key] = (IDset(), node)
            groups[key][0].set(rank)
        return list(groups.values())

    def dumps(self):
        """The short form: "rank[0-1]/core[0-3],gpu0 rank2/core[0-1]"."""
        out = []
        brackets = IDSET_FLAG_BRACKETS | IDSET_FLAG_RANGE
        for ranks, node in self._groups():
            parts = []
            for name in ("core", "gpu"):
                ids = node.children.get(name)
                if ids is not None and len(ids):
                    parts.append(name + ids.encode(brackets))
            for name in sorted(node.children):
                ids = node.children[name]
                if name not in ("core", "gpu") and len(ids):
                    parts.append(name + ids.encode(brackets))
            text = "rank" + ranks.encode(brackets)
            if parts:
                text += "/" + ",".join(parts)
            out.append(text)
        return " ".join(out)

    def to_dict(self):
        """R as a dict (version 1)."""
        lite = []
        for ranks, node in self._groups():
            children = {}
            for name in ["core", "gpu"] + sorted(node.children):
                ids = node.children.get(name)
                if name in children or ids is None:
                    continue
                if name == "core" or len(ids):
                    children[name] = str(ids)
            children.setdefault("core", "")
            lite.append({"rank": str(ranks), "children": children})
        execution = {
            "R_lite": lite,
            "starttime": self.starttime,
            "expiration": self.expiration,
        }
        hosts = [self._nodes[r].hostname for r in sorted(self._nodes)]
        if hosts and all(h is not None for h in hosts):
            execution["nodelist"] = [Hostlist(hosts).encode()]
        if self._props:
            execution["properties"] = {
                name: str(self._props[name]) for name in sorted(self._props)
            }
        R = {"version": 1, "execution": execution}
        if self._scheduling is not None:
            R["scheduling"] = self._scheduling
        return R

    def encode(self):
        """R as a compact JSON string."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def __str__(self):
        return self.dumps()

    def __repr__(self):
        return "ResourceSet(%r)" % self.dumps()

    def __eq__(self, other):
        if not isinstance(other, ResourceSet):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None

    # -- properties of the set ------------------------------------------------
    @property
    def state(self):
        """An optional label for the set ("up", "free" ...)."""
        return self._state

    @state.setter
    def state(self, value):
        self._state = value

    @property
    def ranks(self):
        """The ranks, as an IDset."""
        ids = IDset()
        for rank in self._nodes:
            ids.set(rank)
        return ids

    @property
    def nodelist(self):
        """The hostnames in rank order, as a Hostlist (ranks without a
        hostname are left out)."""
        return Hostlist(
            [self._nodes[r].hostname for r in sorted(self._nodes) if self._nodes[r].hostname]
        )

    @property
    def nnodes(self):
        return len(self._nodes)

    @property
    def ncores(self):
        return self.count("core")

    @property
    def ngpus(self):
        return self.count("gpu")

    @property
    def rlist(self):
        return self.dumps()

    @property
    def properties(self):
        """The property names, comma separated."""
        return ",".join(sorted(self._props))

    def count(self, name):
        """How many resources of type name ("core", "gpu", "node")."""
        if name == "node":
            return self.nnodes
        return sum(len(n.children.get(name, ())) for n in self._nodes.values())

    def get_properties(self):
        """The RFC 20 properties object as a JSON string {name: ranks}."""
        return json.dumps({name: str(self._props[name]) for name in sorted(self._props)})

    def set_property(self, name, ranks=None):
        """Give ranks (default: all) property name; returns self."""
        if not isinstance(name, str) or not name or any(c in name for c in "^&|!,"):
            raise ValueError("invalid property name %r" % (name,))
        ids = self.ranks if ranks is None else IDset(ranks)
        unknown = ids.difference(self.ranks)
        if len(unknown):
            raise ValueError("set_property: ranks %s not in the resource set" % unknown)
        self._props.setdefault(name, IDset()).add(ids)
        return self

    # -- algebra ---------------------------------------------------------------
    def copy(self):
        return ResourceSet(self)

    def _coerce(self, arg):
        if isinstance(arg, ResourceSet):
            return arg
        return ResourceSet(arg, version=self.version)

    def _keep_props(self):
        ranks = self.ranks
        props = {}
        for name, ids in self._props.items():
            ids = ids.intersect(ranks)
            if len(ids):
                props[name] = ids
        self._props = props

    def _merge(self, other, check_dup):
        for rank, node in other._nodes.items():
            mine = self._nodes.get(rank)
            if mine is None:
                self._nodes[rank] = node.copy()
                continue
            if mine.hostname is None:
                mine.hostname = node.hostname
            for name, ids in node.children.items():
                have = mine.children.get(name)
                if have is None:
                    mine.children[name] = ids.copy()
                    continue
                if check_dup:
                    dup = have.intersect(ids)
                    if len(dup):
                        raise ValueError(
                            "rank %d: %s %s already in the resource set" % (rank, name, dup)
                        )
                have.add(ids)
        for name, ids in other._props.items():
            self._props.setdefault(name, IDset()).add(ids)

    def append(self, *args):
        """Add resources in place; ValueError if any is already present."""
        for arg in args:
            self._merge(self._coerce(arg), check_dup=True)
        return self

    def add(self, *args):
        """Add the resources not already present, in place."""
        for arg in args:
            self._merge(self._coerce(arg), check_dup=False)
        return self

    def union(self, *args):
        """A new set with the resources of this set and of all args."""
        return self.copy().add(*args)

    def diff(self, *args):
        """A new set with the resources of this set not in any of args;
        ranks left without resources are dropped."""
        result = self.copy()
        for arg in args:
            other = self._coerce(arg)
            for rank, node in other._nodes.items():
                mine = result._nodes.get(rank)
                if mine is None:
                    continue
                for name, ids in node.children.items():
                    if name in mine.children:
                        mine.children[name] = mine.children[name].difference(ids)
                if mine.empty():
                    del result._nodes[rank]
        result._keep_props()
        return result

    def intersect(self, *args):
        """A new set with the resources present in this set and all args."""
        result = self.copy()
        for arg in args:
            other = self._coerce(arg)
            for rank in list(result._nodes):
                node = other._nodes.get(rank)
                mine = result._nodes[rank]
                if node is None:
                    del result._nodes[rank]
                    continue
                mine.children = {
                    name: ids.intersect(node.children[name])
                    for name, ids in mine.children.items()
                    if name in node.children
                }
                if mine.empty():
                    del result._nodes[rank]
        result._keep_props()
        return result

    __or__ = union
    __sub__ = diff
    __and__ = intersect

    def copy_ranks(self, ranks):
        """A new set with only the given ranks (IDset, int or string)."""
        ids = ranks if isinstance(ranks, IDset) else IDset(ranks)
        result = self.copy()
        result._nodes = {r: n for r, n in result._nodes.items() if r in ids}
        result._keep_props()
        return result

    def remove_ranks(self, ranks):
        """Remove the given ranks in place; returns self."""
        ids = ranks if isinstance(ranks, IDset) else IDset(ranks)
        for rank in ids:
            self._nodes.pop(rank, None)
        self._keep_props()
        return self

    def host_ranks(self, hosts, ignore_nomatch=False):
        """The ranks of hosts (a Hostlist or RFC 29 string), in the order
        given. A host not in the set raises FileNotFoundError unless
        ignore_nomatch."""
        hosts = hosts if isinstance(hosts, Hostlist) else Hostlist(hosts)
        by_host = {}
        for rank in sorted(self._nodes):
            name = self._nodes[rank].hostname
            if name is not None:
                by_host.setdefault(name, []).append(rank)
        out = []
        for host in hosts:
            if host not in by_host:
                if ignore_nomatch:
                    continue
                raise FileNotFoundError("host %s not found in the resource set" % host)
            out.extend(r for r in by_host[host] if r not in out)
        return out
