"""fluxgo's Python client package: a pure-Python (stdlib only) client of
the Flux local connector protocol, with the API shape of flux-core's
Python bindings.

    import flux
    h = flux.Flux()                      # connects to $FLUX_URI
    print(h.rpc("attr.get", {"name": "size"}).get())

Submodules: flux.job (submit, watch, list, wait, cancel), flux.kvs,
flux.constants, flux.message, flux.future, flux.rpc.
"""

from flux.core.handle import Flux

__version__ = "0.1.0"

__all__ = ["Flux", "constants", "core", "job", "kvs"]


def __getattr__(name):
    # import the heavier submodules on first use, as "flux.job" is
    # commonly reached through "import flux"
    if name in (
        "job",
        "kvs",
        "constants",
        "message",
        "future",
        "rpc",
        "sign",
        "resource",
        "util",
        "idset",
        "hostlist",
    ):
        import importlib

        return importlib.import_module("flux." + name)
    if name.startswith("FLUX_"):
        # 2018's flux.FLUX_MSGTYPE_REQUEST (seed 004): today in flux.constants
        from flux import constants  # pylint: disable=import-outside-toplevel

        if hasattr(constants, name):
            return getattr(constants, name)
    raise AttributeError("module 'flux' has no attribute %r" % name)
