"""Offline tests: jobspecs for nested instances and batch scripts, and
the RFC 37 file archive (JobspecV1.from_nest_command/from_batch_command,
Jobspec.add_file), as flux-core's Jobspec builds them."""

import os
import stat
import tempfile
import unittest

import fluxtest  # noqa: F401  (sets sys.path)

from flux.job import JobspecV1
from flux.util import Fileref


class TestNestAndBatch(unittest.TestCase):
    def test_from_nest_command(self):
        js = JobspecV1.from_nest_command(["sleep", "1"], num_slots=2, num_nodes=2)
        self.assertEqual(js.tasks[0]["command"], ["flux", "broker", "sleep", "1"])
        self.assertEqual(js.resources[0]["type"], "node")
        self.assertEqual(js.resources[0]["count"], 2)
        self.assertEqual(js.getattr("system.shell.options.per-resource"), {"type": "node"})
        self.assertEqual(js.getattr("system.shell.options.mpi"), "none")
        self.assertNotIn("files", js.attributes["system"])

    def test_from_nest_command_conf(self):
        js = JobspecV1.from_nest_command(["true"], broker_opts=["-Sx=1"], conf={"a": 1})
        self.assertEqual(
            js.tasks[0]["command"],
            ["flux", "broker", "-Sx=1", "-c{{tmpdir}}/conf.json", "true"],
        )
        self.assertEqual(
            js.getattr("system.files")["conf.json"],
            {"mode": stat.S_IFREG | 0o600, "data": {"a": 1}},
        )

    def test_from_batch_command(self):
        script = "#!/bin/sh\necho hi\n"
        js = JobspecV1.from_batch_command(script, "myjob", args=["x"], num_slots=1, num_nodes=1)
        self.assertEqual(js.tasks[0]["command"], ["flux", "broker", "{{tmpdir}}/script", "x"])
        self.assertEqual(js.getattr("system.job.name"), "myjob")
        self.assertEqual(
            js.getattr("system.files")["script"],
            {"mode": stat.S_IFREG | 0o700, "data": script, "encoding": "utf-8"},
        )
        with self.assertRaises(ValueError):
            JobspecV1.from_batch_command("echo no shebang\n", "bad")


class TestAddFile(unittest.TestCase):
    def test_content_and_path(self):
        js = JobspecV1.from_command(["true"])
        js.add_file("f.txt", "hello\n")
        js.add_file("c.json", {"k": [1]})
        files = js.getattr("system.files")
        self.assertEqual(files["f.txt"], {"mode": stat.S_IFREG | 0o600, "data": "hello\n", "encoding": "utf-8"})
        self.assertEqual(files["c.json"]["data"], {"k": [1]})
        with tempfile.TemporaryDirectory() as tmp:
            text, blob = os.path.join(tmp, "t"), os.path.join(tmp, "b")
            with open(text, "w", encoding="utf-8") as f:
                f.write("abc")
            with open(blob, "wb") as f:
                f.write(b"\xff\x00")
            os.chmod(text, 0o640)
            js.add_file("t", text)
            js.add_file("b", blob)
        files = js.getattr("system.files")
        self.assertEqual(files["t"], {"mode": stat.S_IFREG | 0o640, "size": 3, "data": "abc", "encoding": "utf-8"})
        self.assertEqual((files["b"]["data"], files["b"]["encoding"]), ("/wA=", "base64"))
        with self.assertRaises(TypeError):
            js.add_file("x", 3)
        with self.assertRaises(ValueError):
            Fileref("x", encoding="rot13")


if __name__ == "__main__":
    unittest.main()
