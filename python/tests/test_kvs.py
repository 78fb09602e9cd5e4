"""The KVS against a real instance."""

import errno
import unittest

import fluxtest

import flux
import flux.kvs


class TestKVS(fluxtest.InstanceTestCase):
    def test_put_commit_get(self):
        flux.kvs.put(self.h, "pytest.a", 42)
        flux.kvs.put(self.h, "pytest.b", {"x": [1, 2], "y": "z"})
        flux.kvs.put(self.h, "pytest.s", "a string")
        flux.kvs.put(self.h, "pytest.raw", b"\x00\x01\xff")
        resp = flux.kvs.commit(self.h)
        self.assertIn("rootref", resp)
        self.assertEqual(flux.kvs.get(self.h, "pytest.a"), 42)
        self.assertEqual(flux.kvs.get(self.h, "pytest.b"), {"x": [1, 2], "y": "z"})
        self.assertEqual(flux.kvs.get(self.h, "pytest.s"), "a string")
        self.assertEqual(flux.kvs.get(self.h, "pytest.raw"), b"\x00\x01\xff")
        self.assertEqual(flux.kvs.get_key_raw(self.h, "pytest.a"), b"42")
        # the flux kvs command sees the same values
        out = self.inst.flux("kvs", "get", "pytest.b")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.decode().strip(), '{"x": [1, 2], "y": "z"}')

    def test_values_from_flux_kvs_put(self):
        out = self.inst.flux("kvs", "put", "pytest.cli=17", "pytest.cli2=hello")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(flux.kvs.get(self.h, "pytest.cli"), 17)
        self.assertEqual(flux.kvs.get(self.h, "pytest.cli2"), "hello")

    def test_missing(self):
        with self.assertRaises(OSError) as cm:
            flux.kvs.get(self.h, "pytest.no.such.key")
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertFalse(flux.kvs.exists(self.h, "pytest.no.such.key"))

    def test_directories(self):
        flux.kvs.put_mkdir(self.h, "pytest.dir")
        flux.kvs.put(self.h, "pytest.dir.sub.v", 1)
        flux.kvs.put(self.h, "pytest.dir.w", 2)
        flux.kvs.commit(self.h)
        self.assertTrue(flux.kvs.isdir(self.h, "pytest.dir"))
        self.assertFalse(flux.kvs.isdir(self.h, "pytest.dir.w"))
        self.assertTrue(flux.kvs.exists(self.h, "pytest.dir"))
        d = flux.kvs.get_dir(self.h, "pytest.dir")
        self.assertEqual(sorted(d.keys()), ["sub", "w"])
        self.assertEqual(d.files(), ["w"])
        self.assertEqual(d.directories(), ["sub"])
        self.assertEqual(d["w"], 2)
        self.assertEqual(d["sub"]["v"], 1)
        self.assertIn("w", d)
        self.assertNotIn("nope", d)
        with self.assertRaises(KeyError):
            d["nope"]  # pylint: disable=pointless-statement
        # flux-core's walk(): paths relative to the top, bottom-up unless
        # topdown=True; a key needs flux_handle=
        walked = list(flux.kvs.walk("pytest.dir", flux_handle=self.h))
        self.assertEqual(walked, [("sub", [], ["v"]), ("", ["sub"], ["w"])])
        walked = list(flux.kvs.walk(d, topdown=True))
        self.assertEqual([p for p, _, _ in walked], ["", "sub"])
        with self.assertRaises(ValueError):
            list(flux.kvs.walk("pytest.dir"))
        self.assertEqual(flux.kvs.join("a", "", "b"), "a.b")
        with self.assertRaises(OSError) as cm:
            flux.kvs.get_dir(self.h, "pytest.dir.w")
        self.assertEqual(cm.exception.errno, errno.ENOTDIR)

    def test_kvsdir_writes_and_unlink(self):
        root = flux.kvs.get_dir(self.h, ".")
        # mkdir() commits at once; fill() stores a dict as one JSON value
        root.mkdir("pytest.kd", {"a": 1, "nested": {"b": "two"}, "sub.c": 3})
        d = flux.kvs.KVSDir(self.h, "pytest.kd")
        self.assertEqual(d["a"], 1)
        self.assertEqual(flux.kvs.get(self.h, "pytest.kd.nested"), {"b": "two"})
        self.assertEqual(flux.kvs.get(self.h, "pytest.kd.sub.c"), 3)
        self.assertTrue(d.exists("sub"))
        self.assertEqual(sorted(d.files()), ["a", "nested"])
        self.assertEqual(d.list_all(), (d.files(), ["sub"]))
        # a subdirectory reached through d shares its transaction
        d["sub"]["e"] = 5
        self.assertFalse(flux.kvs.exists(self.h, "pytest.kd.sub.e"))
        d.commit()
        self.assertEqual(flux.kvs.get(self.h, "pytest.kd.sub.e"), 5)
        del d["sub"]
        d.commit()
        del d["a"]
        d["c"] = [3]
        d.commit()
        self.assertEqual(sorted(d.keys()), ["c", "nested"])
        self.assertEqual(dict(d.items()), {"c": [3], "nested": {"b": "two"}})
        flux.kvs.put_unlink(self.h, "pytest.kd")
        flux.kvs.commit(self.h)
        self.assertFalse(flux.kvs.exists(self.h, "pytest.kd"))

    def test_kvsdir_has_its_own_transaction(self):
        flux.kvs.put_mkdir(self.h, "pytest.own")
        flux.kvs.commit(self.h)
        flux.kvs.put(self.h, "pytest.own.handle", 1)  # the handle's txn
        d = flux.kvs.get_dir(self.h, "pytest.own")
        d["dir"] = 2
        d.commit()
        self.assertEqual(d["dir"], 2)
        self.assertFalse(d.exists("handle"))
        flux.kvs.commit(self.h)
        self.assertEqual(d["handle"], 1)
        with self.assertRaises(OSError) as cm:
            flux.kvs.KVSDir(self.h, "pytest.no.such.dir")
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        with flux.kvs.KVSTxn(self.h, "pytest.own") as txn:
            txn.put("t", "x")
            txn.mkdir("m")
            txn.symlink("l", "pytest.own.t")
            txn.unlink("dir")
        self.assertEqual(sorted(d.keys()), ["handle", "l", "m", "t"])
        self.assertEqual(d["l"], "x")
        self.assertEqual(sorted(d.files()), ["handle", "l", "t"])
        with self.assertRaises(ValueError):
            flux.kvs.put(self.h, "", 1)

    def test_watch(self):
        flux.kvs.put(self.h, "pytest.watched", 1)
        flux.kvs.commit(self.h)
        fut = flux.kvs.kvs_watch_async(self.h, "pytest.watched")
        self.assertEqual(fut.get(), 1)
        other = flux.Flux(self.inst.uri)
        try:
            flux.kvs.put(other, "pytest.watched", {"v": 2})
            flux.kvs.commit(other)
            self.assertEqual(fut.get(), {"v": 2})
            fut.cancel()
            self.assertIsNone(fut.get())
            fut = flux.kvs.kvs_watch_async(self.h, "pytest.created.later", waitcreate=True)
            flux.kvs.put(other, "pytest.created.later", "now")
            flux.kvs.commit(other)
            self.assertEqual(fut.get(), "now")
            fut.cancel()
            self.assertIsNone(fut.get())
        finally:
            other.close()
        with self.assertRaises(OSError) as cm:
            flux.kvs.kvs_watch_async(self.h, "pytest.never.there").get()
        self.assertEqual(cm.exception.errno, errno.ENOENT)

    def test_namespace_create_remove(self):
        flux.kvs.namespace_create(self.h, "pytest-ns")
        try:
            self.assertIn("pytest-ns", flux.kvs.namespace_list(self.h))
            flux.kvs.put(self.h, "k", 5, namespace="pytest-ns")
            flux.kvs.commit(self.h, namespace="pytest-ns")
            self.assertEqual(flux.kvs.get(self.h, "k", namespace="pytest-ns"), 5)
            self.assertFalse(flux.kvs.exists(self.h, "k"))
            with self.assertRaises(OSError) as cm:
                flux.kvs.namespace_create(self.h, "pytest-ns")
            self.assertEqual(cm.exception.errno, errno.EEXIST)
        finally:
            flux.kvs.namespace_remove(self.h, "pytest-ns")

    def test_symlink(self):
        flux.kvs.put(self.h, "pytest.target", "t")
        flux.kvs.put_symlink(self.h, "pytest.link", "pytest.target")
        flux.kvs.commit(self.h)
        self.assertEqual(flux.kvs.readlink(self.h, "pytest.link"), ("pytest.target", None))
        self.assertEqual(flux.kvs.get(self.h, "pytest.link"), "t")

    def test_uncommitted_is_invisible_and_per_handle(self):
        other = flux.Flux(self.inst.uri)
        try:
            flux.kvs.put(self.h, "pytest.pending", 1)
            self.assertFalse(flux.kvs.exists(other, "pytest.pending"))
            flux.kvs.commit(other)  # other's (empty) transaction
            self.assertFalse(flux.kvs.exists(self.h, "pytest.pending"))
            flux.kvs.commit(self.h)
            self.assertEqual(flux.kvs.get(other, "pytest.pending"), 1)
        finally:
            other.close()

    def test_version_and_namespaces(self):
        v1 = flux.kvs.get_version(self.h)
        flux.kvs.put(self.h, "pytest.ver", 1)
        flux.kvs.commit(self.h)
        self.assertGreater(flux.kvs.get_version(self.h), v1)
        self.assertIn("primary", flux.kvs.namespace_list(self.h))
        with self.assertRaises(OSError):
            flux.kvs.get(self.h, "pytest.ver", namespace="no-such-namespace")


if __name__ == "__main__":
    unittest.main()
