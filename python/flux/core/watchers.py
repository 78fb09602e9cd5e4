"""Reactor watchers: message watchers (events, e.g. after
``event_subscribe``) and timers. They run from ``Flux.reactor_run()``."""

import fnmatch
import time

from flux import constants as C


class Watcher:
    """Base class: start(), stop(), destroy(); also a context manager."""

    def __init__(self, flux_handle, callback, args):
        self.handle = flux_handle
        self.callback = callback
        self.args = args
        self.active = False

    def start(self):
        self.active = True
        self.handle._add_watcher(self)
        return self

    def stop(self):
        self.active = False
        self.handle._remove_watcher(self)
        return self

    def destroy(self):
        self.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False


class MessageWatcher(Watcher):
    """Calls callback(handle, watcher, msg, args) for each received message
    matching type_mask and topic_glob (and match_tag for responses)."""

    def __init__(
        self,
        flux_handle,
        type_mask,
        callback,
        topic_glob="*",
        args=None,
        match_tag=C.FLUX_MATCHTAG_NONE,
    ):
        super().__init__(flux_handle, callback, args)
        self.type_mask = type_mask
        self.topic_glob = topic_glob or "*"
        self.match_tag = match_tag

    def matches(self, msg):
        if not msg.type & self.type_mask:
            return False
        if self.match_tag != C.FLUX_MATCHTAG_NONE and msg.matchtag != self.match_tag:
            return False
        return fnmatch.fnmatchcase(msg.topic or "", self.topic_glob)

    def _call(self, msg):
        self.callback(self.handle, self, msg, self.args)


class TimerWatcher(Watcher):
    """Calls callback(handle, watcher, revents, args) after `after` seconds,
    then every `repeat` seconds if repeat > 0."""

    def __init__(self, flux_handle, after, callback, repeat=0.0, args=None):
        super().__init__(flux_handle, callback, args)
        self.after = float(after)
        self.repeat = float(repeat)
        self.deadline = None

    def start(self):
        self.deadline = time.monotonic() + self.after
        return super().start()

    def reset(self, after=None, repeat=None):
        if after is not None:
            self.after = float(after)
        if repeat is not None:
            self.repeat = float(repeat)
        if self.active:
            self.deadline = time.monotonic() + self.after

    def _due(self, now):
        return self.active and self.deadline is not None and now >= self.deadline

    def _call(self):
        if self.repeat > 0:
            self.deadline = time.monotonic() + self.repeat
        else:
            self.stop()
        self.callback(self.handle, self, C.FLUX_POLLIN, self.args)
