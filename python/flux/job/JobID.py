"""Job IDs (RFC 19 FLUIDs) and their encodings.

A JobID is an int; it parses and prints every RFC 19 encoding:
decimal, hex ("0x..."), dothex ("0017.e9fb.8df1.6c2e"), kvs
("job.0017.e9fb.8df1.6c2e"), f58 ("ƒuZZybuNNy", also with an ASCII "f"),
words ("reform-remote-galileo--heart-package-academy") and emoji.
"""

import errno
import os

from flux.job._tables import EMOJI, MN_WORDS

F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
F58_PREFIX = "\u0192"  # ƒ
_F58_VALUE = {c: i for i, c in enumerate(F58_ALPHABET)}
_MN_BASE = 1626
_MN_INDEX = {w: i for i, w in enumerate(MN_WORDS[:_MN_BASE])}
_EMOJI_DIGITS = [EMOJI[i] for i in range(len(EMOJI))]
_EMOJI_VALUE = {c: i for i, c in enumerate(_EMOJI_DIGITS)}
_MAX = (1 << 64) - 1

ENCODINGS = ("dec", "hex", "dothex", "kvs", "words", "f58", "f58plain", "emoji")


def _invalid(s, why):
    return ValueError("invalid jobid %r: %s" % (s, why))


def _f58_encode(value, prefix):
    digits = []
    while True:
        digits.append(F58_ALPHABET[value % 58])
        value //= 58
        if value == 0:
            break
    return prefix + "".join(reversed(digits))


def _f58_decode(s):
    if s.startswith(F58_PREFIX):
        digits = s[len(F58_PREFIX) :]
    elif s.startswith("f"):
        digits = s[1:]
    else:
        raise _invalid(s, 'f58 encoding must start with "\u0192" or "f"')
    if not digits:
        raise _invalid(s, "f58 encoding has no digits after the prefix")
    value = 0
    for c in digits:
        d = _F58_VALUE.get(c)
        if d is None:
            raise _invalid(s, "%r is not in the base58 alphabet" % c)
        value = value * 58 + d
    if value > _MAX:
        raise _invalid(s, "f58 value exceeds 64 bits")
    return value


def _dothex_encode(value):
    return ".".join("%04x" % ((value >> shift) & 0xFFFF) for shift in (48, 32, 16, 0))


def _dothex_decode(s, orig=None):
    orig = orig or s
    groups = s.split(".")
    if len(groups) != 4:
        raise _invalid(orig, "dothex encoding has %d groups, want 4" % len(groups))
    value = 0
    for g in groups:
        if not 1 <= len(g) <= 4:
            raise _invalid(orig, "dothex groups must have 1 to 4 hex digits")
        try:
            value = (value << 16) | int(g, 16)
        except ValueError:
            raise _invalid(orig, "dothex group %r is not hex" % g) from None
        if any(c in "+-_ " for c in g):
            raise _invalid(orig, "dothex group %r is not hex" % g)
    return value


def _words_encode(value):
    groups = []
    for g in range(2):
        x = (value >> (32 * g)) & 0xFFFFFFFF
        groups.append(
            "-".join(
                (
                    MN_WORDS[x % _MN_BASE],
                    MN_WORDS[x // _MN_BASE % _MN_BASE],
                    MN_WORDS[x // _MN_BASE // _MN_BASE],
                )
            )
        )
    return "--".join(groups)


def _words_decode(s):
    groups = s.split("--")
    if len(groups) != 2:
        raise _invalid(s, 'words encoding must be two groups of three words joined by "--"')
    value = 0
    for g, group in enumerate(groups):
        words = group.split("-")
        if len(words) != 3:
            raise _invalid(s, 'words group %d must be three words joined by "-"' % (g + 1))
        x = 0
        for w in reversed(words):
            d = _MN_INDEX.get(w.lower() if w.isascii() else w)
            if d is None:
                raise _invalid(s, "%r is not a mnemonicode word" % w)
            x = x * _MN_BASE + d
        if x > 0xFFFFFFFF:
            raise _invalid(s, "words group %d encodes a value beyond 32 bits" % (g + 1))
        value |= x << (32 * g)
    return value


def _emoji_encode(value):
    digits = []
    while True:
        digits.append(_EMOJI_DIGITS[value % 576])
        value //= 576
        if value == 0:
            break
    return "".join(reversed(digits))


def _emoji_decode(s):
    if not s:
        raise _invalid(s, "empty string")
    value = 0
    for c in s:
        d = _EMOJI_VALUE.get(c)
        if d is None:
            raise _invalid(s, "%r is not in the RFC 19 emoji table" % c)
        value = value * 576 + d
    if value > _MAX:
        raise _invalid(s, "emoji value exceeds 64 bits")
    return value


def _dec_decode(s):
    if not s or not s.isascii() or not s.isdigit():
        raise _invalid(s, "not a decimal, hex, dothex, kvs, f58, words or emoji job ID")
    value = int(s)
    if value > _MAX:
        raise _invalid(s, "decimal value exceeds 64 bits")
    return value


def _hex_decode(s):
    digits = s[2:]
    if not digits or len(digits) > 16:
        raise _invalid(s, "hex encoding must have 1 to 16 digits")
    try:
        if any(c in "+-_ " for c in digits):
            raise ValueError
        return int(digits, 16)
    except ValueError:
        raise _invalid(s, "hex encoding has a non-hex digit") from None


def id_parse(jobid_str):
    """Parse a job ID in any RFC 19 encoding and return it as an int.
    Raises ValueError when jobid_str is not a valid job ID."""
    s = jobid_str.strip()
    if s.startswith("job."):
        return _dothex_decode(s[4:], s)
    if "." in s:
        return _dothex_decode(s)
    if "-" in s:
        return _words_decode(s)
    if s.startswith(F58_PREFIX) or s.startswith("f"):
        return _f58_decode(s)
    if s and s[0] in _EMOJI_VALUE:
        return _emoji_decode(s)
    if s.startswith("0x"):
        return _hex_decode(s)
    return _dec_decode(s)


def _f58_prefix():
    if os.environ.get("FLUX_F58_FORCE_ASCII"):
        return "f"
    return F58_PREFIX


def id_encode(jobid, encoding="f58"):
    """Encode job ID jobid (an int) in the named encoding (see ENCODINGS)."""
    value = int(jobid)
    if not 0 <= value <= _MAX:
        raise OSError(errno.EINVAL, "job ID %d is out of range" % value)
    enc = encoding.lower()
    if enc == "dec":
        return str(value)
    if enc == "hex":
        return "0x%x" % value
    if enc == "dothex":
        return _dothex_encode(value)
    if enc == "kvs":
        return "job." + _dothex_encode(value)
    if enc == "words":
        return _words_encode(value)
    if enc == "f58":
        return _f58_encode(value, _f58_prefix())
    if enc == "f58plain":
        return _f58_encode(value, "f")
    if enc == "emoji":
        return _emoji_encode(value)
    raise OSError(
        errno.EINVAL,
        "unknown job ID encoding %r (want one of %s)" % (encoding, ", ".join(ENCODINGS)),
    )


class JobID(int):
    """A job ID: an int that parses and renders every RFC 19 encoding.

    ``JobID("ƒuZZybuNNy")``, ``JobID(6731191091817518)`` ...; ``str()``
    is the f58 form; properties give the other forms.
    """

    def __new__(cls, value):
        orig = value
        if isinstance(value, JobID):
            obj = super().__new__(cls, int(value))
            orig = value.orig
        elif isinstance(value, int):
            if not 0 <= value <= _MAX:
                raise ValueError("job ID %d is out of range" % value)
            obj = super().__new__(cls, value)
        else:
            if isinstance(value, bytes):
                value = value.decode("utf-8")
                orig = value
            if not isinstance(value, str):
                raise TypeError(
                    "JobID needs an int or a string, not %s" % type(value).__name__
                )
            obj = super().__new__(cls, id_parse(value))
        # the ID as the user wrote it, for messages (as flux-core's .orig)
        obj.orig = str(orig)
        return obj

    def encode(self, encoding="dec"):
        """This ID in the named encoding."""
        return id_encode(self, encoding)

    @property
    def dec(self):
        return id_encode(self, "dec")

    @property
    def hex(self):
        return id_encode(self, "hex")

    @property
    def dothex(self):
        return id_encode(self, "dothex")

    @property
    def kvs(self):
        return id_encode(self, "kvs")

    @property
    def words(self):
        return id_encode(self, "words")

    @property
    def f58(self):
        return id_encode(self, "f58")

    @property
    def f58plain(self):
        return id_encode(self, "f58plain")

    @property
    def emoji(self):
        return id_encode(self, "emoji")

    def __str__(self):
        return self.f58

    def __repr__(self):
        return "JobID(%d)" % int(self)
