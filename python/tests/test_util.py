"""Offline tests of the helper modules tools import from flux-core's
bindings: flux.util, flux.idset, flux.hostlist, flux.progress."""

import io
import logging
import math
import os
import subprocess
import unittest
from unittest import mock

import fluxtest

import flux.job
from flux import util
from flux.hostlist import Hostlist
from flux.idset import IDSET_FLAG_BRACKETS, IDSET_INVALID_ID, IDset
from flux.progress import Bottombar


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


class TestIDset(unittest.TestCase):
    def test_basic(self):
        ids = IDset("0-3,5")
        self.assertEqual((len(ids), list(ids), str(ids)), (5, [0, 1, 2, 3, 5], "0-3,5"))
        self.assertIn(5, ids)
        self.assertNotIn(4, ids)
        self.assertEqual(repr(ids), "IDset('0-3,5')")
        self.assertEqual(str(IDset([7, 1, 2, 3])), "1-3,7")
        self.assertEqual(str(IDset("3,1,2,2")), "1-3")
        self.assertEqual(str(IDset("[1-2]")), "1-2")
        self.assertEqual(len(IDset()), 0)
        self.assertEqual(IDset("1-3").encode(0), "1,2,3")
        self.assertEqual(IDset("1-3").encode(IDSET_FLAG_BRACKETS | 4), "[1-3]")
        self.assertEqual(IDset("4").encode(IDSET_FLAG_BRACKETS | 4), "4")

    def test_edit_and_algebra(self):
        ids = IDset("0-3,5").set(4).clear(2)
        self.assertEqual(str(ids), "0-1,3-5")
        self.assertEqual((ids.first(), ids.last(), ids.next(1), ids.next(5)),
                         (0, 5, 3, IDSET_INVALID_ID))
        self.assertEqual(IDset().first(), IDSET_INVALID_ID)
        self.assertEqual(str(IDset("0-10") & "3-20"), "3-10")
        self.assertEqual(str(IDset("0-10") - "3-5"), "0-2,6-10")
        self.assertEqual(str(IDset("0-2") + [7]), "0-2,7")
        self.assertEqual(IDset("1-2"), IDset([1, 2]))
        big = IDset("0-1000000000")
        self.assertEqual(len(big), 1000000001)
        self.assertIn(999999999, big)

    def test_invalid(self):
        for bad in ("01", "1-", "a", "3-1", "1,,2", " 1", "[1", "-1"):
            with self.assertRaises(ValueError, msg=bad):
                IDset(bad)
        with self.assertRaises(ValueError):
            IDset().set(-1)


class TestHostlist(unittest.TestCase):
    CASES = [
        "foo1,foo2,foo3", "foo1,foo3,foo2", "foo[1-3,5],bar", "foo01,foo02,foo3",
        "a1b1,a1b2", "foo9,foo10", "foo[1-2]-ib,foo3-ib", "host,host",
        "foo007,foo8", "f1,g1,f2", "foo[01-9]", "a,,b", "foo[1-2,2]", "[1-2]",
        "foo[008-010]", "foo[08-10],foo11", "n[1-3],n[5-6],m1,n7", "x,x1,x2",
        "rack1-n1,rack1-n2,rack2-n1",
    ]

    def test_basic(self):
        hl = Hostlist("foo[1-3],bar")
        self.assertEqual(len(hl), 4)
        self.assertEqual(list(hl), ["foo1", "foo2", "foo3", "bar"])
        self.assertEqual((hl[0], hl[-1], hl[1:3]), ("foo1", "bar", ["foo2", "foo3"]))
        self.assertEqual(str(hl), "foo[1-3],bar")
        self.assertEqual(hl.encode(), "foo[1-3],bar")
        self.assertEqual(repr(hl), "Hostlist('foo[1-3],bar')")
        self.assertIn("foo2", hl)
        self.assertNotIn("foo4", hl)
        self.assertEqual(str(Hostlist(["foo1", "foo[2-3]"])), "foo[1-3]")
        self.assertEqual(hl.append("foo4"), 1)
        self.assertEqual(hl.delete("bar"), 1)
        self.assertEqual(str(hl), "foo[1-4]")
        self.assertEqual(str(Hostlist("b2,a1,b1,a1").uniq()), "a1,b[1-2]")
        self.assertEqual(str(Hostlist("foo10,foo9").sort()), "foo[9-10]")
        with self.assertRaises(IndexError):
            hl[10]

    def test_invalid(self):
        for bad in ("foo[3-1]", "foo[", "foo]", "foo[1-2]x[1-2]", "a, b", "foo[]", "foo[a-b]"):
            with self.assertRaises(ValueError, msg=bad):
                Hostlist(bad)
        with self.assertRaises(TypeError):
            Hostlist(3)

    def test_round_trip_and_flux_hostlist(self):
        binary = fluxtest.flux_binary()
        for text in self.CASES:
            hl = Hostlist(text)
            self.assertEqual(list(Hostlist(str(hl))), list(hl), text)
            if binary is None:
                continue
            res = subprocess.run([binary, "hostlist", text], stdout=subprocess.PIPE, check=True)
            self.assertEqual(str(hl), res.stdout.decode().strip(), text)
            res = subprocess.run([binary, "hostlist", "-e", text], stdout=subprocess.PIPE, check=True)
            self.assertEqual(list(hl), res.stdout.decode().split(), text)


class _Tty(io.StringIO):
    def isatty(self):
        return True


class TestBottombar(unittest.TestCase):
    """The parts of flux.progress.Bottombar src/test/throughput.py uses."""

    def run_bar(self, stream):
        counts = {"n": 0}

        def statusline(bar, width):
            self.assertIsInstance(width, int)
            return "%d jobs done" % counts["n"]

        with mock.patch("sys.stdout", stream), mock.patch(
            "shutil.get_terminal_size", return_value=os.terminal_size((80, 24))
        ):
            bar = Bottombar(statusline).start()
            self.assertIsInstance(bar, Bottombar)
            for _ in range(3):
                counts["n"] += 1
                bar.update()
            bar.stop()
            bar.stop()  # a second stop does nothing
        return stream.getvalue()

    def test_not_a_terminal(self):
        self.assertEqual(self.run_bar(io.StringIO()), "3 jobs done\n")

    def test_terminal(self):
        out = self.run_bar(_Tty())
        self.assertIn("\033[1;23r", out)  # scroll region leaves the last row
        self.assertIn("\033[24;1H", out)
        self.assertIn("2 jobs done", out)
        self.assertTrue(out.endswith("3 jobs done\n"))

    def test_kwargs_and_elapsed(self):
        bar = Bottombar(count=1)
        self.assertEqual(bar.count, 1)
        bar.update(count=2)
        self.assertEqual(bar.count, 2)
        self.assertEqual(bar.elapsed, 0.0)
        with self.assertRaises(AttributeError):
            bar.nope  # pylint: disable=pointless-statement


if __name__ == "__main__":
    unittest.main()
