"""RFC 29 hostlists: ordered lists of host names written compactly as
"node[1-3,07-10],login1".

    hl = Hostlist("foo[1-3],bar")
    len(hl), hl[0], list(hl), str(hl)     # 4 'foo1' [...] 'foo[1-3],bar'

A Hostlist keeps the order hosts were given in, and repeats. encode()
(and str()) joins consecutive hosts that differ only in one number
(same text around it, same zero padding) into brackets.
"""

import numbers
import re
from collections import abc

_BAD = re.compile(r"[\s,\[\]]")
# the last run of digits in a name, with the text around it
_NUMBERED = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$", re.S)


def _pad(n, width):
    return str(n).zfill(width)


def _expand_term(term, whole):
    """The hosts of one comma-free term: "name" or "prefix[ranges]suffix"."""
    if "[" not in term and "]" not in term:
        if _BAD.search(term):
            raise ValueError("Invalid hostlist: '%s'" % whole)
        return [term]
    open_, close = term.find("["), term.find("]")
    if (
        open_ < 0
        or close < open_
        or term.count("[") != 1
        or term.count("]") != 1
    ):
        raise ValueError("Invalid hostlist: '%s'" % whole)
    prefix, body, suffix = term[:open_], term[open_ + 1 : close], term[close + 1 :]
    if _BAD.search(prefix) or _BAD.search(suffix) or body == "":
        raise ValueError("Invalid hostlist: '%s'" % whole)
    hosts = []
    for rng in body.split(","):
        lo, sep, hi = rng.partition("-")
        if not (lo.isascii() and lo.isdigit()) or (sep and not (hi.isascii() and hi.isdigit())):
            raise ValueError("Invalid hostlist: '%s'" % whole)
        width = len(lo) if len(lo) > 1 and lo[0] == "0" else 0
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError("Invalid hostlist: '%s'" % whole)
        hosts.extend(prefix + _pad(n, width) + suffix for n in range(first, last + 1))
    return hosts


def _split_terms(text):
    """Split at the commas outside brackets."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _decode(text):
    hosts = []
    for term in _split_terms(text):
        if term:
            hosts.extend(_expand_term(term, text))
    return hosts


def _encode(hosts):
    # runs: [prefix, suffix, width, [[lo, hi], ...]] or a plain name (str)
    runs = []
    for host in hosts:
        m = _NUMBERED.match(host)
        if not m:
            runs.append(host)
            continue
        prefix, digits, suffix = m.groups()
        n = int(digits)
        width = len(digits) if len(digits) > 1 and digits[0] == "0" else 0
        last = runs[-1] if runs else None
        if isinstance(last, list) and last[0] == prefix and last[1] == suffix:
            ranges = last[3]
            if n == ranges[-1][1] + 1 and _pad(n, last[2]) == digits:
                ranges[-1][1] = n
                continue
            if _pad(n, last[2]) == digits:
                # same padding: another range in the same brackets
                ranges.append([n, n])
                continue
        runs.append([prefix, suffix, width, [[n, n]]])
    out = []
    for run in runs:
        if isinstance(run, str):
            out.append(run)
            continue
        prefix, suffix, width, ranges = run
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            out.append(prefix + _pad(ranges[0][0], width) + suffix)
            continue
        body = ",".join(
            _pad(lo, width) if lo == hi else "%s-%s" % (_pad(lo, width), _pad(hi, width))
            for lo, hi in ranges
        )
        out.append("%s[%s]%s" % (prefix, body, suffix))
    return ",".join(out)


class Hostlist:
    """An ordered list of host names. Hostlist(arg): arg is an RFC 29
    string ("foo[1-3],bar") or an iterable of such strings. Indexing
    (with negative indexes and slices), len(), iteration, `in`, str() /
    encode(), append(), delete(), sort(), uniq(), expand(), copy()."""

    def __init__(self, arg=""):
        if isinstance(arg, Hostlist):
            self._hosts = list(arg._hosts)
        elif isinstance(arg, str):
            self._hosts = _decode(arg)
        elif isinstance(arg, abc.Iterable):
            self._hosts = []
            for item in arg:
                if not isinstance(item, str):
                    raise TypeError(
                        "Hostlist(): expected string or Iterable, got %s" % type(item)
                    )
                self._hosts.extend(_decode(item))
        else:
            raise TypeError("Hostlist(): expected string or Iterable, got %s" % type(arg))

    def encode(self):
        """The list as an RFC 29 string."""
        return _encode(self._hosts)

    def __str__(self):
        return self.encode()

    def __repr__(self):
        return "Hostlist('%s')" % self

    def __len__(self):
        return len(self._hosts)

    def count(self):
        return len(self._hosts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._hosts[index]
        if isinstance(index, numbers.Integral):
            try:
                return self._hosts[index]
            except IndexError:
                raise IndexError("Hostlist index out of range") from None
        raise TypeError("Hostlist index must be integer or slice")

    def __iter__(self):
        return iter(list(self._hosts))

    def __contains__(self, name):
        return name in self._hosts

    def __eq__(self, other):
        if isinstance(other, Hostlist):
            return self._hosts == other._hosts
        return NotImplemented

    __hash__ = None

    def index(self, host):
        """Position of the first occurrence of host (ValueError if absent)."""
        return self._hosts.index(host)

    def append(self, *args):
        """Append Hostlists or anything Hostlist() takes; returns the
        number of hosts added."""
        added = 0
        for arg in args:
            hosts = Hostlist(arg)._hosts
            self._hosts.extend(hosts)
            added += len(hosts)
        return added

    def delete(self, hosts):
        """Remove every occurrence of the hosts of hosts (a Hostlist or an
        RFC 29 string); returns the number removed."""
        gone = set(Hostlist(hosts)._hosts)
        before = len(self._hosts)
        self._hosts = [h for h in self._hosts if h not in gone]
        return before - len(self._hosts)

    def sort(self):
        """Sort by the text around the number, then the number; returns
        the Hostlist."""

        def key(host):
            m = _NUMBERED.match(host)
            if not m:
                return (host, "", -1, "")
            return (m.group(1), m.group(3), int(m.group(2)), m.group(2))

        self._hosts.sort(key=key)
        return self

    def uniq(self):
        """Sort and drop repeated hosts; returns the Hostlist."""
        self._hosts = list(dict.fromkeys(self._hosts))
        return self.sort()

    def expand(self):
        """The hosts as a Python list."""
        return list(self._hosts)

    def copy(self):
        return Hostlist(self)


def decode(arg):
    """Hostlist(arg)."""
    return Hostlist(arg)
