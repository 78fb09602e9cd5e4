"""RPC futures (see flux.core.rpc)."""

from flux.core.rpc import RPC  # noqa: F401
