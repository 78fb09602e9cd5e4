"""RFC 22 idsets: sets of non-negative integers written as "0-3,5,7-8".

    ids = IDset("0-3,5")
    5 in ids, len(ids), list(ids), str(ids)      # True 5 [0, 1, 2, 3, 5] "0-3,5"

The set is kept as sorted, disjoint, non-adjacent [lo, hi] ranges, so a
large range costs no more than a small one.
"""

import bisect
import numbers
from collections import abc

IDSET_FLAG_BRACKETS = 2
IDSET_FLAG_RANGE = 4
IDSET_INVALID_ID = 2**32 - 2


def _parse_id(text, whole):
    if not text.isdigit() or not text.isascii() or (len(text) > 1 and text[0] == "0"):
        raise ValueError("IDset(): Invalid argument: %s" % whole)
    return int(text)


def _parse(text):
    body = text
    if body.startswith("[") or body.endswith("]"):
        if not (body.startswith("[") and body.endswith("]")) or len(body) < 2:
            raise ValueError("IDset(): Invalid argument: %s" % text)
        body = body[1:-1]
    ranges = []
    if body == "":
        return ranges
    for tok in body.split(","):
        lo, sep, hi = tok.partition("-")
        lo = _parse_id(lo, text)
        hi = _parse_id(hi, text) if sep else lo
        if hi < lo:
            raise ValueError("IDset(): Invalid argument: %s" % text)
        ranges.append((lo, hi))
    return ranges


class IDset:
    """A set of non-negative integers. IDset(arg): arg is an idset string
    ("0-3,5", "[1,2]", ""), an int, another IDset, or an iterable of
    ints. str() uses ranges ("0-3"); encode(flags) chooses:
    IDSET_FLAG_RANGE for ranges, IDSET_FLAG_BRACKETS for [brackets]
    around more than one id."""

    def __init__(self, arg="", flags=IDSET_FLAG_RANGE):
        self.default_flags = flags
        self._r = []  # sorted, disjoint, non-adjacent (lo, hi)
        if isinstance(arg, IDset):
            self._r = list(arg._r)
        elif isinstance(arg, str):
            for lo, hi in _parse(arg):
                self._add(lo, hi)
        elif isinstance(arg, numbers.Integral) and not isinstance(arg, bool):
            self.set(arg)
        elif isinstance(arg, abc.Iterable):
            for i in arg:
                self.set(i)
        else:
            raise TypeError("IDset() expected an idset string or iterable, got %s" % type(arg))

    # ranges

    def _add(self, lo, hi):
        r = self._r
        # the first range ending at or after lo-1 is the first that may merge
        i = bisect.bisect_left([h for _, h in r], lo - 1)
        j = i
        while j < len(r) and r[j][0] <= hi + 1:
            lo, hi = min(lo, r[j][0]), max(hi, r[j][1])
            j += 1
        r[i:j] = [(lo, hi)]

    def _remove(self, lo, hi):
        out = []
        for a, b in self._r:
            if b < lo or a > hi:
                out.append((a, b))
                continue
            if a < lo:
                out.append((a, lo - 1))
            if b > hi:
                out.append((hi + 1, b))
        self._r = out

    @staticmethod
    def _check(i, name):
        if not isinstance(i, numbers.Integral) or isinstance(i, bool):
            raise TypeError("IDset.%s supports integers, not %s" % (name, type(i)))
        if i < 0:
            raise ValueError("negative index passed to IDset.%s" % name)

    def set(self, start, end=None):
        """Add id start, or ids start to end; returns the IDset."""
        self._check(start, "set")
        if end is None:
            end = start
        self._check(end, "set")
        if end < start:
            raise ValueError("can't set range with %d > %d" % (start, end))
        self._add(int(start), int(end))
        return self

    def clear(self, start, end=None):
        """Remove id start, or ids start to end; returns the IDset."""
        self._check(start, "clear")
        if end is None:
            end = start
        self._check(end, "clear")
        if end < start:
            raise ValueError("can't clear range with %d > %d" % (start, end))
        self._remove(int(start), int(end))
        return self

    def test(self, i):
        """Whether id i is in the set."""
        self._check(i, "test")
        k = bisect.bisect_left([h for _, h in self._r], i)
        return k < len(self._r) and self._r[k][0] <= i

    # encoding

    def encode(self, flags=None):
        """The set as an RFC 22 string (see the class documentation)."""
        if flags is None:
            flags = self.default_flags
        parts = []
        for lo, hi in self._r:
            if lo == hi:
                parts.append(str(lo))
            elif flags & IDSET_FLAG_RANGE:
                parts.append("%d-%d" % (lo, hi))
            else:
                parts.extend(str(i) for i in range(lo, hi + 1))
        text = ",".join(parts)
        if flags & IDSET_FLAG_BRACKETS and len(self) > 1:
            text = "[%s]" % text
        return text

    def set_flags(self, flags):
        self.default_flags = flags

    def __str__(self):
        return self.encode()

    def __repr__(self):
        return "IDset('%s')" % self.encode(IDSET_FLAG_RANGE)

    # container

    def count(self):
        return sum(hi - lo + 1 for lo, hi in self._r)

    def __len__(self):
        return self.count()

    def __iter__(self):
        for lo, hi in self._r:
            yield from range(lo, hi + 1)

    def __contains__(self, i):
        return self.test(i)

    def __getitem__(self, i):
        return self.test(i)

    def __setitem__(self, i, value):
        if value not in (0, 1) or not isinstance(value, (bool, int)):
            raise TypeError("IDset setitem must be bool or 0,1 not %s" % type(value))
        if value:
            self.set(i)
        else:
            self.clear(i)

    def expand(self):
        return list(self)

    def first(self):
        """The smallest id, or IDSET_INVALID_ID if empty."""
        return self._r[0][0] if self._r else IDSET_INVALID_ID

    def last(self):
        """The largest id, or IDSET_INVALID_ID if empty."""
        return self._r[-1][1] if self._r else IDSET_INVALID_ID

    def next(self, i):
        """The smallest id greater than i, or IDSET_INVALID_ID."""
        self._check(i, "next")
        for lo, hi in self._r:
            if hi > i:
                return max(lo, i + 1)
        return IDSET_INVALID_ID

    def copy(self):
        return IDset(self, flags=self.default_flags)

    # set algebra

    def equal(self, other):
        if not isinstance(other, IDset):
            raise TypeError("IDset.equal() needs an IDset")
        return self._r == other._r

    def __eq__(self, other):
        if not isinstance(other, IDset):
            return NotImplemented
        return self._r == other._r

    __hash__ = None

    def add(self, arg):
        """Add the ids of arg (IDset, string or iterable) in place."""
        for lo, hi in IDset(arg)._r:
            self._add(lo, hi)
        return self

    def subtract(self, arg):
        """Remove the ids of arg (IDset, string or iterable) in place."""
        for lo, hi in IDset(arg)._r:
            self._remove(lo, hi)
        return self

    def union(self, *args):
        result = self.copy()
        for arg in args:
            result.add(arg)
        return result

    def difference(self, *args):
        result = self.copy()
        for arg in args:
            result.subtract(arg)
        return result

    def intersect(self, *args):
        result = self.copy()
        for arg in args:
            other = IDset(arg)._r
            out, i, j, mine = [], 0, 0, result._r
            while i < len(mine) and j < len(other):
                lo = max(mine[i][0], other[j][0])
                hi = min(mine[i][1], other[j][1])
                if lo <= hi:
                    out.append((lo, hi))
                if mine[i][1] < other[j][1]:
                    i += 1
                else:
                    j += 1
            result._r = out
        return result

    __add__ = __or__ = union
    __sub__ = difference
    __and__ = intersect

    def __iadd__(self, arg):
        return self.add(arg)

    def __isub__(self, arg):
        return self.subtract(arg)


def decode(string):
    """IDset(string)."""
    return IDset(string)
