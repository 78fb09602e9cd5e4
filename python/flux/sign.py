"""RFC 39 signed envelopes, "none" mechanism: what job-ingest.submit takes
as J. The header (typed key/value pairs version, userid, mechanism), the
payload and the signature "none" are base64-encoded and joined by periods.
The broker's authentication of the connection vouches for the userid."""

import base64
import errno
import os


def _kv(key, typ, value):
    return key.encode() + b"\0" + typ + str(value).encode() + b"\0"


def wrap(payload, userid=None):
    """J for payload (bytes or str) signed by userid (default: getuid())."""
    if userid is None:
        userid = os.getuid()
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    header = _kv("version", b"i", 1) + _kv("userid", b"i", userid) + _kv(
        "mechanism", b"s", "none"
    )
    return "%s.%s.none" % (
        base64.b64encode(header).decode("ascii"),
        base64.b64encode(payload).decode("ascii"),
    )


def unwrap(J):
    """(payload bytes, header dict) of a "none"-signed J."""
    try:
        hdr_b64, payload_b64, sig = J.split(".")
        header = base64.b64decode(hdr_b64, validate=True)
        payload = base64.b64decode(payload_b64, validate=True)
    except ValueError:
        raise OSError(errno.EINVAL, "invalid signed envelope") from None
    fields = header.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    if len(fields) % 2:
        raise OSError(errno.EINVAL, "invalid signed envelope header")
    hdr = {}
    for k, v in zip(fields[0::2], fields[1::2]):
        if not v:
            raise OSError(errno.EINVAL, "invalid signed envelope header")
        typ, val = v[:1], v[1:].decode()
        hdr[k.decode()] = int(val) if typ == b"i" else val
    if hdr.get("mechanism") != "none" or sig != "none":
        raise OSError(errno.EINVAL, "only the none signing mechanism is supported")
    return payload, hdr
