"""The Flux handle: a connection to a broker's local connector socket.

The local connector protocol: connect to the broker's UNIX socket, read
one byte (0: accepted, else an errno), then exchange stream-framed RFC 3
messages (see flux.core.message).

A handle is meant for one thread. Messages are read from the socket only
while the caller waits (``Future.get()``, ``event_recv()``,
``reactor_run()``); responses are matched to RPCs by matchtag, events
are queued for ``event_recv()`` and message watchers.
"""

import collections
import errno
import json
import fnmatch
import os
import select
import socket
import stat
import sys
import threading
import time

from flux import constants as C
from flux.core.message import Message, StreamDecoder
from flux.core.rpc import RPC
from flux.core.watchers import MessageWatcher, TimerWatcher

_MATCHTAG_MAX = (1 << 24) - 1
_RECV_SIZE = 1 << 16


def uri_to_path(uri):
    """The socket path of a Flux URI: "local:///path/to/socket",
    "local:///rundir" (a directory holding a socket named "local"), or a
    bare path."""
    if not uri:
        raise OSError(errno.EINVAL, "empty Flux URI")
    path = uri
    if "://" in uri:
        scheme, path = uri.split("://", 1)
        if scheme != "local":
            raise OSError(
                errno.EINVAL,
                "URI %r: unsupported scheme %r (only local:// is supported)"
                % (uri, scheme),
            )
    if not path:
        raise OSError(errno.EINVAL, "URI %r: empty path" % uri)
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            path = path.rstrip("/") + "/local"
    except OSError:
        pass
    return path


class Flux:
    """A handle on a Flux instance.

    ``Flux()`` connects to $FLUX_URI; ``Flux(url)`` to the given URI
    ("local:///path/to/socket" or a path).
    """

    def __init__(self, url=None, flags=0):
        self._sock = None
        self._error = None
        if url is None:
            url = os.environ.get("FLUX_URI")
            if not url:
                raise OSError(
                    errno.ENOENT,
                    "FLUX_URI is not set: run inside a Flux instance "
                    "(flux start, flux alloc) or pass a URI to flux.Flux()",
                )
        if isinstance(url, (bytes, bytearray)):
            # flux-core accepts the URI as bytes (Parsl passes one it
            # received from a socket)
            try:
                url = bytes(url).decode()
            except UnicodeDecodeError:
                raise OSError(errno.EINVAL, "Flux URI %r is not valid UTF-8" % (url,)) from None
        elif isinstance(url, os.PathLike):
            url = os.fspath(url)
        if not isinstance(url, str):
            raise TypeError("Flux URI must be a str or bytes, not %s" % type(url).__name__)
        self.url = url
        self.flags = flags
        self._path = uri_to_path(url)
        self._sock = self._connect(self._path)
        self._decoder = StreamDecoder()
        self._send_lock = threading.Lock()
        self._test_creds = _testing_creds()
        self._next_tag = 1
        self._rpcs = {}
        self._unclaimed = collections.deque()
        self._thens = []
        self._watchers = []
        self._attrs = {}
        self._reactor_stop = False
        self._reactor_error = None
        self.aux_txn = None  # the KVS transaction of flux.kvs.put()

    @staticmethod
    def _connect(path):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        delay = 0.008
        for attempt in range(6):
            try:
                sock.connect(path)
                break
            except OSError as exc:
                if attempt == 5 or exc.errno not in (
                    errno.ENOENT,
                    errno.ECONNREFUSED,
                    errno.EAGAIN,
                ):
                    sock.close()
                    raise OSError(
                        exc.errno, "connect to %s: %s" % (path, os.strerror(exc.errno))
                    ) from None
                time.sleep(delay)
                delay *= 2
        try:
            auth = sock.recv(1)
        except OSError:
            sock.close()
            raise
        if not auth:
            sock.close()
            raise OSError(
                errno.ECONNRESET, "connect to %s: broker closed the connection" % path
            )
        if auth[0] != 0:
            sock.close()
            raise OSError(
                auth[0],
                "connect to %s: broker refused connection: %s"
                % (path, os.strerror(auth[0])),
            )
        return sock

    # -- lifetime ----------------------------------------------------------
    def close(self):
        """Close the connection; pending RPCs fail."""
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._lost(OSError(errno.EBADF, "Flux handle is closed"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        sock = getattr(self, "_sock", None)
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    @property
    def fd(self):
        """The connection's file descriptor (readable when messages wait)."""
        return self._sock.fileno() if self._sock else -1

    def _lost(self, exc):
        if self._error is not None:
            return
        self._error = exc
        rpcs = list(self._rpcs.values())
        self._rpcs.clear()
        for rpc in rpcs:
            rpc._fail(exc)

    # -- sending and receiving ---------------------------------------------
    def send(self, msg):
        """Send a Message as is."""
        if self._error is not None:
            raise OSError(self._error.errno, self._error.strerror)
        if self._test_creds is not None and msg.userid == C.FLUX_USERID_UNKNOWN:
            msg.userid, msg.rolemask = self._test_creds
        data = msg.encode_stream()
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError as exc:
                err = OSError(exc.errno, "send %s: %s" % (msg.topic, exc.strerror))
                self._lost(err)
                raise err from None

    def _pump(self, timeout=None):
        """Read and dispatch messages, waiting up to timeout seconds (None:
        forever) for the first. Returns True if anything was dispatched or
        the connection ended."""
        if self._error is not None:
            raise OSError(self._error.errno, self._error.strerror)
        msg = self._decoder.next_message()
        if msg is not None:
            self._dispatch(msg)
            self._drain()
            return True
        if timeout is not None and timeout < 0:
            timeout = 0
        try:
            ready, _, _ = select.select([self._sock], [], [], timeout)
        except InterruptedError:
            return False
        if not ready:
            return False
        return self._read_some()

    def _read_some(self):
        try:
            data = self._sock.recv(_RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self._lost(OSError(exc.errno, "broker connection: %s" % exc.strerror))
            return True
        if not data:
            self._lost(OSError(errno.ECONNRESET, "broker closed the connection"))
            return True
        self._decoder.feed(data)
        self._drain()
        return True

    def _drain(self):
        try:
            while True:
                msg = self._decoder.next_message()
                if msg is None:
                    return
                self._dispatch(msg)
        except OSError as exc:
            self._lost(exc)

    def _poll(self):
        """Dispatch whatever has arrived, without waiting."""
        while self._error is None and self._pump(0):
            pass

    def _dispatch(self, msg):
        if msg.type == C.FLUX_MSGTYPE_RESPONSE:
            rpc = self._rpcs.get(msg.matchtag)
            if rpc is None:
                return  # stale response: the RPC is gone
            if rpc._response(msg):
                self._rpcs.pop(msg.matchtag, None)
        elif msg.type in (C.FLUX_MSGTYPE_EVENT, C.FLUX_MSGTYPE_REQUEST):
            self._unclaimed.append(msg)

    def recv(self, type_mask=C.FLUX_MSGTYPE_ANY, match_tag=C.FLUX_MATCHTAG_NONE,
             topic_glob=None, timeout=None):
        """Receive the next event or request message not claimed by an RPC
        (filtered by type_mask and topic_glob). timeout in seconds (None:
        forever) raises OSError(ETIMEDOUT)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for msg in self._unclaimed:
                if not msg.type & type_mask:
                    continue
                if topic_glob and not fnmatch.fnmatchcase(msg.topic or "", topic_glob):
                    continue
                self._unclaimed.remove(msg)
                return msg
            if self._error is not None:
                raise OSError(self._error.errno, self._error.strerror)
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT))
            self._pump(remaining)

    # -- RPC ---------------------------------------------------------------
    def _register_rpc(self, rpc):
        if self._error is not None:
            raise OSError(self._error.errno, self._error.strerror)
        for _ in range(_MATCHTAG_MAX):
            tag = self._next_tag
            self._next_tag = tag + 1 if tag < _MATCHTAG_MAX else 1
            if tag not in self._rpcs:
                self._rpcs[tag] = rpc
                return tag
        raise OSError(errno.EAGAIN, "out of matchtags")

    def _unregister_rpc(self, tag):
        self._rpcs.pop(tag, None)

    def rpc_send(self, topic, payload=None, nodeid=C.FLUX_NODEID_ANY, flags=0):
        """Send a request and wait for its response; return the decoded
        payload (None if it has none). The 2018 API (seed 004).

        rpc_send("job.submit", json.dumps({"nnodes":, "ntasks":,
        "walltime":, "cmdline": [...]})), 2018's job request, submits the
        job as today's flux.job.submit() would and answers {"jobid",
        "state", "kvs_dir"}."""
        if topic == "job.submit":
            from flux.job.legacy import submit_jobreq  # pylint: disable=import-outside-toplevel

            return submit_jobreq(self, payload)
        resp = self.rpc(topic, payload, nodeid, flags).get_str()
        if not resp:
            return None
        return json.loads(resp)

    def rpc(self, topic, payload=None, nodeid=C.FLUX_NODEID_ANY, flags=0):
        """Send a request and return its RPC future.

        payload: a dict/list (sent as JSON), a str (sent as is), bytes
        (raw), or None. nodeid: a rank, FLUX_NODEID_ANY or
        FLUX_NODEID_UPSTREAM. flags: FLUX_RPC_STREAMING and/or
        FLUX_RPC_NORESPONSE.
        """
        return RPC(self, topic, payload, nodeid, flags)

    def _rpc_compact(self, topic, payload=None, nodeid=C.FLUX_NODEID_ANY, flags=0):
        """An RPC whose JSON payload is encoded compactly, as flux-core's C
        API does for the calls the bindings make on the user's behalf."""
        return RPC(self, topic, payload, nodeid, flags, _compact=True)

    # -- events ------------------------------------------------------------
    def event_subscribe(self, topic):
        """Subscribe to events whose topic starts with topic."""
        self._rpc_compact("local.sub", {"topic": topic}).get()

    def event_unsubscribe(self, topic):
        """Cancel a subscription made with event_subscribe(topic)."""
        self._rpc_compact("local.unsub", {"topic": topic}).get()
        for msg in list(self._unclaimed):
            if msg.type == C.FLUX_MSGTYPE_EVENT and (msg.topic or "").startswith(topic):
                if not any(
                    w.active and isinstance(w, MessageWatcher) and w.matches(msg)
                    for w in self._watchers
                ):
                    self._unclaimed.remove(msg)

    def event_create(self, topic, payload=None):
        """An event Message (not sent)."""
        msg = Message(C.FLUX_MSGTYPE_EVENT, topic)
        msg.enable_routes()
        if payload is not None:
            msg.payload = payload
        return msg

    def event_send(self, topic, payload=None, flags=0):
        """Publish an event. payload: dict/list (JSON), str or None.
        flags: FLUX_MSGFLAG_PRIVATE to restrict it to the instance owner
        and the sender."""
        msg = self.event_create(topic, payload)
        if flags & C.FLUX_MSGFLAG_PRIVATE:
            msg.flags |= C.FLUX_MSGFLAG_PRIVATE
        self.send(msg)

    def event_recv(self, topic=None, payload=None, timeout=None):
        """Wait for the next event (whose topic matches the glob topic, if
        given) received on a subscription, and return it as a Message:
        ``msg.topic``, ``msg.payload`` (decoded JSON), ``msg.payload_str``.
        timeout in seconds (None: forever) raises OSError(ETIMEDOUT)."""
        return self.recv(C.FLUX_MSGTYPE_EVENT, topic_glob=topic, timeout=timeout)

    # -- logging ---------------------------------------------------------------
    def log(self, level, fstring):
        """Append a message to the broker's log (flux dmesg) at syslog
        severity level (syslog.LOG_ERR ...), under the program's name.
        The message is sent as is (no % formatting)."""
        if not isinstance(level, int) or not 0 <= level <= 7:
            raise ValueError("log level must be a syslog severity 0-7, not %r" % (level,))
        name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        self._rpc_compact(
            "log.append",
            {"severity": level, "name": name, "message": str(fstring), "timestamp": time.time()},
            flags=C.FLUX_RPC_NORESPONSE,
        )

    # -- services ------------------------------------------------------------
    def service_register(self, name):
        """Ask the broker to route requests for topics "name.*" to this
        handle; returns the service.add RPC (get() raises OSError(EEXIST)
        if the name is taken). Receive the requests with
        msg_watcher_create(cb, FLUX_MSGTYPE_REQUEST, "name.*") or recv(),
        answer them with respond() / respond_error()."""
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError("service name must be a non-empty string without '.'")
        return self._rpc_compact("service.add", {"service": name})

    def service_unregister(self, name):
        """Stop routing requests for "name.*" here; returns the
        service.remove RPC."""
        return self._rpc_compact("service.remove", {"service": name})

    @staticmethod
    def _response_to(message):
        if not isinstance(message, Message) or message.type != C.FLUX_MSGTYPE_REQUEST:
            raise TypeError("respond needs the request Message it answers")
        resp = Message(C.FLUX_MSGTYPE_RESPONSE, message.topic)
        resp.flags = message.flags & ~(C.FLUX_MSGFLAG_PAYLOAD | C.FLUX_MSGFLAG_NORESPONSE)
        resp._routes = list(message._routes)  # pylint: disable=protected-access
        resp.userid = message.userid
        resp.rolemask = message.rolemask
        resp.matchtag = message.matchtag
        return resp

    def respond(self, message, payload=None, *legacy):
        """Answer request message: payload a dict/list (JSON), str, bytes or
        None. Nothing is sent if the request asked for no response.

        The 2018 form respond(message, errnum, payload) (seed 004's
        modules) is accepted too: errnum 0 answers with payload, another
        answers with that error."""
        if legacy and isinstance(payload, int) and not isinstance(payload, bool):
            errnum, payload = payload, legacy[0]
            if errnum:
                self.respond_error(message, errnum, payload if isinstance(payload, str) else None)
                return
        if message.flags & C.FLUX_MSGFLAG_NORESPONSE:
            return
        resp = self._response_to(message)
        if payload is not None:
            if isinstance(payload, (bytes, bytearray)):
                resp.payload_raw = payload
            elif isinstance(payload, str):
                resp.payload_str = payload
            else:
                resp.set_json(payload, compact=True)
        self.send(resp)

    def respond_error(self, message, errnum, errstr=None):
        """Answer request message with an error: errnum and an optional
        message (the requester's OSError text). ENODATA ends a stream."""
        if message.flags & C.FLUX_MSGFLAG_NORESPONSE:
            return
        if not isinstance(errnum, int) or errnum <= 0:
            raise ValueError("errnum must be a positive errno value")
        resp = self._response_to(message)
        resp.errnum = errnum
        if errstr:
            resp.payload_str = str(errstr)
        self.send(resp)

    # -- broker attributes -------------------------------------------------
    def attr_get(self, name):
        """The value (a string) of broker attribute name."""
        if name in self._attrs:
            return self._attrs[name]
        resp = self._rpc_compact("attr.get", {"name": name}).get()
        value = resp.get("value")
        if resp.get("flags", 0) & 1:  # immutable: cache it
            self._attrs[name] = value
        return value

    def attr_set(self, name, value):
        """Set broker attribute name to value (a string)."""
        self._rpc_compact("attr.set", {"name": name, "value": str(value)}).get()
        self._attrs.pop(name, None)

    def get_rank(self):
        """The rank of the broker this handle is connected to."""
        return int(self.attr_get("rank"))

    def get_size(self):
        """The number of brokers in the instance."""
        return int(self.attr_get("size"))

    # -- reactor -----------------------------------------------------------
    def _add_then(self, fut):
        if fut not in self._thens:
            self._thens.append(fut)

    def _remove_then(self, fut):
        if fut in self._thens:
            self._thens.remove(fut)

    def _add_watcher(self, w):
        if w not in self._watchers:
            self._watchers.append(w)

    def _remove_watcher(self, w):
        if w in self._watchers:
            self._watchers.remove(w)

    def msg_watcher_create(
        self,
        callback,
        type_mask=C.FLUX_MSGTYPE_ANY,
        topic_glob="*",
        args=None,
        match_tag=C.FLUX_MATCHTAG_NONE,
    ):
        """A MessageWatcher calling callback(handle, watcher, msg, args) for
        received events (and requests) matching type_mask and topic_glob.
        Call .start() on it; it runs from reactor_run().

        The 2018 argument order msg_watcher_create(type_mask, callback,
        topic_glob, args=...) (seed 004) is accepted too."""
        if isinstance(callback, int) and callable(type_mask):
            callback, type_mask = type_mask, callback
        return MessageWatcher(self, type_mask, callback, topic_glob, args, match_tag)

    def timer_watcher_create(self, after, callback, repeat=0.0, args=None):
        """A TimerWatcher calling callback(handle, watcher, revents, args)
        after `after` seconds (then every `repeat` seconds if > 0)."""
        return TimerWatcher(self, after, callback, repeat, args)

    def _run_ready(self):
        ran = False
        for fut in list(self._thens):
            if self._reactor_stop:
                return ran
            if fut._reactor_ready():
                fut._reactor_call()
                ran = True
            if not fut._reactor_active():
                self._remove_then(fut)
        msg_watchers = [
            w for w in self._watchers if isinstance(w, MessageWatcher) and w.active
        ]
        if msg_watchers:
            for msg in list(self._unclaimed):
                if self._reactor_stop:
                    return ran
                for w in msg_watchers:
                    if w.active and w.matches(msg):
                        try:
                            self._unclaimed.remove(msg)
                        except ValueError:
                            pass
                        w._call(msg)
                        ran = True
                        break
        now = time.monotonic()
        for w in list(self._watchers):
            if self._reactor_stop:
                return ran
            if isinstance(w, TimerWatcher) and w._due(now):
                w._call()
                ran = True
        return ran

    def _reactor_active(self):
        if any(f._reactor_active() for f in self._thens):
            return True
        return any(w.active for w in self._watchers)

    def _next_timeout(self):
        deadlines = [
            w.deadline
            for w in self._watchers
            if isinstance(w, TimerWatcher) and w.active and w.deadline is not None
        ]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def get_reactor(self):
        """The handle's reactor, for reactor_run(f.get_reactor(), 0) (the
        2018 spelling): the handle runs its own, so this is the handle."""
        return self

    def reactor_run(self, reactor=None, flags=0):
        """Run then() callbacks and watchers until none is active, or until
        reactor_stop() is called. Exceptions raised by callbacks propagate.
        flags: FLUX_REACTOR_NOWAIT (do not block), FLUX_REACTOR_ONCE (block
        once). Returns 0 (or raises OSError after reactor_stop_error())."""
        self._reactor_stop = False
        self._reactor_error = None
        while True:
            self._poll()
            ran = self._run_ready()
            if self._reactor_stop:
                break
            if flags & (C.FLUX_REACTOR_ONCE | C.FLUX_REACTOR_NOWAIT) and ran:
                break
            if not self._reactor_active():
                break
            if ran:
                continue
            if flags & C.FLUX_REACTOR_NOWAIT:
                break
            if self._error is not None and not any(
                isinstance(w, TimerWatcher) and w.active for w in self._watchers
            ):
                raise OSError(self._error.errno, self._error.strerror)
            timeout = self._next_timeout()
            if self._error is not None:
                time.sleep(timeout or 0)
            else:
                self._pump(timeout)
        if self._reactor_error is not None:
            err, self._reactor_error = self._reactor_error, None
            raise OSError(err, os.strerror(err))
        return 0

    def reactor_stop(self, reactor=None):
        """Make reactor_run() return."""
        self._reactor_stop = True

    def reactor_stop_error(self, reactor=None, errnum=errno.EINVAL):
        """Make reactor_run() return by raising OSError(errnum)."""
        self._reactor_stop = True
        self._reactor_error = errnum

    def __repr__(self):
        return "Flux(%r)" % self.url


__all__ = ["Flux", "uri_to_path"]


def _testing_creds():
    """(userid, rolemask) from FLUX_HANDLE_USERID and FLUX_HANDLE_ROLEMASK,
    flux-core's hook for testing guest access (the broker honours them
    from the instance owner only), or None."""
    u = os.environ.get("FLUX_HANDLE_USERID")
    r = os.environ.get("FLUX_HANDLE_ROLEMASK")
    if u is None and r is None:
        return None
    try:
        userid = int(u, 10) if u is not None else os.getuid()
    except ValueError:
        raise OSError(errno.EINVAL, "FLUX_HANDLE_USERID=%r: not a userid" % u) from None
    try:
        rolemask = int(r, 0) if r is not None else C.FLUX_ROLE_NONE
    except ValueError:
        raise OSError(errno.EINVAL, "FLUX_HANDLE_ROLEMASK=%r: not a role mask" % r) from None
    return (userid, rolemask)
