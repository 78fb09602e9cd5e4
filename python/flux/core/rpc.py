"""Remote procedure calls (RFC 6): a request, then one response, or for a
streaming RPC a series of responses ended by an error response (ENODATA
at a normal end)."""

import errno
import json
import os

from flux import constants as C
from flux.core.future import Future
from flux.core.message import Message, encode_json


def error_from_response(msg):
    """OSError for an error response: its errnum and the error string the
    service sent as payload, or strerror(errnum)."""
    text = msg.payload_str
    if not text:
        try:
            text = os.strerror(msg.errnum)
        except ValueError:
            text = "error %d" % msg.errnum
    return OSError(msg.errnum, text)


def make_request(topic, payload=None, nodeid=C.FLUX_NODEID_ANY, flags=0, compact=False):
    """Build a request message as flux-core clients do: route flag set
    (empty route stack), userid unknown, rolemask none."""
    msg = Message(C.FLUX_MSGTYPE_REQUEST, topic)
    msg.enable_routes()
    msg.nodeid = C.FLUX_NODEID_ANY if nodeid is None else nodeid
    if payload is None:
        pass
    elif isinstance(payload, (bytes, bytearray)):
        msg.payload_raw = payload
    elif isinstance(payload, str):
        msg.payload_str = payload
    else:
        msg.payload_str = encode_json(payload, compact=compact)
    if flags & C.FLUX_RPC_STREAMING:
        msg.flags |= C.FLUX_MSGFLAG_STREAMING
    if flags & C.FLUX_RPC_NORESPONSE:
        msg.flags |= C.FLUX_MSGFLAG_NORESPONSE
    return msg


class RPC(Future):
    """An RPC in flight.

    ``get()`` returns the response payload decoded from JSON (None without
    a payload), ``get_str()`` the payload string, ``get_raw()`` its bytes;
    an error response raises OSError(errnum, message). A streaming RPC
    (flags=FLUX_RPC_STREAMING) may also be iterated: each response's
    decoded payload, until the ENODATA that ends the stream.
    """

    def __init__(
        self,
        flux_handle,
        topic,
        payload=None,
        nodeid=C.FLUX_NODEID_ANY,
        flags=0,
        _compact=False,
    ):
        super().__init__(flux_handle, streaming=bool(flags & C.FLUX_RPC_STREAMING))
        self.topic = topic
        self.flags = flags
        self.matchtag = C.FLUX_MATCHTAG_NONE
        msg = make_request(topic, payload, nodeid, flags, compact=_compact)
        if flags & C.FLUX_RPC_NORESPONSE:
            flux_handle.send(msg)
            self._fulfill(None, final=True)
            return
        self.matchtag = flux_handle._register_rpc(self)
        msg.matchtag = self.matchtag
        try:
            flux_handle.send(msg)
        except Exception:
            flux_handle._unregister_rpc(self.matchtag)
            raise

    def _response(self, msg):
        """Called by the handle for each response with our matchtag."""
        if msg.errnum != 0:
            self._fulfill_error(error_from_response(msg), final=True)
        else:
            self._fulfill(msg, final=not self._streaming)
        return self._final

    def _fail(self, exc):
        """The connection was lost: fail the RPC."""
        if not self._final:
            self._fulfill_error(exc, final=True)

    def get_message(self):
        """The response Message (None for a FLUX_RPC_NORESPONSE request)."""
        return self._result()

    def get_str(self):
        """The response payload as a string (None without a payload)."""
        msg = self._result()
        if msg is None:
            return None
        return msg.payload_str

    def get_raw(self):
        """The response payload bytes as sent (None without a payload)."""
        msg = self._result()
        if msg is None:
            return None
        return msg.payload_raw

    def get(self):
        """The response payload decoded from JSON (None without a payload)."""
        s = self.get_str()
        if s is None or s == "":
            return None
        return json.loads(s)

    def __iter__(self):
        while True:
            try:
                value = self.get()
            except OSError as exc:
                if self._streaming and exc.errno == errno.ENODATA:
                    return
                raise
            yield value
            if not self._streaming:
                return
            self.reset()
