"""Flux messages (see flux.core.message)."""

from flux.core.message import Message, ProtocolError, StreamDecoder  # noqa: F401
