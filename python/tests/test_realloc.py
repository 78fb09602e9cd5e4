"""Dynamic resources (RFC 51) from Python against a real 4-broker
instance: a running job grows by whole nodes (SUCCESS), a nowait request
for more than is free is denied (DENY), a waiting request is cancelled
from another handle (CANCEL), the job gives nodes back (spec_sub, then
the shell's release); and from inside a job, realloc() without a jobid
goes through the job shell."""

import errno
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

import fluxtest

import flux
import flux.job
from flux.idset import IDset
from flux.job import JobID, JobspecV1

TIMEOUT = 60

IN_JOB = """\
import json, os, sys, time
import flux
import flux.job
from flux.job import realloc_spec

out = sys.argv[1]
rank = os.environ["FLUX_TASK_RANK"]
if rank != "0":
    # a task started on a node the job grew onto; it runs until the job
    # gives the node back (its shell then stops it)
    with open(os.path.join(out, "task.%s.tmp" % rank), "w") as f:
        f.write(os.environ.get("FLUX_JOB_SIZE", ""))
    tmp = os.path.join(out, "task.%s.tmp" % rank)
    os.rename(tmp, os.path.join(out, "task." + rank))
    time.sleep(300)
    sys.exit(0)

TIMEOUT = 60
h = flux.Flux()
res = {"service": flux.job.shell_service()}

def call(fut):
    return fut.wait_for(TIMEOUT).get()

res["grow"] = call(flux.job.realloc_async(h, spec_add=realloc_spec(num_nodes=2)))
res["deny"] = call(
    flux.job.realloc_async(h, spec_add=realloc_spec(num_nodes=2), nowait=True)
)

# a request that waits, cancelled through the shell
fut = flux.job.realloc_async(h, spec_add=realloc_spec(num_nodes=2))
deadline = time.monotonic() + TIMEOUT
while True:
    try:
        flux.job.realloc_cancel(h)
        break
    except OSError as exc:
        if exc.errno != errno.ENOENT or time.monotonic() > deadline:
            raise
        time.sleep(0.05)
res["cancel"] = call(fut)

# the grown tasks started; then the job gives the 2 nodes back
deadline = time.monotonic() + TIMEOUT
want = [os.path.join(out, "task.%d" % r) for r in (1, 2)]
while not all(os.path.exists(p) for p in want):
    if time.monotonic() > deadline:
        sys.exit("the tasks on the new nodes did not start")
    time.sleep(0.05)
res["sizes"] = [open(p).read() for p in want]
res["shrink"] = call(flux.job.realloc_async(h, spec_sub=realloc_spec(num_nodes=2)))
res["release"] = call(flux.job.shell_release_async(h, res["shrink"]["R_delta_sub"]))

with open(os.path.join(out, "result.json.tmp"), "w") as f:
    json.dump(res, f)
os.rename(os.path.join(out, "result.json.tmp"), os.path.join(out, "result.json"))
"""


def ranks(R):
    """The ranks an Rv1 (dict or JSON text) names, as an IDset."""
    if isinstance(R, str):
        R = json.loads(R)
    ids = IDset()
    for entry in R["execution"]["R_lite"]:
        for rank in IDset(entry["rank"]):
            ids.set(rank)
    return ids


class TestReallocOffline(unittest.TestCase):
    """What needs no instance: specs, service names, argument checks."""

    def test_spec_nodes(self):
        js = flux.job.realloc_spec(num_nodes=2)
        self.assertIsInstance(js, JobspecV1)
        node = js.resources[0]
        self.assertEqual(node["type"], "node")
        self.assertEqual(node["count"], 2)
        self.assertTrue(node["exclusive"])
        self.assertEqual(js.environment, {})
        js = flux.job.realloc_spec(num_nodes=1, exclusive=False)
        self.assertNotIn("exclusive", js.resources[0])

    def test_spec_cores(self):
        js = flux.job.realloc_spec(num_cores=3)
        self.assertEqual(js.resources[0]["type"], "slot")
        self.assertEqual(js.resources[0]["count"], 3)
        with self.assertRaises(ValueError):
            flux.job.realloc_spec()
        with self.assertRaises(ValueError):
            flux.job.realloc_spec(num_nodes=1, num_cores=1)

    def test_shell_service(self):
        jobid = JobID("f7Kze")
        self.assertEqual(flux.job.shell_service(jobid, 1000), "1000-shell-f7Kze")
        self.assertEqual(
            flux.job.shell_service(int(jobid)), "%d-shell-f7Kze" % os.getuid()
        )
        saved = os.environ.get("FLUX_JOB_ID")
        try:
            os.environ["FLUX_JOB_ID"] = str(int(jobid))
            self.assertEqual(flux.job.shell_service(userid=5), "5-shell-f7Kze")
            del os.environ["FLUX_JOB_ID"]
            with self.assertRaises(ValueError):
                flux.job.shell_service()
        finally:
            if saved is not None:
                os.environ["FLUX_JOB_ID"] = saved
            else:
                os.environ.pop("FLUX_JOB_ID", None)

    def test_constants(self):
        self.assertEqual(
            (
                flux.job.REALLOC_SUCCESS,
                flux.job.REALLOC_DENY,
                flux.job.REALLOC_CANCEL,
                flux.job.REALLOC_UNSUPPORTED,
            ),
            (0, 1, 2, 3),
        )
        self.assertEqual(flux.job.realloc_type_name(1), "denied")

    def test_needs_a_spec(self):
        with self.assertRaises(ValueError):
            flux.job.realloc_async(None, jobid=1)


class TestRealloc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inst = fluxtest.Instance(4)

    @classmethod
    def tearDownClass(cls):
        cls.inst.stop()

    def setUp(self):
        self.h = flux.Flux(self.inst.uri)
        # cleanups run last in first: the jobs' (added later) before this
        self.addCleanup(self.h.close)

    def submit(self, command, environment=None, **kwargs):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        env.update(environment or {})
        js = JobspecV1.from_command(command, environment=env, **kwargs)
        jobid = flux.job.submit(self.h, js)
        self.addCleanup(self.finish, jobid)
        return jobid

    def finish(self, jobid):
        """Cancel jobid if it still runs and wait until it is inactive, so
        the next test has all the nodes."""
        try:
            flux.job.cancel(self.h, jobid)
        except OSError:
            pass
        return flux.job.result(self.h, jobid, timeout=TIMEOUT)

    def call(self, fut):
        return fut.wait_for(TIMEOUT).get()

    def wait_free(self, jobid, want):
        """Wait for the free event that gives the ranks want back."""
        for event in flux.job.event_watch(self.h, jobid):
            if event.name == "free" and event.context.get("ranks") == want:
                return event
        self.fail("no free event for ranks %s" % want)
        return None

    def test_grow_deny_cancel_shrink(self):
        jobid = self.submit(["sleep", "300"], num_nodes=1, exclusive=True)
        flux.job.event_wait(self.h, jobid, "start")
        spec2 = flux.job.realloc_spec(num_nodes=2)

        # SUCCESS: 2 more whole nodes, and R names 3
        resp = self.call(flux.job.realloc_async(self.h, jobid, spec_add=spec2))
        self.assertEqual(resp["type"], flux.job.REALLOC_SUCCESS, resp)
        added = ranks(resp["R_delta_add"])
        self.assertEqual(added.count(), 2, resp)
        self.assertEqual(ranks(resp["R"]).count(), 3, resp)
        for rank in added:
            self.assertIn(rank, ranks(resp["R"]))
        self.assertNotIn("R_delta_sub", resp)

        # DENY: 2 more with 1 free, nowait (a dict spec works as well)
        spec_dict = json.loads(spec2.dumps())
        resp = flux.job.realloc(self.h, jobid, spec_add=spec_dict, nowait=True)
        self.assertEqual(resp["type"], flux.job.REALLOC_DENY, resp)
        self.assertEqual(ranks(resp["R"]).count(), 3)

        # CANCEL: a waiting request, cancelled from another thread with its
        # own handle; cancel is retried while the request is not yet
        # waiting (ENOENT)
        fut = flux.job.realloc_async(self.h, jobid, spec_add=spec2)
        errors = []

        def canceller():
            try:
                with flux.Flux(self.inst.uri) as h2:
                    deadline = time.monotonic() + TIMEOUT
                    while True:
                        try:
                            flux.job.realloc_cancel(h2, jobid)
                            return
                        except OSError as exc:
                            if exc.errno != errno.ENOENT or time.monotonic() > deadline:
                                raise
                            time.sleep(0.05)
            except Exception as exc:  # pylint: disable=broad-except
                errors.append(exc)

        t = threading.Thread(target=canceller)
        t.start()
        resp = self.call(fut)
        t.join(TIMEOUT)
        self.assertEqual(errors, [])
        self.assertEqual(resp["type"], flux.job.REALLOC_CANCEL, resp)
        self.assertEqual(ranks(resp["R"]).count(), 3)
        # nothing waits any more
        with self.assertRaises(OSError) as cm:
            flux.job.realloc_cancel(self.h, jobid)
        self.assertEqual(cm.exception.errno, errno.ENOENT)

        # the future's own cancel() does the same
        fut = flux.job.realloc_async(self.h, jobid, spec_add=spec2)
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                fut.cancel().wait_for(TIMEOUT).get()
                break
            except OSError as exc:
                if exc.errno != errno.ENOENT or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.assertEqual(self.call(fut)["type"], flux.job.REALLOC_CANCEL)

        # give back one node: spec_sub, then the shell's release (from
        # outside the job, with its jobid); the scheduler gets it back
        resp = self.call(
            flux.job.realloc_async(
                self.h, jobid, spec_sub=flux.job.realloc_spec(num_nodes=1)
            )
        )
        self.assertEqual(resp["type"], flux.job.REALLOC_SUCCESS, resp)
        sub = ranks(resp["R_delta_sub"])
        self.assertEqual(sub.count(), 1, resp)
        self.call(flux.job.shell_release_async(self.h, resp["R_delta_sub"], jobid))
        self.wait_free(jobid, str(sub))
        R = self.h.rpc("job-info.lookup", {"id": int(jobid), "keys": ["R"], "flags": 0})
        now = ranks(R.wait_for(TIMEOUT).get()["R"])
        self.assertEqual(now.count(), 2)
        for rank in sub:
            self.assertNotIn(rank, now)

    def test_errors(self):
        jobid = self.submit(["sleep", "300"], num_nodes=1, exclusive=True)
        flux.job.event_wait(self.h, jobid, "start")
        # an invalid jobspec is an error, not an answer
        with self.assertRaises(OSError) as cm:
            flux.job.realloc(self.h, jobid, spec_add={"version": 1})
        self.assertEqual(cm.exception.errno, errno.EPROTO)
        # nothing waits
        with self.assertRaises(OSError) as cm:
            flux.job.realloc_cancel(self.h, jobid)
        self.assertEqual(cm.exception.errno, errno.ENOENT)

    def test_in_job_through_the_shell(self):
        out = tempfile.mkdtemp(prefix="fluxgo-pytest-realloc-")
        self.addCleanup(shutil.rmtree, out, True)
        script = os.path.join(out, "in_job.py")
        with open(script, "w") as f:
            f.write(IN_JOB)
        env = {"PYTHONPATH": fluxtest.PYDIR, "PYTHONDONTWRITEBYTECODE": "1"}
        jobid = self.submit(
            [sys.executable, script, out],
            environment=env,
            num_nodes=1,
            exclusive=True,
        )
        info = flux.job.result(self.h, jobid, timeout=TIMEOUT * 3)
        path = os.path.join(out, "result.json")
        if not os.path.exists(path):
            R = self.inst.flux("job", "eventlog", str(jobid))
            A = self.inst.flux("job", "attach", str(jobid))
            self.fail(
                "the job wrote no result (%s):\n%s\n%s%s"
                % (info.result, R.stdout.decode(), A.stdout.decode(), A.stderr.decode())
            )
        with open(path) as f:
            res = json.load(f)
        self.assertEqual(res["service"], flux.job.shell_service(jobid))
        grow = res["grow"]
        self.assertEqual(grow["type"], flux.job.REALLOC_SUCCESS, grow)
        added = ranks(grow["R_delta_add"])
        self.assertEqual(added.count(), 2, grow)
        self.assertEqual(ranks(grow["R"]).count(), 3, grow)
        self.assertEqual(res["sizes"], ["3", "3"])
        self.assertEqual(res["deny"]["type"], flux.job.REALLOC_DENY, res["deny"])
        self.assertEqual(res["cancel"]["type"], flux.job.REALLOC_CANCEL, res["cancel"])
        shrink = res["shrink"]
        self.assertEqual(shrink["type"], flux.job.REALLOC_SUCCESS, shrink)
        self.assertEqual(str(ranks(shrink["R_delta_sub"])), str(added))
        self.wait_free(jobid, str(added))
        self.assertEqual(info.result, "COMPLETED", info)


if __name__ == "__main__":
    unittest.main()
