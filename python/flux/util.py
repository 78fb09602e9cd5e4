"""Small helpers flux-core's bindings keep in flux.util and that tools
import from there: Flux Standard Duration (RFC 23) parsing and
formatting, dotted-key dictionary access, a main() wrapper for command
line tools, and payload/topic encoding."""

import argparse
import base64
import json
import logging
import math
import os
import re
import stat
import sys
import traceback

__all__ = [
    "check_future_error",
    "encode_payload",
    "encode_topic",
    "CLIMain",
    "parse_fsd",
    "fsd",
    "get_treedict",
    "set_treedict",
    "del_treedict",
    "Fileref",
]

_FSD = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_FSD_UNITS = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_fsd(fsd_string):
    """Seconds in a Flux Standard Duration (RFC 23): a number with an
    optional unit suffix ms, s, m, h or d ("30", "1.5m", "2h"), or
    "inf"/"infinity". Raises ValueError otherwise."""
    text = str(fsd_string).strip()
    if text.lower() in ("inf", "infinity"):
        return math.inf
    m = _FSD.match(text)
    if not m:
        raise ValueError("invalid Flux standard duration %r" % (fsd_string,))
    seconds = float(m.group(1)) * _FSD_UNITS[m.group(2)]
    if math.isinf(seconds) or math.isnan(seconds):
        raise ValueError("invalid Flux standard duration %r" % (fsd_string,))
    return seconds


def fsd(secs):
    """secs as a short Flux Standard Duration: "0s" below a millisecond,
    then seconds, minutes, hours or days with about four significant
    digits ("1.500s", "2.5m", "3h"); "inf" for infinity."""
    if math.isinf(secs):
        return "inf"
    if secs < 1.0e-3:
        return "0s"
    if secs < 10.0:
        return "%.03fs" % secs
    for limit, unit, scale in ((60.0, "s", 1.0), (3600.0, "m", 60.0), (86400.0, "h", 3600.0)):
        if secs < limit:
            return "%.4g%s" % (secs / scale, unit)
    return "%.4gd" % (secs / 86400.0)


def check_future_error(func):
    """Decorator for future methods: an OSError escapes without the
    traceback of the wrapper. (fluxgo's futures already carry the
    server's error text in the OSError.)"""

    def func_wrapper(calling_obj, *args, **kwargs):
        try:
            return func(calling_obj, *args, **kwargs)
        except OSError as error:
            raise error from None

    func_wrapper.__name__ = getattr(func, "__name__", "func_wrapper")
    func_wrapper.__doc__ = getattr(func, "__doc__", None)
    return func_wrapper


def encode_payload(payload):
    """A message payload as bytes: None stays None, str is UTF-8
    encoded, bytes pass through, anything else is JSON."""
    if payload is None or isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8", errors="surrogateescape")
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", errors="surrogateescape")


def encode_topic(topic):
    """A topic string as bytes (OSError EINVAL for None, TypeError for
    other types)."""
    if topic is None:
        raise OSError(22, "Topic must not be None/NULL")
    if isinstance(topic, str):
        return topic.encode("utf-8")
    if not isinstance(topic, bytes):
        raise TypeError("Topic must be a string, not {}".format(type(topic)))
    return topic


def get_treedict(in_dict, key, default=None):
    """in_dict["a"]["b"]["c"] for key "a.b.c", or default when a level
    is missing."""
    node = in_dict
    for part in key.split("."):
        try:
            node = node[part]
        except (KeyError, TypeError):
            return default
    return node


def set_treedict(in_dict, key, val):
    """in_dict["a"]["b"]["c"] = val for key "a.b.c", creating the levels
    that are missing."""
    parts = key.split(".")
    node = in_dict
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = val


def del_treedict(in_dict, key, remove_empty=False):
    """del in_dict["a"]["b"]["c"] for key "a.b.c" (KeyError if a level is
    missing); with remove_empty, levels left empty are removed too."""
    first, _, rest = key.partition(".")
    if not rest:
        del in_dict[first]
        return
    del_treedict(in_dict[first], rest, remove_empty=remove_empty)
    if remove_empty and isinstance(in_dict[first], dict) and not in_dict[first]:
        del in_dict[first]


def help_formatter(argwidth=40, raw_description=False):
    """Return an argparse formatter_class whose option column is up to
    argwidth wide; raw_description keeps the description's line breaks."""
    base = argparse.RawDescriptionHelpFormatter if raw_description else argparse.HelpFormatter

    def make(prog):
        return base(prog, max_help_position=argwidth)

    return make


class CLIMain:
    """Run a command's main function: logging set up at the level of
    $FLUX_PYCLI_LOGLEVEL (default INFO), an uncaught exception logged as
    one line (its traceback at DEBUG) with exit code 1, and sys.exit()
    at the end.

        LOGGER = logging.getLogger("flux-mytool")

        @CLIMain(LOGGER)
        def main(): ...
    """

    def __init__(self, logger=None):
        self.logger = logger if logger is not None else logging.getLogger()

    def __call__(self, main_func):
        level = int(os.environ.get("FLUX_PYCLI_LOGLEVEL", logging.INFO))
        logging.basicConfig(level=level, format="%(name)s: %(levelname)s: %(message)s")
        code = 0
        try:
            main_func()
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # pylint: disable=broad-except
            code = 1
            msg = getattr(exc, "strerror", None) or str(exc)
            if getattr(exc, "filename", None):
                msg += ": '%s'" % exc.filename
            self.logger.error(msg)
            self.logger.debug(traceback.format_exc())
        finally:
            logging.shutdown()
        sys.exit(code)


class Fileref(dict):
    """One file of an RFC 37 file archive (the jobspec's
    attributes.system.files): a dict with mode, data and encoding.

    data a dict: stored as is (JSON content, no encoding). With encoding
    ("utf-8" or "base64"): data is the content, stored verbatim. Otherwise
    data is a local path, read now: its mode and size are kept, and the
    content is utf-8 text when it decodes so, else base64."""

    def __init__(self, data, perms=0o600, encoding=None):
        ref = {"mode": perms | stat.S_IFREG}
        if isinstance(data, dict):
            ref["data"] = data
        elif encoding is not None:
            if encoding not in ("base64", "utf-8"):
                raise ValueError("invalid encoding: %s" % encoding)
            ref["data"] = data
            ref["encoding"] = encoding
        else:
            info = os.stat(data)
            with open(data, "rb") as f:
                content = f.read()
            ref["size"] = info.st_size
            ref["mode"] = info.st_mode
            try:
                ref["data"] = content.decode("utf-8")
                ref["encoding"] = "utf-8"
            except UnicodeDecodeError:
                ref["data"] = base64.b64encode(content).decode("ascii")
                ref["encoding"] = "base64"
        super().__init__(ref)
