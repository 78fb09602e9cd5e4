"""Jobs against a real instance: submit, watch to INACTIVE, list, read R
with the seed 001 snippet, wait, cancel, kill, urgency."""

import errno
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import fluxtest

import flux
import flux.job
from flux import constants as C
from flux.job import JobID, JobspecV1

TIMEOUT = 60

SEED_SNIPPET = """\
import flux
from flux.job import JobID
import sys

h = flux.Flux()
jobid = int(JobID(sys.argv[1]))
resp = h.rpc("job-info.lookup", {"id": jobid, "keys": ["R"], "flags": 0}).get()

print(resp["R"])
"""


def env_with(**extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update(extra)
    return env


class JobTestCase(fluxtest.InstanceTestCase):
    def submit(self, command, **kwargs):
        submit_args = {}
        for key in ("waitable", "urgency"):
            if key in kwargs:
                submit_args[key] = kwargs.pop(key)
        kwargs.setdefault("environment", env_with())
        js = JobspecV1.from_command(command, **kwargs)
        return flux.job.submit(self.h, js, **submit_args)

    def result(self, jobid):
        return flux.job.result(self.h, jobid, timeout=TIMEOUT)


class TestSubmitWatch(JobTestCase):
    def test_submit_watch_list_and_seed_snippet(self):
        jobid = self.submit(["hostname"], num_tasks=2, num_nodes=2)
        self.assertIsInstance(jobid, JobID)
        self.assertTrue(str(jobid).startswith("\u0192"))

        # watch the eventlog until the job is INACTIVE (clean)
        names = [ev.name for ev in flux.job.event_watch(self.h, jobid)]
        self.assertEqual(names[0], "submit")
        self.assertEqual(names[-1], "clean")
        for name in ("alloc", "start", "finish", "release", "free"):
            self.assertIn(name, names)

        # job-list reports it INACTIVE / COMPLETED
        info = self.result(jobid)
        self.assertEqual(info.id, jobid)
        self.assertEqual(info.state, "INACTIVE")
        self.assertEqual(info.result, "COMPLETED")
        self.assertEqual(info.status_abbrev, "CD")
        self.assertEqual(info.returncode, 0)
        self.assertEqual((info.ntasks, info.nnodes), (2, 2))
        self.assertGreaterEqual(info.runtime, 0.0)

        jobs = flux.job.job_list(self.h, attrs=["state", "result"]).get_jobs()
        self.assertIn(int(jobid), [j["id"] for j in jobs])
        mine = [j for j in jobs if j["id"] == jobid][0]
        self.assertEqual(mine["state"], C.FLUX_JOB_STATE_INACTIVE)
        inactive = flux.job.JobList(self.h, filters=["inactive"]).jobs()
        self.assertIn(jobid, [j.id for j in inactive])
        running = flux.job.JobList(self.h, filters=["running"]).jobs()
        self.assertNotIn(jobid, [j.id for j in running])
        listed = flux.job.JobList(self.h, ids=[jobid.f58]).jobs()
        self.assertEqual([j.id for j in listed], [jobid])
        self.assertEqual(flux.job.get_job(self.h, jobid)["id"], jobid)
        self.assertIsNone(flux.job.get_job(self.h, JobID(12345)))

        # the seed 001 snippet, verbatim, with this handle
        h = self.h
        resp = h.rpc("job-info.lookup", {"id": int(JobID(jobid.f58)), "keys": ["R"], "flags": 0}).get()
        R = json.loads(resp["R"])
        self.assertEqual(R["version"], 1)
        ranks = [r["rank"] for r in R["execution"]["R_lite"]]
        self.assertEqual(ranks, ["0-1"])

        # and as a script run with FLUX_URI set, as flux python would
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(SEED_SNIPPET)
        try:
            out = subprocess.run(
                [sys.executable, f.name, jobid.f58],
                env=self.inst.env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=TIMEOUT,
                check=False,
            )
            self.assertEqual(out.returncode, 0, out.stderr.decode())
            self.assertEqual(json.loads(out.stdout), R)
        finally:
            os.unlink(f.name)

        # job_info_lookup decodes R and jobspec
        looked = flux.job.job_info_lookup(self.h, jobid, keys=["R", "jobspec"]).get()
        self.assertEqual(looked["R"], R)
        self.assertEqual(looked["jobspec"]["tasks"][0]["command"], ["hostname"])

        # the job's KVS directory
        kvsdir = flux.job.job_kvs(self.h, jobid)
        self.assertIn("eventlog", kvsdir.keys())
        self.assertEqual(kvsdir["R"], R)

    def test_list_states_or_results(self):
        """states and results select jobs each: given both, a job matching
        either is listed, as flux-core's job_list() builds its constraint."""
        done = self.submit(["true"])
        failed = self.submit(["false"])
        self.result(done)
        self.result(failed)
        running = self.submit(["sleep", "120"])
        try:
            # wait until job-list itself has the job running
            flux.job.job_list_id(self.h, running, state=C.FLUX_JOB_STATE_RUN).get()

            def ids(rpc):
                return {j["id"] for j in rpc.get_jobs()}

            both = ids(
                flux.job.job_list(
                    self.h,
                    states=C.FLUX_JOB_STATE_RUNNING,
                    results=C.FLUX_JOB_RESULT_COMPLETED,
                )
            )
            self.assertTrue({running, done} <= both)
            self.assertNotIn(failed, both)
            only = ids(flux.job.job_list(self.h, results=C.FLUX_JOB_RESULT_COMPLETED))
            self.assertIn(done, only)
            self.assertFalse({running, failed} & only)

            listed = {j.id for j in flux.job.JobList(self.h, filters=["running", "completed"]).jobs()}
            self.assertTrue({running, done} <= listed)
            self.assertNotIn(failed, listed)
            listed = {j.id for j in flux.job.JobList(self.h, filters=["completed"]).jobs()}
            self.assertIn(done, listed)
            self.assertFalse({running, failed} & listed)
            # with ids, the filters are ignored (flux-core's JobList)
            listed = flux.job.JobList(self.h, filters=["completed"], ids=[running]).jobs()
            self.assertEqual([j.id for j in listed], [running])
            self.assertEqual(flux.job.JobList.RESULTS["completed"], C.FLUX_JOB_RESULT_COMPLETED)
            self.assertEqual(flux.job.JobList.STATES["running"], C.FLUX_JOB_STATE_RUNNING)
        finally:
            flux.job.cancel(self.h, running)
            self.result(running)

    def test_flux_python_command(self):
        """`flux python R.py ID`, as in seed 001."""
        check = self.inst.flux("python", "--get-path")
        if check.returncode != 0:
            self.skipTest("this flux binary has no python subcommand")
        jobid = self.submit(["true"])
        flux.job.event_wait(self.h, jobid, "clean")
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(SEED_SNIPPET)
        try:
            out = self.inst.flux("python", f.name, jobid.f58)
        finally:
            os.unlink(f.name)
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        R = json.loads(out.stdout)
        self.assertEqual(R["execution"]["R_lite"][0]["rank"], "0")
        out = self.inst.flux("python", "-c", "import sys; sys.exit(7)")
        self.assertEqual(out.returncode, 7)

    def test_submit_options(self):
        tmp = tempfile.mkdtemp(prefix="fluxgo-pytest-job-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        jobid = self.submit(
            ["sh", "-c", 'echo "$PYTEST_VAR $FLUX_TASK_RANK $(pwd)" > out.$FLUX_TASK_RANK'],
            num_tasks=2,
            cores_per_task=1,
            num_nodes=2,
            duration=120,
            environment=env_with(PYTEST_VAR="hello"),
            cwd=tmp,
            name="pytest-options",
        )
        info = self.result(jobid)
        self.assertEqual(info.result, "COMPLETED", info.to_dict())
        self.assertEqual(info.name, "pytest-options")
        self.assertEqual(info.duration, 120.0)
        for rank in (0, 1):
            with open(os.path.join(tmp, "out.%d" % rank), encoding="utf-8") as f:
                self.assertEqual(f.read().split(), ["hello", str(rank), os.path.realpath(tmp)])
        js = flux.job.job_info_lookup(self.h, jobid).get()["jobspec"]
        self.assertEqual(js["attributes"]["system"]["cwd"], tmp)
        self.assertEqual(js["attributes"]["system"]["duration"], 120.0)

    def test_event_wait_and_then(self):
        jobid = self.submit(["true"])
        ev = flux.job.event_wait(self.h, jobid, "finish")
        self.assertEqual(ev.context["status"], 0)
        self.assertGreater(ev.timestamp, 0)
        clean = flux.job.wait_for(self.h, jobid, "clean", timeout=TIMEOUT)
        self.assertEqual(clean.name, "clean")
        with self.assertRaises(OSError) as cm:
            flux.job.event_wait(self.h, jobid, "no-such-event")
        self.assertEqual(cm.exception.errno, errno.ENODATA)

        # asynchronously, with a then() callback in the reactor
        names = []

        def cb(fut):
            ev = fut.get_event()
            if ev is None:
                return
            names.append(ev.name)

        flux.job.event_watch_async(self.h, jobid).then(cb)
        self.h.reactor_run()
        self.assertEqual(names[0], "submit")
        self.assertEqual(names[-1], "clean")

    def test_exec_eventlog(self):
        jobid = self.submit(["true"])
        flux.job.event_wait(self.h, jobid, "clean")
        names = [e.name for e in flux.job.event_watch(self.h, jobid, "guest.exec.eventlog")]
        self.assertIn("init", names)
        self.assertIn("complete", names)

    def test_wait_waitable(self):
        ok = self.submit(["true"], waitable=True)
        bad = self.submit(["sh", "-c", "exit 3"], waitable=True)
        status = flux.job.wait(self.h, ok)
        self.assertEqual((status.jobid, status.success), (ok, True))
        fut = flux.job.wait_async(self.h, bad)
        jobid, success, errstr = flux.job.wait_get_status(fut)
        self.assertEqual(jobid, bad)
        self.assertFalse(success)
        self.assertIn("exit", errstr)
        info = self.result(bad)
        self.assertEqual((info.result, info.returncode), ("FAILED", 3))
        # a job submitted without waitable=True cannot be waited for
        plain = self.submit(["true"])
        with self.assertRaises(OSError) as cm:
            flux.job.wait(self.h, plain)
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_cancel_pending(self):
        jobid = self.submit(["true"], urgency=C.FLUX_JOB_URGENCY_HOLD)
        flux.job.event_wait(self.h, jobid, "priority")
        flux.job.cancel(self.h, jobid, "pytest says no")
        with self.assertRaises(flux.job.JobException) as cm:
            flux.job.event_wait(self.h, jobid, "start")
        self.assertEqual(cm.exception.type, "cancel")
        self.assertEqual(cm.exception.note, "pytest says no")
        info = self.result(jobid)
        self.assertEqual((info.result, info.returncode), ("CANCELED", -128))
        self.assertTrue(info.exception.occurred)
        self.assertEqual(info.exception.type, "cancel")
        # an inactive job cannot be canceled again
        with self.assertRaises(OSError) as cm:
            flux.job.cancel(self.h, jobid)
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_urgency_release(self):
        jobid = self.submit(["true"], urgency=0)
        flux.job.event_wait(self.h, jobid, "priority")
        flux.job.set_urgency(self.h, jobid, 16)
        self.assertEqual(self.result(jobid).result, "COMPLETED")

    def test_kill_running(self):
        jobid = self.submit(["sleep", "120"])
        flux.job.event_wait(self.h, jobid, "start")
        flux.job.kill(self.h, jobid, signal.SIGTERM)
        info = self.result(jobid)
        self.assertEqual(info.result, "FAILED")
        # the shell exits 128+signal for a task killed by a signal
        self.assertIn(info.returncode, (128 + signal.SIGTERM, -signal.SIGTERM))
        # the job is gone: kill fails
        with self.assertRaises(OSError):
            flux.job.kill(self.h, jobid)

    def test_unknown_job(self):
        with self.assertRaises(OSError) as cm:
            flux.job.cancel(self.h, JobID("ƒ2"))
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        with self.assertRaises(OSError) as cm:
            flux.job.result(self.h, JobID("ƒ2"), timeout=TIMEOUT)
        self.assertEqual(cm.exception.errno, errno.ENOENT)

    def test_submit_invalid(self):
        bad = {"version": 1, "resources": [], "tasks": [], "attributes": {}}
        with self.assertRaises(OSError) as cm:
            flux.job.submit(self.h, bad)
        self.assertEqual(cm.exception.errno, errno.EINVAL)
        self.assertIn("resource", cm.exception.strerror)


if __name__ == "__main__":
    unittest.main()


def cli_jobs(inst, jobid, fmt):
    res = inst.flux("jobs", "-n", "-o", fmt, str(jobid))
    if res.returncode != 0:
        raise AssertionError(res.stderr.decode())
    return res.stdout.decode().rstrip("\n")


class TestJobInfo(JobTestCase):
    """get_job() and JobInfo give flux-core's readable fields, and agree
    with flux jobs."""

    UNFILTERED_KEYS = {
        "id", "userid", "username", "urgency", "priority", "state", "result",
        "status", "returncode", "waitstatus", "runtime", "t_submit", "t_depend",
        "t_run", "t_cleanup", "t_inactive", "t_remaining", "duration",
        "expiration", "name", "cwd", "queue", "project", "bank", "ntasks",
        "ncores", "nnodes", "ranks", "nodelist", "success", "dependencies",
        "annotations", "exception",
    }

    def test_get_job_completed(self):
        jobid = self.submit(["true"], num_tasks=1)
        self.result(jobid)
        job = flux.job.get_job(self.h, jobid)
        self.assertEqual(set(job), self.UNFILTERED_KEYS)
        self.assertEqual(job["id"], jobid)
        self.assertEqual(job["state"], "INACTIVE")
        self.assertEqual(job["result"], "COMPLETED")
        self.assertEqual(job["status"], "COMPLETED")
        self.assertEqual(job["returncode"], 0)
        self.assertEqual(job["waitstatus"], 0)
        self.assertIs(job["success"], True)
        self.assertEqual(job["username"], pwd.getpwuid(os.getuid()).pw_name)
        self.assertEqual(job["userid"], os.getuid())
        self.assertEqual(job["exception"], {"occurred": False, "severity": "", "type": "", "note": ""})
        self.assertIsInstance(job["annotations"], dict)
        self.assertGreater(job["runtime"], 0.0)
        self.assertGreaterEqual(job["t_inactive"], job["t_cleanup"])
        self.assertEqual(job["t_remaining"], 0.0)
        self.assertEqual(job["name"], "true")
        self.assertEqual(job["nodelist"], cli_jobs(self.inst, jobid, "{nodelist}"))
        json.dumps(job)  # plain data

    def test_get_job_pending_and_canceled(self):
        jobid = self.submit(["true"], urgency=0)
        flux.job.wait_for(self.h, jobid, "priority", timeout=TIMEOUT)
        job = flux.job.get_job(self.h, jobid)
        self.assertEqual((job["state"], job["status"], job["result"]), ("SCHED", "SCHED", ""))
        self.assertEqual((job["returncode"], job["runtime"], job["t_run"]), ("", 0.0, 0.0))
        self.assertEqual(job["urgency"], 0)
        info = flux.job.job_list_id(self.h, jobid).get_jobinfo()
        self.assertEqual(info.contextual_info, "held")
        self.assertEqual(info.contextual_info, cli_jobs(self.inst, jobid, "{contextual_info}"))
        self.assertEqual(info.inactive_reason, "")
        flux.job.cancel(self.h, jobid, "not today")
        info = self.result(jobid)
        self.assertEqual((info.status, info.returncode), ("CANCELED", -128))
        self.assertEqual(info.inactive_reason, "Canceled: not today")
        self.assertEqual(info.inactive_reason, cli_jobs(self.inst, jobid, "{inactive_reason}"))
        job = flux.job.get_job(self.h, jobid)
        self.assertEqual(job["exception"]["type"], "cancel")
        self.assertEqual(job["exception"]["note"], "not today")
        self.assertIs(job["exception"]["occurred"], True)

    def test_to_dict_filtered_and_fields(self):
        jobid = self.submit(["sh", "-c", "exit 3"])
        info = self.result(jobid)
        self.assertEqual((info.status, info.status_abbrev, info.returncode), ("FAILED", "F", 3))
        self.assertEqual(info.inactive_reason, "Exit 3")
        self.assertEqual(info.inactive_reason, cli_jobs(self.inst, jobid, "{inactive_reason}"))
        self.assertEqual(info.state_id, C.FLUX_JOB_STATE_INACTIVE)
        self.assertEqual(info.result_id, C.FLUX_JOB_RESULT_FAILED)
        self.assertEqual(info.contextual_time, info.runtime)
        self.assertEqual(str(info.sched.resource_summary), cli_jobs(self.inst, jobid, "{sched.resource_summary}"))
        self.assertEqual(str(info.sched.no_such_key), "")
        self.assertEqual(str(info.annotations.user.x.y), "")
        d = info.to_dict()
        self.assertEqual(d["status"], "FAILED")
        self.assertEqual(d["returncode"], 3)
        for key, value in d.items():
            self.assertNotEqual(value, "", key)
            if key.startswith("t_"):
                self.assertNotEqual(value, 0, key)
        self.assertNotIn("t_remaining", d)
        self.assertEqual(d["exception"], {"occurred": False})
        full = info.to_dict(filtered=False)
        self.assertEqual(set(full), self.UNFILTERED_KEYS)
        self.assertEqual(full["queue"], "")
        with self.assertRaises(AttributeError):
            info.no_such_attribute  # pylint: disable=pointless-statement

    def test_joblist_errors(self):
        with self.assertRaisesRegex(ValueError, "Invalid filter specified: bogus"):
            flux.job.JobList(self.h, filters=["running,bogus"])
        jl = flux.job.JobList(self.h, ids=["ƒdhZ"])
        self.assertEqual(jl.jobs(), [])
        self.assertEqual(jl.errors, ["JobID ƒdhZ unknown"])
        self.assertEqual(JobID("ƒdhZ").orig, "ƒdhZ")


class TestJobStats(unittest.TestCase):
    """On its own instance, so the counts are known."""

    @classmethod
    def setUpClass(cls):
        cls.inst = fluxtest.Instance(1)

    @classmethod
    def tearDownClass(cls):
        cls.inst.stop()

    def test_counts_match_flux_jobs_stats(self):
        h = flux.Flux(self.inst.uri)
        try:
            stats = flux.job.stats.JobStats(h)
            self.assertEqual(stats.pending, -1)
            stats.update_sync()
            self.assertEqual((stats.total, stats.pending, stats.successful), (0, 0, 0))

            def submit(cmd, **kw):
                js = JobspecV1.from_command(cmd, environment=env_with())
                return flux.job.submit(h, js, **kw)

            flux.job.result(h, submit(["true"]), timeout=TIMEOUT)
            flux.job.result(h, submit(["false"]), timeout=TIMEOUT)
            held = submit(["true"], urgency=0)
            flux.job.wait_for(h, held, "priority", timeout=TIMEOUT)
            stats = flux.job.JobStats(h).update_sync()
            self.assertEqual(
                (stats.total, stats.inactive, stats.active, stats.pending, stats.running),
                (3, 2, 1, 1, 0),
            )
            self.assertEqual((stats.successful, stats.failed, stats.canceled), (1, 1, 0))
            out = self.inst.flux("jobs", "--stats-only")
            self.assertEqual(
                out.stdout.decode().strip(),
                "%d running, %d completed, %d failed, %d pending, %d inactive purged"
                % (stats.running, stats.successful, stats.failed, stats.pending, stats.inactive_purged),
            )
            flux.job.cancel(h, held)
            flux.job.wait_for(h, held, "clean", timeout=TIMEOUT)
            got = []
            stats.update(lambda s, tag: got.append((tag, s.canceled, s.failed)), tag="cb")
            h.reactor_run()
            self.assertEqual(got, [("cb", 1, 2)])
            with self.assertRaisesRegex(ValueError, "no stats available for queue nosuch"):
                flux.job.JobStats(h, queue="nosuch").update_sync()
        finally:
            h.close()


class TestFluxExecutor(JobTestCase):
    """flux.job.FluxExecutor, as flux-core's bindings offer it."""

    def spec(self, command, **kwargs):
        kwargs.setdefault("environment", env_with())
        return JobspecV1.from_command(command, **kwargs)

    def test_results_exceptions_and_callbacks(self):
        from flux.job import FluxExecutor

        started = []
        with FluxExecutor(handle_args=(self.inst.uri,)) as executor:
            ok = executor.submit(self.spec(["true"]))
            bad = executor.submit(self.spec(["sh", "-c", "exit 3"]))
            held = executor.submit(self.spec(["true"]), urgency=0)
            ok.add_event_callback("start", lambda fut, ev: started.append(ev.name))
            self.assertIsInstance(ok.jobid(timeout=TIMEOUT), JobID)
            self.assertEqual(ok.result(timeout=TIMEOUT), 0)
            self.assertEqual(bad.result(timeout=TIMEOUT), 3)
            # canceled before it ran: the exception, not a result
            flux.job.cancel(self.h, held.jobid(timeout=TIMEOUT))
            with self.assertRaises(flux.job.JobException):
                held.result(timeout=TIMEOUT)
            # attach follows a job submitted elsewhere
            other = self.submit(["true"])
            self.assertEqual(executor.attach(other).result(timeout=TIMEOUT), 0)
            # a refused jobspec: jobid() and result() raise
            refused = executor.submit(self.spec(["true"], num_tasks=1000, num_nodes=1000))
            with self.assertRaises(OSError):
                refused.jobid(timeout=TIMEOUT)
            with self.assertRaises(OSError):
                refused.result(timeout=TIMEOUT)
        self.assertEqual(started, ["start"])
        with self.assertRaises(RuntimeError):
            executor.submit(self.spec(["true"]))

    def test_callback_exception_is_logged_not_fatal(self):
        """flux-core logs what a jobid/event/done callback raises and
        carries on: the job's future and the executor stay usable."""
        from flux.job import FluxExecutor

        def boom(*_):
            raise ZeroDivisionError("from a callback")

        with FluxExecutor(handle_args=(self.inst.uri,)) as executor:
            with self.assertLogs("flux.job.executor", "ERROR") as logs:
                fut = executor.submit(self.spec(["true"]))
                self.assertIs(fut.add_jobid_callback(boom), fut)
                self.assertIs(fut.add_event_callback("start", boom), fut)
                self.assertEqual(fut.result(timeout=TIMEOUT), 0)
                # added after the fact: called at once, still only logged
                fut.add_jobid_callback(boom)
                fut.add_event_callback("start", boom)
            self.assertEqual(len(logs.records), 4)
            self.assertIn("exception calling callback", logs.output[0])
            # the executor's thread survived: a later job runs
            with self.assertLogs("concurrent.futures", "ERROR"):
                later = executor.submit(self.spec(["true"]))
                self.assertIs(later.add_done_callback(boom), later)
                self.assertEqual(later.result(timeout=TIMEOUT), 0)
            self.assertEqual(executor.submit(self.spec(["true"])).result(timeout=TIMEOUT), 0)

    def test_wait_inside_own_callback_raises(self):
        """result()/exception() from the future's own callback would wait
        on the thread running it: RuntimeError at once, as in flux-core."""
        import threading
        import time

        from flux.job import FluxExecutor

        seen = []

        def wait_on(fut, *_):
            if threading.current_thread() is threading.main_thread():
                return  # called at once by add_*_callback: not the case here
            begin = time.monotonic()
            errors = []
            for method in (fut.result, fut.exception):
                try:
                    method(timeout=5)
                except RuntimeError as exc:
                    errors.append(str(exc))
            seen.append((errors, time.monotonic() - begin))

        with FluxExecutor(handle_args=(self.inst.uri,)) as executor:
            # held until the callbacks are in place: they run in the thread
            fut = executor.submit(self.spec(["true"]), urgency=0)
            fut.add_jobid_callback(wait_on)
            fut.add_event_callback("start", wait_on)
            flux.job.event_wait(self.h, fut.jobid(timeout=TIMEOUT), "priority")
            flux.job.set_urgency(self.h, fut.jobid(), 16)
            self.assertEqual(fut.result(timeout=TIMEOUT), 0)
            # once done, waiting from a callback is fine
            done = []
            fut.add_event_callback("start", lambda f, ev: done.append(f.result()))
            self.assertEqual(done, [0])
        msg = "Cannot wait for future from inside callback"
        self.assertTrue(seen)
        for errors, elapsed in seen:
            self.assertEqual(errors, [msg, msg])
            self.assertLess(elapsed, 1.0)

    def test_event_names_checked(self):
        from flux.job import FluxExecutor, FluxExecutorFuture

        self.assertIn("start", FluxExecutor.EVENTS)
        self.assertEqual(FluxExecutorFuture.EVENTS, FluxExecutor.EVENTS)
        with self.assertRaises(ValueError):
            FluxExecutorFuture().add_event_callback("bogus", print)

    def test_unreachable_instance_fails_futures(self):
        from flux.job import FluxExecutor

        executor = FluxExecutor(handle_args=("local:///nonexistent/socket",))
        try:
            future = executor.submit(self.spec(["true"]))
        except RuntimeError:
            return  # the thread had already failed: refused at once
        with self.assertRaises(OSError):
            future.result(timeout=TIMEOUT)
