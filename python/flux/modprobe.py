"""Module loading from Python rc files (``flux modprobe run FILE``).

An rc file defines ``setup(context)``, which names the modules to load
(``context.load_modules([...])``) or remove (``context.remove_modules()``)
and sets their options (``context.setopt(module, "key=value")``), and
functions decorated with :func:`task`, which run in the order their
``before`` and ``after`` lists give relative to the modules and to each
other, on the ranks they name.

fluxgo's own module list (passed by ``flux modprobe`` in the environment)
gives each module its ranks and default arguments; ``content-backing``
names the content store's backing module.
"""

import json
import os
import runpy
import sys

import flux

__all__ = ["task", "Context", "main"]

_TASKS = []


class _Task:
    def __init__(self, name, fn, ranks, before, after, needs):
        self.name = name
        self.fn = fn
        self.ranks = ranks
        self.before = list(before or [])
        self.after = list(after or [])
        self.needs = list(needs or [])


def task(name, ranks="all", before=None, after=None, needs=None, **kwargs):
    """Register the decorated function as a task named NAME.

    ranks: "all", "0", ">0", or an idset of ranks the task runs on.
    before/after: names of modules or tasks this one runs before/after
    ("*" in before: before everything).
    needs: modules that must be in the plan for the task to run.
    """

    def decorator(fn):
        _TASKS.append(_Task(name, fn, ranks, before, after, needs))
        return fn

    return decorator


def _rank_matches(spec, rank):
    spec = str(spec).strip()
    if spec in ("all", "*", ""):
        return True
    if spec.startswith(">"):
        return rank > int(spec[1:])
    if spec.startswith("<"):
        return rank < int(spec[1:])
    for part in spec.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            if int(lo) <= rank <= (int(hi) if hi else rank):
                return True
        elif part and int(part) == rank:
            return True
    return False


class _Table:
    """fluxgo's modules: order, ranks, default arguments, aliases."""

    def __init__(self):
        raw = os.environ.get("FLUXGO_MODPROBE_MODULES")
        if not raw:
            raise RuntimeError("flux.modprobe: run through 'flux modprobe run FILE'")
        t = json.loads(raw)
        self.order = [m["name"] for m in t["modules"]]
        self.modules = {m["name"]: m for m in t["modules"]}
        self.aliases = t.get("aliases", {})

    def resolve(self, name):
        real = self.aliases.get(name, name)
        if real not in self.modules:
            raise ValueError(
                "module %r is not one fluxgo has (known: %s)"
                % (name, ", ".join(sorted(list(self.modules) + list(self.aliases))))
            )
        return real


class Context:
    """What setup() and tasks get: the handle, options and module plan."""

    def __init__(self, handle, table):
        self.handle = handle
        self._table = table
        self.rank = int(handle.attr_get("rank"))
        self._opts = {}
        self._load = []
        self._remove = None  # None: nothing; []: every loaded module
        self._removing = False

    def attr_get(self, name):
        return self.handle.attr_get(name)

    def rpc(self, topic, payload=None, nodeid=flux.constants.FLUX_NODEID_ANY, flags=0):
        return self.handle.rpc(topic, payload, nodeid=nodeid, flags=flags)

    def setopt(self, module, option):
        name = self._table.resolve(module)
        self._opts.setdefault(name, []).append(option)

    def getopt(self, module):
        return list(self._opts.get(self._table.resolve(module), []))

    def load_modules(self, modules):
        for m in modules:
            name = self._table.resolve(m)
            if name not in self._load:
                self._load.append(name)

    def remove_modules(self, modules=None):
        self._removing = True
        if modules is None:
            self._remove = []
        else:
            self._remove = [self._table.resolve(m) for m in modules]

    # -- running the plan --

    def _args(self, name):
        args = list(self._table.modules[name].get("args") or [])
        for opt in self._opts.get(name, []):
            key = opt.split("=", 1)[0]
            args = [a for a in args if a.split("=", 1)[0] != key]
            args.append(opt)
        return args

    def _loaded(self):
        resp = self.handle.rpc("module.list", {}).get()
        return {m["name"] for m in resp.get("mods", [])}

    def _steps(self):
        """The modules to act on, in order, for this rank."""
        t = self._table
        if self._removing:
            loaded = self._loaded()
            names = self._remove or [
                n for n in t.order if n in loaded and not t.modules[n].get("builtin")
            ]
            return [n for n in reversed(t.order) if n in names and n in loaded]
        return [
            n
            for n in self._load
            if _rank_matches(t.modules[n].get("ranks", "all"), self.rank)
        ]

    def run(self, tasks):
        steps = self._steps()
        aliases = self._table.aliases
        present = set(steps)
        items = [("module", n) for n in steps]
        mytasks = []
        for tk in tasks:
            if not _rank_matches(tk.ranks, self.rank):
                continue
            if any(self._table.resolve(n) not in present for n in tk.needs):
                continue
            mytasks.append(tk)
        items += [("task", tk) for tk in mytasks]

        def key(item):
            return item[1] if item[0] == "module" else item[1].name

        def real(name):
            return aliases.get(name, name)

        index = {key(it): i for i, it in enumerate(items)}
        edges = {i: set() for i in range(len(items))}  # i -> must come after
        for i in range(1, len(steps)):
            edges[i].add(i - 1)
        for i, it in enumerate(items):
            if it[0] != "task":
                continue
            tk = it[1]
            for a in tk.after:
                j = index.get(real(a))
                if j is not None:
                    edges[i].add(j)
            for b in tk.before:
                if b == "*":
                    for j in range(len(items)):
                        if j != i and items[j][0] == "module":
                            edges[j].add(i)
                    continue
                j = index.get(real(b))
                if j is not None:
                    edges[j].add(i)
        order, done, visiting = [], set(), set()

        def visit(i):
            if i in done:
                return
            if i in visiting:
                raise RuntimeError("modprobe: a cycle in the before/after lists at %s" % key(items[i]))
            visiting.add(i)
            for j in sorted(edges[i]):
                visit(j)
            visiting.discard(i)
            done.add(i)
            order.append(i)

        for i in range(len(items)):
            visit(i)
        for i in order:
            kind, what = items[i]
            if kind == "task":
                try:
                    what.fn(self)
                except Exception as exc:
                    raise RuntimeError("task %s: %s" % (what.name, exc)) from exc
            elif self._removing:
                try:
                    self.handle.rpc("module.remove", {"name": what}).get()
                except OSError as exc:
                    raise RuntimeError("remove %s: %s" % (what, exc.strerror or exc)) from exc
            else:
                try:
                    self.handle.rpc("module.load", {"name": what, "args": self._args(what)}).get()
                except OSError as exc:
                    raise RuntimeError("load %s: %s" % (what, exc.strerror or exc)) from exc


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "run":
        print("Usage: flux modprobe run FILE", file=sys.stderr)
        return 2
    path = argv[1]
    _TASKS.clear()
    try:
        ns = runpy.run_path(path, run_name="__modprobe__")
        setup = ns.get("setup")
        ctx = Context(flux.Flux(), _Table())
        if setup is not None:
            setup(ctx)
        ctx.run(list(_TASKS))
    except (RuntimeError, ValueError, OSError) as exc:
        print("flux-modprobe: ERROR: %s: %s" % (path, exc), file=sys.stderr)
        return 1
    except Exception as exc:  # an error in the rc file itself
        print("flux-modprobe: ERROR: %s: %s: %s" % (path, type(exc).__name__, exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # run as python -m flux.modprobe: the rc file imports flux.modprobe,
    # so the tasks must be registered in that module, not in __main__
    import flux.modprobe as _modprobe

    sys.exit(_modprobe.main())
