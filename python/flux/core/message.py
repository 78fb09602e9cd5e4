"""Flux messages (RFC 3) and their encoding on a local connector stream.

An encoded message is a sequence of frames, each preceded by its length
(one byte when < 255, else 0xff and a 4-byte big-endian length):

* when FLUX_MSGFLAG_ROUTE is set, the route frames (most recent hop
  first) and an empty delimiter frame;
* the topic, when FLUX_MSGFLAG_TOPIC is set;
* the payload, when FLUX_MSGFLAG_PAYLOAD is set (JSON and string payloads
  carry a terminating NUL byte);
* the 20-byte header: 0x8e, version 1, type, flags, userid, rolemask and
  two type-specific 32-bit words, all big-endian.

On a stream, each encoded message is preceded by the magic 0xffee0012 in
host byte order and the 4-byte big-endian length of the encoded message.
"""

import errno
import json
import struct

from flux import constants as C

STREAM_MAGIC = 0xFFEE0012
HEADER_SIZE = 20
HEADER_MAGIC = 0x8E
PROTO_VERSION = 1
MAX_MESSAGE_SIZE = 1 << 30

_HEADER = struct.Struct(">BBBBIIII")
_STREAM_PREFIX = struct.Struct("=I")  # magic, host byte order
_LEN = struct.Struct(">I")

_TYPE_NAMES = {
    C.FLUX_MSGTYPE_REQUEST: "request",
    C.FLUX_MSGTYPE_RESPONSE: "response",
    C.FLUX_MSGTYPE_EVENT: "event",
    C.FLUX_MSGTYPE_CONTROL: "control",
}


class ProtocolError(OSError):
    """A malformed message (EPROTO)."""

    def __init__(self, msg):
        super().__init__(errno.EPROTO, msg)


def _frame(data):
    n = len(data)
    if n < 255:
        return bytes((n,)) + data
    return b"\xff" + _LEN.pack(n) + data


def encode_json(obj, compact=False):
    """JSON text of obj as Flux clients send it.

    flux-core's Python API encodes with json.dumps defaults (", " and
    ": " separators); its C API (jansson) encodes compactly.
    """
    if compact:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(obj, ensure_ascii=False)


class Message:
    """A Flux message.

    Attributes mirror the RFC 3 header: ``type``, ``flags``, ``userid``,
    ``rolemask``, ``nodeid`` and ``matchtag`` (requests), ``errnum`` and
    ``matchtag`` (responses), ``seq`` (events); ``topic``; ``routes``
    (oldest hop first) when the route flag is set; the payload is
    available raw (``payload_raw``), as a string (``payload_str``) or
    decoded from JSON (``payload``).
    """

    def __init__(self, type_id=C.FLUX_MSGTYPE_REQUEST, topic=None, payload=None):
        self.type = type_id
        self.flags = 0
        self.userid = C.FLUX_USERID_UNKNOWN
        self.rolemask = C.FLUX_ROLE_NONE
        self.nodeid = C.FLUX_NODEID_ANY if type_id == C.FLUX_MSGTYPE_REQUEST else 0
        self.matchtag = 0
        self.errnum = 0
        self.seq = 0
        self.control_type = 0
        self.control_status = 0
        self._routes = []
        self._topic = None
        self._payload = None
        if topic is not None:
            self.topic = topic
        if payload is not None:
            self.payload = payload

    # -- topic -------------------------------------------------------------
    @property
    def topic(self):
        return self._topic

    @topic.setter
    def topic(self, topic):
        if topic is None:
            self._topic = None
            self.flags &= ~C.FLUX_MSGFLAG_TOPIC
        else:
            self._topic = str(topic)
            self.flags |= C.FLUX_MSGFLAG_TOPIC

    # -- routes ------------------------------------------------------------
    @property
    def routes(self):
        """The route stack, oldest hop first (None without the route flag)."""
        if not self.flags & C.FLUX_MSGFLAG_ROUTE:
            return None
        return list(self._routes)

    def enable_routes(self):
        self.flags |= C.FLUX_MSGFLAG_ROUTE

    def push_route(self, ident):
        self.flags |= C.FLUX_MSGFLAG_ROUTE
        self._routes.append(str(ident))

    # -- payload -----------------------------------------------------------
    @property
    def payload_raw(self):
        """The payload bytes as on the wire (None when there is none)."""
        return self._payload

    @payload_raw.setter
    def payload_raw(self, data):
        if data is None:
            self._payload = None
            self.flags &= ~C.FLUX_MSGFLAG_PAYLOAD
        else:
            self._payload = bytes(data)
            self.flags |= C.FLUX_MSGFLAG_PAYLOAD

    @property
    def payload_str(self):
        """The payload as a string without its terminating NUL, or None."""
        if self._payload is None:
            return None
        data = self._payload
        if data.endswith(b"\0"):
            data = data[:-1]
        return data.decode("utf-8", errors="surrogateescape")

    @payload_str.setter
    def payload_str(self, s):
        if s is None:
            self.payload_raw = None
        else:
            self.payload_raw = s.encode("utf-8", errors="surrogateescape") + b"\0"

    @property
    def payload(self):
        """The payload decoded from JSON, or None when there is none."""
        s = self.payload_str
        if s is None or s == "":
            return None
        return json.loads(s)

    @payload.setter
    def payload(self, value):
        if value is None:
            self.payload_raw = None
        elif isinstance(value, (bytes, bytearray)):
            self.payload_raw = value
        elif isinstance(value, str):
            self.payload_str = value
        else:
            self.payload_str = encode_json(value)

    def set_json(self, value, compact=False):
        """Set a JSON payload, compactly encoded if compact is true."""
        self.payload_str = encode_json(value, compact=compact)

    @property
    def type_str(self):
        return _TYPE_NAMES.get(self.type, "unknown")

    # -- codec -------------------------------------------------------------
    def encode(self):
        """The encoded message (without stream framing)."""
        parts = []
        if self.flags & C.FLUX_MSGFLAG_ROUTE:
            for route in reversed(self._routes):
                parts.append(_frame(route.encode("utf-8")))
            parts.append(b"\0")
        if self.flags & C.FLUX_MSGFLAG_TOPIC:
            parts.append(_frame((self._topic or "").encode("utf-8")))
        if self.flags & C.FLUX_MSGFLAG_PAYLOAD:
            parts.append(_frame(self._payload or b""))
        if self.type == C.FLUX_MSGTYPE_REQUEST:
            aux1, aux2 = self.nodeid, self.matchtag
        elif self.type == C.FLUX_MSGTYPE_RESPONSE:
            aux1, aux2 = self.errnum, self.matchtag
        elif self.type == C.FLUX_MSGTYPE_EVENT:
            aux1, aux2 = self.seq, 0
        else:
            aux1, aux2 = self.control_type, self.control_status
        header = _HEADER.pack(
            HEADER_MAGIC,
            PROTO_VERSION,
            self.type,
            self.flags & 0xFF,
            self.userid & 0xFFFFFFFF,
            self.rolemask & 0xFFFFFFFF,
            aux1 & 0xFFFFFFFF,
            aux2 & 0xFFFFFFFF,
        )
        parts.append(_frame(header))
        return b"".join(parts)

    def encode_stream(self):
        """The encoded message with stream framing (magic, length)."""
        body = self.encode()
        return _STREAM_PREFIX.pack(STREAM_MAGIC) + _LEN.pack(len(body)) + body

    @classmethod
    def decode(cls, data):
        """Decode one encoded message (without stream framing)."""
        data = bytes(data)
        frames = []
        off = 0
        end = len(data)
        while off < end:
            n = data[off]
            off += 1
            if n == 0xFF:
                if off + 4 > end:
                    raise ProtocolError("truncated frame length")
                (n,) = _LEN.unpack_from(data, off)
                off += 4
            if n > end - off:
                raise ProtocolError("frame overruns message")
            frames.append(data[off : off + n])
            off += n
        if not frames:
            raise ProtocolError("empty message")
        header = frames.pop()
        if len(header) != HEADER_SIZE:
            raise ProtocolError("header frame is %d bytes" % len(header))
        magic, version, mtype, flags, userid, rolemask, aux1, aux2 = _HEADER.unpack(
            header
        )
        if magic != HEADER_MAGIC:
            raise ProtocolError("bad header magic 0x%02x" % magic)
        if version != PROTO_VERSION:
            raise ProtocolError("unsupported message version %d" % version)
        if mtype not in _TYPE_NAMES:
            raise ProtocolError("unknown message type %d" % mtype)
        msg = cls(mtype)
        msg.flags = flags
        msg.userid = userid
        msg.rolemask = rolemask
        if mtype == C.FLUX_MSGTYPE_REQUEST:
            msg.nodeid, msg.matchtag = aux1, aux2
        elif mtype == C.FLUX_MSGTYPE_RESPONSE:
            msg.errnum, msg.matchtag = aux1, aux2
        elif mtype == C.FLUX_MSGTYPE_EVENT:
            msg.seq = aux1
        else:
            msg.control_type, msg.control_status = aux1, aux2
        i = 0
        if flags & C.FLUX_MSGFLAG_ROUTE:
            j = i
            while j < len(frames) and len(frames[j]) > 0:
                j += 1
            if j == len(frames):
                raise ProtocolError("route flag set but no route delimiter")
            msg._routes = [f.decode("utf-8", "replace") for f in reversed(frames[i:j])]
            i = j + 1
        if flags & C.FLUX_MSGFLAG_TOPIC:
            if i >= len(frames):
                raise ProtocolError("topic flag set but no topic frame")
            msg._topic = frames[i].decode("utf-8", "replace")
            i += 1
        if flags & C.FLUX_MSGFLAG_PAYLOAD:
            if i >= len(frames):
                raise ProtocolError("payload flag set but no payload frame")
            msg._payload = frames[i]
            i += 1
        if i != len(frames):
            raise ProtocolError("%d unexpected frames" % (len(frames) - i))
        return msg

    def __repr__(self):
        return "Message(%s, topic=%r, flags=0x%x, payload=%r)" % (
            self.type_str,
            self._topic,
            self.flags,
            self.payload_str,
        )


class StreamDecoder:
    """Accumulates bytes read from a stream and yields whole messages."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data):
        self._buf += data

    def next_message(self):
        """The next whole message, or None when more bytes are needed."""
        buf = self._buf
        if len(buf) < 8:
            return None
        (magic,) = _STREAM_PREFIX.unpack_from(buf, 0)
        if magic != STREAM_MAGIC:
            raise ProtocolError("bad stream magic 0x%08x" % magic)
        (n,) = _LEN.unpack_from(buf, 4)
        if n > MAX_MESSAGE_SIZE:
            raise ProtocolError("message of %d bytes exceeds limit" % n)
        if len(buf) < 8 + n:
            return None
        body = bytes(buf[8 : 8 + n])
        del buf[: 8 + n]
        return Message.decode(body)

    def pending(self):
        return len(self._buf)
