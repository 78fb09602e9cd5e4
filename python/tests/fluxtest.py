"""Test support: put the package on sys.path and start one real fluxgo
instance (flux start -s 2) shared by the tests of this process.

The flux binary is $FLUX_TEST_BINARY, else bin/flux of the source tree,
else one built with `go build` into a temporary directory.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYDIR)
WIRE = os.path.join(REPO, "testdata", "wire")

if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)

_instance = None
_lock = threading.Lock()
_built = None


def flux_binary():
    """Path of the flux binary under test (None if none can be had)."""
    global _built  # pylint: disable=global-statement
    path = os.environ.get("FLUX_TEST_BINARY")
    if path:
        return path
    path = os.path.join(REPO, "bin", "flux")
    if os.access(path, os.X_OK):
        return path
    if _built is None:
        go = shutil.which("go")
        if not go:
            _built = ""
            return None
        tmp = tempfile.mkdtemp(prefix="fluxgo-pytest-bin-")
        out = os.path.join(tmp, "flux")
        env = dict(os.environ, CGO_ENABLED="0")
        res = subprocess.run(
            [go, "build", "-o", out, "./cmd/flux"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        _built = out if res.returncode == 0 else ""
        atexit.register(shutil.rmtree, tmp, True)
    return _built or None


class Instance:
    """A running `flux start -s SIZE` whose initial program prints
    $FLUX_URI and waits for stdin to close."""

    def __init__(self, size=2):
        self.binary = flux_binary()
        if self.binary is None:
            raise unittest.SkipTest("no flux binary (set FLUX_TEST_BINARY or run make build)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLUX_URI")}
        env["FLUXGO_PYTHONPATH"] = PYDIR
        self.rundir = tempfile.mkdtemp(prefix="fluxgo-pytest-")
        self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [self.binary, "start", "-s", str(size), "sh", "-c", 'echo "$FLUX_URI"; cat'],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self.rundir,
        )
        self._stderr = []
        self._drainer = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drainer.start()
        line = _readline_with_timeout(self.proc.stdout, 60)
        self.uri = (line or b"").decode().strip()
        if not self.uri:
            self.stop()
            raise RuntimeError(
                "flux start did not report a URI; stderr:\n" + self.stderr()
            )
        self.size = size

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self._stderr.append(line.decode(errors="replace"))

    def stderr(self):
        return "".join(self._stderr)

    def env(self):
        """Environment for commands run against the instance."""
        env = dict(os.environ)
        env["FLUX_URI"] = self.uri
        env["FLUXGO_PYTHONPATH"] = PYDIR
        env["PYTHONPATH"] = PYDIR + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        return env

    def flux(self, *args, **kwargs):
        """Run the flux command against the instance."""
        return subprocess.run(
            [self.binary] + list(args),
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=kwargs.pop("timeout", 60),
            check=False,
            **kwargs
        )

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drainer.join(10)
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self.rundir, ignore_errors=True)


def _readline_with_timeout(f, timeout):
    result = []
    t = threading.Thread(target=lambda: result.append(f.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return result[0] if result else None


def instance():
    """The shared instance, started on first use."""
    global _instance  # pylint: disable=global-statement
    with _lock:
        if _instance is None:
            _instance = Instance(2)
            atexit.register(_instance.stop)
        return _instance


class InstanceTestCase(unittest.TestCase):
    """A TestCase with self.inst (the shared instance) and self.h (a Flux
    handle on it, closed after each test)."""

    def setUp(self):
        import flux  # pylint: disable=import-outside-toplevel

        self.inst = instance()
        self.h = flux.Flux(self.inst.uri)

    def tearDown(self):
        self.h.close()
