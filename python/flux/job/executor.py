"""FluxExecutor: Flux jobs as concurrent.futures, the interface
flux-core's Python bindings give workflow tools (Parsl, Merlin...).

    with FluxExecutor() as executor:
        future = executor.submit(JobspecV1.from_command(["hostname"]))
        print(future.jobid(), future.result())

A background thread owns a Flux handle: it submits the queued jobspecs
and follows each job's eventlog. A future's jobid() is known once the
job is accepted; result() is the job's exit code once it is clean (a
signal N gives -N); a job that ends with a fatal exception before it
starts raises flux.job.JobException. add_event_callback(name, fn) calls
fn(future, event) for each event of that name (those already seen too).
"""

import concurrent.futures
import logging
import queue
import threading

import flux
from flux.job.event import MAIN_EVENTS, JobException, event_watch_async
from flux.job.JobID import JobID
from flux.job.submit import submit_async


class FluxExecutorFuture(concurrent.futures.Future):
    """A concurrent.futures.Future for one Flux job.

    Callbacks added with add_jobid_callback and add_event_callback run in
    the executor's thread (or at once if their moment has passed); an
    Exception they raise is logged and ignored, as for add_done_callback.
    Waiting on the future (result(), exception()) from one of those
    callbacks before it is done raises RuntimeError: the thread would be
    waiting for itself."""

    #: The event names add_event_callback accepts.
    EVENTS = MAIN_EVENTS

    def __init__(self, owning_thread_id=None):
        super().__init__()
        self._owner = owning_thread_id
        self._jobid = None
        self._jobid_error = None
        self._jobid_set = threading.Event()
        self._cb_lock = threading.Lock()
        self._jobid_callbacks = []
        self._event_callbacks = {}
        self._events = []

    def _check_not_owner(self):
        if (
            self._owner is not None
            and not self.done()
            and threading.get_ident() == self._owner
        ):
            raise RuntimeError("Cannot wait for future from inside callback")

    def result(self, timeout=None):  # pylint: disable=arguments-differ
        self._check_not_owner()
        return super().result(timeout)

    result.__doc__ = concurrent.futures.Future.result.__doc__

    def exception(self, timeout=None):  # pylint: disable=arguments-differ
        self._check_not_owner()
        return super().exception(timeout)

    exception.__doc__ = concurrent.futures.Future.exception.__doc__

    def _invoke(self, fn, *args):
        """Call a user callback; what it raises is logged, not passed on
        (it must not stop the executor's thread or decide the job)."""
        try:
            fn(self, *args)
        except Exception:  # pylint: disable=broad-except
            logging.getLogger(__name__).exception(
                "exception calling callback for %r", self
            )

    def jobid(self, timeout=None):
        """The job's JobID, waiting up to timeout seconds for it. Raises
        the submission's error if the job was refused."""
        if not self._jobid_set.wait(timeout):
            raise concurrent.futures.TimeoutError()
        if self._jobid_error is not None:
            raise self._jobid_error
        return self._jobid

    def add_jobid_callback(self, fn):
        """Call fn(future) once the job has an ID (now if it has one).
        Returns the future."""
        with self._cb_lock:
            if not self._jobid_set.is_set():
                self._jobid_callbacks.append(fn)
                return self
        self._invoke(fn)
        return self

    def add_done_callback(self, fn):
        """concurrent.futures.Future.add_done_callback, returning the
        future."""
        super().add_done_callback(fn)
        return self

    def add_event_callback(self, event, fn):
        """Call fn(future, event) for each event named event of the job's
        eventlog, including those already received. event must be one of
        EVENTS. Returns the future."""
        if event not in self.EVENTS:
            raise ValueError(event)
        with self._cb_lock:
            self._event_callbacks.setdefault(event, []).append(fn)
            past = [ev for ev in self._events if ev.name == event]
        for ev in past:
            self._invoke(fn, ev)
        return self

    def _set_jobid(self, jobid, error=None):
        with self._cb_lock:
            self._jobid, self._jobid_error = jobid, error
            self._jobid_set.set()
            callbacks, self._jobid_callbacks = self._jobid_callbacks, []
        for fn in callbacks:
            self._invoke(fn)

    def _event(self, ev):
        with self._cb_lock:
            self._events.append(ev)
            callbacks = list(self._event_callbacks.get(ev.name, ()))
        for fn in callbacks:
            self._invoke(fn, ev)


def _exit_code(status):
    """The exit code of a wait status: -N for signal N."""
    if status & 0x7F:
        return -(status & 0x7F)
    return (status >> 8) & 0xFF


class _Job:
    """What the thread tracks of one job."""

    def __init__(self, future):
        self.future = future
        self.started = False
        self.status = None
        self.exception = None


class FluxExecutor(concurrent.futures.Executor):
    """Run Flux jobs as futures (see the module documentation).

    threads is accepted for compatibility (one thread serves all jobs);
    poll_interval is how often the thread looks for new submissions;
    handle_args and handle_kwargs are passed to flux.Flux()."""

    #: The event names FluxExecutorFuture.add_event_callback accepts.
    EVENTS = MAIN_EVENTS

    def __init__(
        self,
        threads=1,
        thread_name_prefix="",
        poll_interval=0.1,
        handle_args=(),
        handle_kwargs=None,
    ):
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive")
        self._queue = queue.SimpleQueue()
        self._shutdown = False
        self._lock = threading.Lock()
        self._poll_interval = poll_interval
        self._handle_args = handle_args
        self._handle_kwargs = handle_kwargs or {}
        self._error = None
        self._jobs = set()  # the jobs the thread follows (its own)
        self._thread = threading.Thread(
            target=self._run,
            name=(thread_name_prefix or "FluxExecutor") + "-0",
            daemon=True,
        )
        self._thread.start()

    def submit(self, jobspec, *args, **kwargs):
        """Submit jobspec (a Jobspec, mapping or JSON text; the other
        arguments are those of flux.job.submit_async) and return its
        FluxExecutorFuture."""
        return self._enqueue("submit", (jobspec, args, kwargs))

    def attach(self, jobid):
        """A FluxExecutorFuture following an existing job."""
        return self._enqueue("attach", JobID(jobid))

    def _enqueue(self, kind, what):
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._error is not None:
                raise RuntimeError("the executor's thread failed: %s" % (self._error,))
            future = FluxExecutorFuture(self._thread.ident)
            self._queue.put((kind, future, what))
            return future

    def shutdown(self, wait=True, *, cancel_futures=False):
        """Refuse new jobs; the thread ends once every job is done. With
        cancel_futures, jobs not yet submitted are canceled."""
        with self._lock:
            self._shutdown = True
        if cancel_futures:
            drained = []
            while True:
                try:
                    drained.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for _, future, _ in drained:
                future.cancel()
                future._set_jobid(None, concurrent.futures.CancelledError())
        self._queue.put(None)
        if wait:
            self._thread.join()

    def _run(self):
        try:
            self._serve()
        except Exception as exc:  # pylint: disable=broad-except
            # under the lock: no submit() can queue after the drain
            with self._lock:
                self._error = exc
                queued = []
                while True:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        queued.append(item[1])
            futures = [job.future for job in list(self._jobs)] + queued
            for future in futures:
                if not future._jobid_set.is_set():
                    future._set_jobid(None, exc)
                if not future.done():
                    future.set_exception(exc)

    def _serve(self):
        h = flux.Flux(*self._handle_args, **self._handle_kwargs)
        active = {"n": 0}
        stopping = {"v": False}

        def done(job):
            self._jobs.discard(job)
            active["n"] -= 1
            if stopping["v"] and active["n"] == 0:
                h.reactor_stop()

        def on_event(watch, job):
            try:
                ev = watch.get_event()
            except OSError as exc:
                if not job.future.done():
                    job.future.set_exception(exc)
                done(job)
                return
            if ev is None:
                if not job.future.done():
                    job.future.set_exception(
                        RuntimeError("job %s ended without a clean event" % job.future._jobid)
                    )
                done(job)
                return
            job.future._event(ev)
            if ev.name == "start":
                job.started = True
            elif ev.name == "finish":
                job.status = ev.context.get("status", 0)
            elif ev.name == "exception" and ev.context.get("severity", 0) == 0:
                if job.exception is None:
                    job.exception = JobException(ev)
            elif ev.name == "clean":
                watch.cancel()
                if not job.future.done():
                    if job.status is not None:
                        job.future.set_result(_exit_code(job.status))
                    else:
                        job.future.set_exception(
                            job.exception or RuntimeError("job ended without finishing")
                        )

        def follow(job, jobid):
            job.future._set_jobid(jobid)
            event_watch_async(h, jobid).then(on_event, job)

        def on_submitted(rpc, job):
            try:
                jobid = rpc.get_id()
            except Exception as exc:  # pylint: disable=broad-except
                job.future._set_jobid(None, exc)
                job.future.set_exception(exc)
                done(job)
                return
            follow(job, jobid)

        def poll(handle, watcher, revents, args):
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping["v"] = True
                    continue
                kind, future, what = item
                if not future.set_running_or_notify_cancel():
                    continue
                job = _Job(future)
                self._jobs.add(job)
                active["n"] += 1
                if kind == "attach":
                    follow(job, what)
                    continue
                jobspec, args, kwargs = what
                try:
                    submit_async(h, jobspec, *args, **kwargs).then(on_submitted, job)
                except Exception as exc:  # pylint: disable=broad-except
                    future._set_jobid(None, exc)
                    future.set_exception(exc)
                    self._jobs.discard(job)
                    active["n"] -= 1
            if stopping["v"] and active["n"] == 0:
                handle.reactor_stop()

        timer = h.timer_watcher_create(0.0, poll, repeat=self._poll_interval)
        timer.start()
        try:
            h.reactor_run()
        finally:
            timer.stop()
            h.close()
