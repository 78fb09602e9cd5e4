"""A status line kept on the last line of a terminal (flux.progress in
flux-core), as used by tools such as src/test/throughput.py:

    bar = Bottombar(lambda bb, width: "done: %d" % bb.count, count=0).start()
    bar.update(count=1)
    bar.stop()

On a terminal the line is redrawn in place with VT100 escapes (a scroll
region that leaves the last row to the bar); otherwise nothing is drawn
until stop(), which prints the final line.
"""

import atexit
import datetime
import shutil
import sys
import time


class ElapsedTime(float):
    """Seconds since start(); .dt is the same as a datetime.timedelta."""

    @property
    def dt(self):  # pylint: disable=invalid-name
        return datetime.timedelta(seconds=round(self))


class Bottombar:
    """A status line: formatter(bar, width) returns its text. Extra
    keyword arguments become attributes of the bar (update() changes
    them); bar.elapsed is the ElapsedTime since start(). The default
    formatter prints them as key=value."""

    def __init__(self, formatter=None, **kwargs):
        self.formatter = formatter if formatter is not None else self._format
        self.kwargs = kwargs
        self.size = None
        self._running = False
        self._t0 = None
        self._stream = sys.stdout

    def __getattr__(self, attr):
        if attr == "elapsed":
            t0 = self.__dict__.get("_t0")
            return ElapsedTime(0.0 if t0 is None else time.time() - t0)
        try:
            return self.__dict__["kwargs"][attr]
        except KeyError:
            raise AttributeError(attr) from None

    def _format(self, _bar, _width):
        return " ".join("%s=%s" % (k, v) for k, v in self.kwargs.items())

    def _width(self):
        return (self.size or shutil.get_terminal_size()).columns

    def __str__(self):
        return self.formatter(self, self._width())

    def _tty(self):
        try:
            return self._stream.isatty()
        except (AttributeError, ValueError):
            return False

    def _write(self, text):
        self._stream.write(text)
        self._stream.flush()

    def redraw(self):
        """Draw the line again (on a terminal)."""
        if not self._tty():
            return
        size = shutil.get_terminal_size()
        if size != self.size:
            self.size = size
            # scroll region: every row but the last
            self._write("\0337\033[r\0338\033D\033M\0337\033[1;%dr\0338" % (size.lines - 1))
        self._write("\0337\033[%d;1H\033[2K\033[?7l\033[0m%s\033[?7h\0338" % (size.lines, self))

    def start(self):
        """Start timing and drawing; returns the bar."""
        self._running = True
        self._t0 = time.time()
        self.redraw()
        atexit.register(self.stop)
        return self

    def stop(self):
        """Stop drawing: restore the terminal and print the final line."""
        if not self._running:
            return
        self._running = False
        atexit.unregister(self.stop)
        if self._tty() and self.size is not None:
            self._write("\0337\033[%d;1H\033[K\033[r\0338" % self.size.lines)
        self._write("%s\n" % self)

    def update(self, **kwargs):
        """Change attributes and redraw."""
        self.kwargs.update(kwargs)
        if self._running:
            self.redraw()
