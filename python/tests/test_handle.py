"""The Flux handle against a real instance: connecting, RPCs (single,
streaming, then/reactor), errors, events, watchers."""

import errno
import os
import time
import unittest

import fluxtest

import flux
from flux import constants as C
from flux.core.handle import uri_to_path


class TestConnect(fluxtest.InstanceTestCase):
    def test_flux_uri_env(self):
        old = os.environ.get("FLUX_URI")
        os.environ["FLUX_URI"] = self.inst.uri
        try:
            h = flux.Flux()
            self.assertEqual(h.attr_get("size"), "2")
            h.close()
        finally:
            if old is None:
                del os.environ["FLUX_URI"]
            else:
                os.environ["FLUX_URI"] = old

    def test_uri_forms(self):
        path = uri_to_path(self.inst.uri)
        self.assertTrue(path.endswith("/local"))
        for url in (path, "local://" + path, "local://" + os.path.dirname(path)):
            with flux.Flux(url) as h:
                self.assertEqual(h.get_rank(), 0)

    def test_uri_bytes_and_pathlike(self):
        # Parsl hands flux.Flux() the URI as bytes read from a socket
        with flux.Flux(self.inst.uri.encode()) as h:
            self.assertEqual(h.attr_get("size"), "2")
            self.assertEqual(h.url, self.inst.uri)
        import pathlib  # pylint: disable=import-outside-toplevel

        with flux.Flux(pathlib.Path(uri_to_path(self.inst.uri))) as h:
            self.assertEqual(h.get_rank(), 0)
        with self.assertRaises(TypeError):
            flux.Flux(42)
        with self.assertRaises(OSError) as cm:
            flux.Flux(b"local:///\xff")
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_no_uri(self):
        old = os.environ.pop("FLUX_URI", None)
        try:
            with self.assertRaises(OSError) as cm:
                flux.Flux()
            self.assertEqual(cm.exception.errno, errno.ENOENT)
        finally:
            if old is not None:
                os.environ["FLUX_URI"] = old

    def test_bad_uri(self):
        with self.assertRaises(OSError) as cm:
            flux.Flux("local:///nonexistent/socket")
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        with self.assertRaises(OSError) as cm:
            flux.Flux("ssh://host/path")
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_closed_handle(self):
        h = flux.Flux(self.inst.uri)
        h.close()
        with self.assertRaises(OSError):
            h.rpc("attr.get", {"name": "size"}).get()


class TestConnectionLost(unittest.TestCase):
    def test_broker_exit_fails_waiters(self):
        inst = fluxtest.Instance(1)
        try:
            h = flux.Flux(inst.uri)
            h.event_subscribe("pytest.lost")
            fut = h.rpc(
                "job-info.eventlog-watch",
                {"id": 1, "path": "eventlog", "flags": 0},
                flags=C.FLUX_RPC_STREAMING,
            )
        finally:
            inst.stop()
        with self.assertRaises(OSError):
            h.event_recv(timeout=30)
        with self.assertRaises(OSError):
            fut.wait_for(30).get()
        with self.assertRaises(OSError):
            h.rpc("attr.get", {"name": "size"})
        h.close()


class TestRPC(fluxtest.InstanceTestCase):
    def setUp(self):
        super().setUp()
        # the streaming tests list jobs: have at least one (a stream of
        # no jobs is only its end)
        if not self.h.rpc("job-list.list", {"max_entries": 1, "attrs": []}).get()["jobs"]:
            self.assertEqual(self.inst.flux("run", "true").returncode, 0)

    def test_get_and_get_str(self):
        fut = self.h.rpc("attr.get", {"name": "size"})
        self.assertEqual(fut.get()["value"], "2")
        self.assertIn('"value"', fut.get_str())
        self.assertTrue(fut.is_ready())

    def test_string_payload_and_nodeid(self):
        resp = self.h.rpc("broker.ping", '{"seq": 7, "pad": ""}', nodeid=1).get()
        self.assertEqual(resp["seq"], 7)
        self.assertEqual(resp.get("rank"), 1)

    def test_upstream(self):
        h1 = self.h
        resp = h1.rpc("attr.get", {"name": "rank"}, nodeid=C.FLUX_NODEID_UPSTREAM)
        with self.assertRaises(OSError):
            # rank 0 has no upstream
            resp.get()

    def test_error_is_oserror_with_message(self):
        with self.assertRaises(OSError) as cm:
            self.h.rpc("attr.get", {"name": "no-such-attribute"}).get()
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertTrue(cm.exception.strerror)
        with self.assertRaises(OSError) as cm:
            self.h.rpc("no-such-service.method", {}).get()
        self.assertEqual(cm.exception.errno, errno.ENOSYS)
        self.assertIn("no-such-service", str(cm.exception))

    def test_many_concurrent(self):
        futs = [self.h.rpc("attr.get", {"name": n}) for n in ("size", "rank") * 50]
        for fut in reversed(futs):
            self.assertIn(fut.get()["value"], ("0", "2"))
        self.assertEqual(self.h._rpcs, {})

    def test_streaming_iteration(self):
        fut = self.h.rpc(
            "job-list.list",
            {"max_entries": 10, "attrs": [], "since": 0.0},
            flags=C.FLUX_RPC_STREAMING,
        )
        chunks = list(fut)
        # an instance without jobs streams no page at all, just the end
        # (flux-core's job-list)
        for chunk in chunks:
            self.assertIn("jobs", chunk)
        # the stream has ended: ENODATA
        with self.assertRaises(OSError) as cm:
            fut.get()
        self.assertEqual(cm.exception.errno, errno.ENODATA)

    def test_streaming_get_reset(self):
        fut = self.h.rpc(
            "job-list.list",
            {"max_entries": 10, "attrs": [], "since": 0.0},
            flags=C.FLUX_RPC_STREAMING,
        )
        n = 0
        while True:
            try:
                fut.get()
            except OSError as exc:
                self.assertEqual(exc.errno, errno.ENODATA)
                break
            n += 1
            fut.reset()
        self.assertGreaterEqual(n, 1)

    def test_noresponse(self):
        fut = self.h.rpc("attr.get", {"name": "size"}, flags=C.FLUX_RPC_NORESPONSE)
        self.assertIsNone(fut.get())
        self.assertEqual(self.h.attr_get("size"), "2")

    def test_then_and_reactor(self):
        results = []

        def cb(fut, tag):
            results.append((tag, fut.get()["value"]))

        self.h.rpc("attr.get", {"name": "size"}).then(cb, "a")
        self.h.rpc("attr.get", {"name": "rank"}).then(cb, tag="b")
        self.assertEqual(self.h.reactor_run(), 0)
        self.assertEqual(sorted(results), [("a", "2"), ("b", "0")])

    def test_then_streaming(self):
        got = []

        def cb(fut):
            try:
                got.append(fut.get())
            except OSError as exc:
                got.append(exc.errno)
                return
            fut.reset()

        self.h.rpc(
            "job-list.list",
            {"max_entries": 5, "attrs": [], "since": 0.0},
            flags=C.FLUX_RPC_STREAMING,
        ).then(cb)
        self.h.reactor_run()
        self.assertEqual(got[-1], errno.ENODATA)
        self.assertIn("jobs", got[0])

    def test_then_exception_propagates(self):
        def cb(fut):
            raise RuntimeError("boom")

        self.h.rpc("attr.get", {"name": "size"}).then(cb)
        with self.assertRaises(RuntimeError):
            self.h.reactor_run()

    def test_wait_for_timeout(self):
        # an eventlog watch of a nonexistent key waits forever
        fut = self.h.rpc(
            "job-info.eventlog-watch",
            {"id": 1, "path": "eventlog", "flags": 0},
            flags=C.FLUX_RPC_STREAMING,
        )
        try:
            fut.wait_for(0.2)
        except OSError as exc:
            self.assertEqual(exc.errno, errno.ETIMEDOUT)
        else:
            # the service may also refuse the unknown job at once
            with self.assertRaises(OSError):
                fut.get()


class TestEvents(fluxtest.InstanceTestCase):
    def test_subscribe_send_recv(self):
        self.h.event_subscribe("pytest.ev")
        self.h.event_send("pytest.ev.one", {"x": 1})
        self.h.event_send("pytest.ev.two", "plain")
        self.h.event_send("pytest.ev.three")
        msg = self.h.event_recv(timeout=10)
        self.assertEqual(msg.topic, "pytest.ev.one")
        self.assertEqual(msg.payload, {"x": 1})
        msg = self.h.event_recv(timeout=10)
        self.assertEqual(msg.topic, "pytest.ev.two")
        self.assertEqual(msg.payload_str, "plain")
        msg = self.h.event_recv("pytest.ev.three", timeout=10)
        self.assertIsNone(msg.payload)
        self.assertGreater(msg.seq, 0)
        self.h.event_unsubscribe("pytest.ev")

    def test_other_handle_and_prefix(self):
        other = flux.Flux(self.inst.uri)
        try:
            self.h.event_subscribe("pytest.pre")
            other.event_send("pytest.other", {"n": 0})  # not subscribed
            other.event_send("pytest.prefix.x", {"n": 1})
            msg = self.h.event_recv(timeout=10)
            self.assertEqual((msg.topic, msg.payload), ("pytest.prefix.x", {"n": 1}))
            with self.assertRaises(OSError) as cm:
                self.h.event_recv(timeout=0.2)
            self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)
        finally:
            other.close()

    def test_msg_watcher_and_timer(self):
        seen = []
        self.h.event_subscribe("pytest.watch")

        def on_event(h, w, msg, args):
            seen.append((msg.topic, msg.payload, args))
            if len(seen) == 3:
                h.reactor_stop()

        ticks = []

        def on_timer(h, w, revents, args):
            ticks.append(time.monotonic())
            h.event_send("pytest.watch.%d" % len(ticks), {"i": len(ticks)})
            if len(ticks) == 3:
                w.stop()

        watcher = self.h.msg_watcher_create(
            on_event, C.FLUX_MSGTYPE_EVENT, "pytest.watch.*", args="arg"
        ).start()
        timer = self.h.timer_watcher_create(0.01, on_timer, repeat=0.02).start()
        deadline = self.h.timer_watcher_create(20, lambda h, *a: h.reactor_stop()).start()
        self.h.reactor_run()
        watcher.stop()
        timer.stop()
        deadline.stop()
        self.assertEqual(
            seen,
            [("pytest.watch.%d" % i, {"i": i}, "arg") for i in (1, 2, 3)],
        )

    def test_reactor_returns_without_watchers(self):
        self.assertEqual(self.h.reactor_run(), 0)


class TestService(fluxtest.InstanceTestCase):
    """A Python service: service_register, requests through a message
    watcher, respond / respond_error, answered to another handle."""

    def serve(self, ready, errors):
        h = flux.Flux(self.inst.uri)
        try:
            h.service_register("pytestsvc").get()

            def on_request(handle, _watcher, msg, _args):
                method = msg.topic.split(".", 1)[1]
                if method == "echo":
                    handle.respond(msg, {"got": msg.payload, "userid": msg.userid})
                elif method == "fail":
                    handle.respond_error(msg, errno.EPERM, "pytestsvc says no")
                elif method == "stream":
                    for i in range(3):
                        handle.respond(msg, {"i": i})
                    handle.respond_error(msg, errno.ENODATA)
                elif method == "quit":
                    handle.respond(msg)
                    handle.reactor_stop()
                else:
                    handle.respond_error(msg, errno.ENOSYS)

            w = h.msg_watcher_create(on_request, C.FLUX_MSGTYPE_REQUEST, "pytestsvc.*")
            w.start()
            ready.set()
            h.reactor_run()
            w.stop()
            h.service_unregister("pytestsvc").get()
        except Exception as exc:  # pylint: disable=broad-except
            errors.append(exc)
            ready.set()
        finally:
            h.close()

    def test_register_serve_respond(self):
        import threading  # pylint: disable=import-outside-toplevel

        ready = threading.Event()
        errors = []
        t = threading.Thread(target=self.serve, args=(ready, errors), daemon=True)
        t.start()
        self.assertTrue(ready.wait(30))
        self.assertEqual(errors, [])
        try:
            resp = self.h.rpc("pytestsvc.echo", {"x": [1, 2]}).get()
            self.assertEqual(resp, {"got": {"x": [1, 2]}, "userid": os.getuid()})
            with self.assertRaises(OSError) as cm:
                self.h.rpc("pytestsvc.fail").get()
            self.assertEqual(cm.exception.errno, errno.EPERM)
            self.assertEqual(cm.exception.strerror, "pytestsvc says no")
            got = list(self.h.rpc("pytestsvc.stream", flags=C.FLUX_RPC_STREAMING))
            self.assertEqual(got, [{"i": 0}, {"i": 1}, {"i": 2}])
            with self.assertRaises(OSError) as cm:
                self.h.rpc("pytestsvc.other").get()
            self.assertEqual(cm.exception.errno, errno.ENOSYS)
            # the name is taken while it is registered
            with self.assertRaises(OSError) as cm:
                self.h.service_register("pytestsvc").get()
            self.assertEqual(cm.exception.errno, errno.EEXIST)
        finally:
            self.h.rpc("pytestsvc.quit").get()
            t.join(30)
        self.assertEqual(errors, [])
        # unregistered: nobody serves it any more
        with self.assertRaises(OSError) as cm:
            self.h.rpc("pytestsvc.echo").get()
        self.assertEqual(cm.exception.errno, errno.ENOSYS)
        with self.assertRaises(ValueError):
            self.h.service_register("a.b")


class TestLog(fluxtest.InstanceTestCase):
    def test_log_reaches_dmesg(self):
        import syslog  # pylint: disable=import-outside-toplevel

        self.h.log(syslog.LOG_ERR, "pytest log line %s 100%")
        self.h.attr_get("size")  # a round trip after the one-way log.append
        out = self.inst.flux("dmesg")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = [l for l in out.stdout.decode().splitlines() if "pytest log line %s 100%" in l]
        self.assertEqual(len(lines), 1, out.stdout.decode())
        self.assertIn(".err[0]", lines[0])
        with self.assertRaises(ValueError):
            self.h.log(9, "bad level")


if __name__ == "__main__":
    unittest.main()
