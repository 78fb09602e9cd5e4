"""Futures: results that arrive later, for RPCs and the calls built on them.

A future holds a queue of results. ``get()`` waits for the first (reading
and dispatching messages from the handle's connection meanwhile),
``reset()`` discards it so a streaming future's next result can be had,
and ``then(cb)`` arranges for ``cb(future)`` to be called from the
handle's reactor (``Flux.reactor_run()``) as results arrive.

Errors are raised as :class:`OSError` with the errno and message of the
service's error response.
"""

import collections
import errno
import os
import time

_UNSET = object()


def _timeout_error():
    return OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT))


class Future:
    """Base class of all futures.

    Subclasses push results with ``_fulfill(value)`` or
    ``_fulfill_error(exc)``; ``final`` says no more results will follow.
    """

    def __init__(self, flux_handle, streaming=False):
        self._handle = flux_handle
        self._results = collections.deque()
        self._streaming = streaming
        self._final = False
        self._then = None
        self._stopped = False
        self._delivered = False
        self._serial = 0

    # -- producer side -------------------------------------------------
    def _fulfill(self, value, final=None):
        self._results.append((value, None))
        if final is None:
            final = not self._streaming
        if final:
            self._final = True

    def _fulfill_error(self, exc, final=True):
        self._results.append((None, exc))
        if final:
            self._final = True

    # -- consumer side -------------------------------------------------
    def get_flux(self):
        """The Flux handle this future belongs to."""
        return self._handle

    def is_ready(self):
        """True if a result (or error) is available without waiting."""
        return bool(self._results)

    def wait_for(self, timeout=-1.0):
        """Wait until a result is available.

        timeout is in seconds (negative or None: forever). Raises
        OSError(ETIMEDOUT) when it expires. Returns the future.
        """
        if self._results:
            return self
        if timeout is None or timeout < 0:
            deadline = None
        else:
            deadline = time.monotonic() + timeout
        while not self._results:
            if self._final:
                # every result was consumed by reset(): nothing more comes
                raise OSError(errno.ENODATA, "no more results (future was reset)")
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _timeout_error()
            self._handle._pump(remaining)
        return self

    def _result(self):
        self.wait_for()
        value, exc = self._results[0]
        if exc is not None:
            raise exc
        return value

    def get(self):
        """The result; raises OSError if it is an error."""
        return self._result()

    def reset(self):
        """Discard the current result so the next one can be waited for."""
        if self._results:
            self._results.popleft()
        self._delivered = False
        self._serial += 1

    def then(self, callback, *args, **kwargs):
        """Call callback(future, *args, **kwargs) from the reactor for each
        result. A streaming future's result is reset after its callback
        returns unless the callback reset it itself."""
        self._then = (callback, args, kwargs)
        self._stopped = False
        self._handle._add_then(self)
        return self

    def stop(self):
        """Stop calling the then() callback."""
        self._stopped = True
        self._handle._remove_then(self)

    # -- reactor -----------------------------------------------------------
    def _reactor_ready(self):
        return (
            self._then is not None
            and not self._stopped
            and bool(self._results)
            and not self._delivered
        )

    def _reactor_active(self):
        if self._then is None or self._stopped:
            return False
        if not self._final:
            return True
        # final result queued: active until its callback ran
        return bool(self._results) and not (
            len(self._results) == 1 and self._delivered
        )

    def _reactor_call(self):
        callback, args, kwargs = self._then
        serial = self._serial
        self._delivered = True
        callback(self, *args, **kwargs)
        if self._streaming and serial == self._serial and self._results:
            # streaming and not reset by the callback: move on
            last = self._final and len(self._results) == 1
            if not last:
                self.reset()

