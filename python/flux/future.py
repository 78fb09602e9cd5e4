"""Futures (see flux.core.future)."""

from flux.core.future import Future  # noqa: F401
