"""Offline tests of the helper modules tools import from flux-core's
bindings: flux.util."""

import logging
import math
import unittest

import fluxtest

import flux.job
from flux import util


class TestUtil(unittest.TestCase):
    def test_parse_fsd(self):
        self.assertIs(flux.job.parse_fsd, util.parse_fsd)
        cases = {"30": 30.0, "1.5m": 90.0, "2h": 7200.0, "1d": 86400.0, "10ms": 0.01, "0": 0.0}
        for text, secs in cases.items():
            self.assertAlmostEqual(util.parse_fsd(text), secs)
        self.assertEqual(util.parse_fsd("inf"), math.inf)
        for bad in ("", "-1", "1x", "abc", "1e400", "nan"):
            with self.assertRaises(ValueError, msg=bad):
                util.parse_fsd(bad)

    def test_fsd(self):
        cases = [(0.0001, "0s"), (1.5, "1.500s"), (30, "30s"), (90, "1.5m"),
                 (7200, "2h"), (172800, "2d"), (math.inf, "inf")]
        for secs, text in cases:
            self.assertEqual(util.fsd(secs), text)

    def test_treedict(self):
        d = {}
        util.set_treedict(d, "a.b.c", 1)
        util.set_treedict(d, "a.x", 2)
        self.assertEqual(d, {"a": {"b": {"c": 1}, "x": 2}})
        self.assertEqual(util.get_treedict(d, "a.b.c"), 1)
        self.assertEqual(util.get_treedict(d, "a.nope.c", "dflt"), "dflt")
        util.del_treedict(d, "a.b.c", remove_empty=True)
        self.assertEqual(d, {"a": {"x": 2}})
        with self.assertRaises(KeyError):
            util.del_treedict(d, "q.r")

    def test_encode_and_climain(self):
        self.assertEqual(util.encode_payload({"a": 1}), b'{"a": 1}')
        self.assertEqual(util.encode_payload("x"), b"x")
        self.assertIsNone(util.encode_payload(None))
        self.assertEqual(util.encode_topic("t.x"), b"t.x")
        with self.assertRaises(TypeError):
            util.encode_topic(3)

        logger = logging.getLogger("test-climain")

        def failing():
            raise OSError(2, "No such file or directory", "/nope")

        with self.assertLogs(logger, "ERROR") as logs:
            with self.assertRaises(SystemExit) as ctx:
                util.CLIMain(logger)(failing)
        self.assertEqual(ctx.exception.code, 1)
        self.assertEqual(logs.records[0].getMessage(), "No such file or directory: '/nope'")
        with self.assertRaises(SystemExit) as ctx:
            util.CLIMain(logger)(lambda: None)
        self.assertEqual(ctx.exception.code, 0)


if __name__ == "__main__":
    unittest.main()
