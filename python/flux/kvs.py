"""The KVS (RFC 11): get values and directories; stage puts, unlinks,
mkdirs and symlinks on the handle, then commit() them atomically.

Values are stored as JSON text (put(h, "a", 42) stores "42"); bytes are
stored raw. get() decodes JSON, falling back to the string (or bytes).

    flux.kvs.put(h, "test.a", 42)
    flux.kvs.commit(h)
    flux.kvs.get(h, "test.a")           # 42
"""

import base64
import errno
import json
import os

from flux import constants as C

PRIMARY = "primary"


def _namespace(namespace):
    if namespace:
        return namespace
    return os.environ.get("FLUX_KVS_NAMESPACE") or PRIMARY


def _lookup_async(flux_handle, key, flags=0, namespace=None):
    return flux_handle._rpc_compact(
        "kvs.lookup",
        {"key": key, "namespace": _namespace(namespace), "flags": flags},
    )


def lookup(flux_handle, key, flags=0, namespace=None):
    """The RFC 11 tree object at key (a dict: ver, type, data)."""
    return _lookup_async(flux_handle, key, flags, namespace).get()["val"]


def _val_bytes(obj):
    if obj.get("type") != "val":
        raise OSError(errno.EPROTO, "KVS lookup returned a %s object" % obj.get("type"))
    return base64.b64decode(obj.get("data", ""))


def decode_value(data):
    """A stored value: decoded JSON, else the string, else the bytes."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    if text.endswith("\0"):
        text = text[:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def get_key_raw(flux_handle, key, namespace=None):
    """The bytes stored at key."""
    return _val_bytes(lookup(flux_handle, key, 0, namespace))


def get(flux_handle, key, namespace=None):
    """The value at key (JSON-decoded when possible). A directory is
    returned as a KVSDir. OSError(ENOENT) if key does not exist."""
    try:
        obj = lookup(flux_handle, key, 0, namespace)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return KVSDir(flux_handle, key, namespace=namespace)
        raise
    return decode_value(_val_bytes(obj))


def exists(flux_handle, key, namespace=None):
    """True if key exists (value or directory)."""
    try:
        lookup(flux_handle, key, 0, namespace)
        return True
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return True
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise


def isdir(flux_handle, key, namespace=None):
    """True if key is a directory."""
    try:
        lookup(flux_handle, key, C.FLUX_KVS_READDIR, namespace)
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise


def readlink(flux_handle, key, namespace=None):
    """The target of symlink key (and its namespace, if set) as a tuple."""
    obj = lookup(flux_handle, key, C.FLUX_KVS_READLINK, namespace)
    if obj.get("type") != "symlink":
        raise OSError(errno.EINVAL, "%s is not a symlink" % key)
    data = obj.get("data", {})
    return data.get("target"), data.get("namespace")


def listdir(flux_handle, key=".", namespace=None):
    """{name: type} of the entries of directory key ("val", "valref",
    "dir", "dirref" or "symlink")."""
    obj = lookup(flux_handle, key, C.FLUX_KVS_READDIR, namespace)
    if obj.get("type") != "dir":
        raise OSError(errno.ENOTDIR, "%s is not a directory" % key)
    return {name: ent.get("type") for name, ent in obj.get("data", {}).items()}


# -- staged transaction ------------------------------------------------------
def _txn(flux_handle, namespace):
    if flux_handle.aux_txn is None:
        flux_handle.aux_txn = {}
    return flux_handle.aux_txn.setdefault(_namespace(namespace), [])


def _val_dirent(data):
    return {"ver": 1, "type": "val", "data": base64.b64encode(data).decode("ascii")}


def encode_value(value):
    """The bytes put() stores for value: bytes as is, else JSON text."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def put(flux_handle, key, value, namespace=None):
    """Stage storing value at key (commit() applies it)."""
    _txn(flux_handle, namespace).append(
        {"key": key, "flags": 0, "dirent": _val_dirent(encode_value(value))}
    )


def put_raw(flux_handle, key, data, namespace=None):
    """Stage storing bytes (or a str) at key as is."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    _txn(flux_handle, namespace).append(
        {"key": key, "flags": 0, "dirent": _val_dirent(bytes(data))}
    )


def append(flux_handle, key, data, namespace=None):
    """Stage appending bytes (or a str) to the value at key."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    _txn(flux_handle, namespace).append(
        {"key": key, "flags": C.FLUX_KVS_APPEND, "dirent": _val_dirent(bytes(data))}
    )


def put_mkdir(flux_handle, key, namespace=None):
    """Stage creating an empty directory at key."""
    _txn(flux_handle, namespace).append(
        {"key": key, "flags": 0, "dirent": {"ver": 1, "type": "dir", "data": {}}}
    )


def put_unlink(flux_handle, key, namespace=None):
    """Stage removing key (recursively for a directory)."""
    _txn(flux_handle, namespace).append({"key": key, "flags": 0, "dirent": None})


def put_symlink(flux_handle, key, target, target_namespace=None, namespace=None):
    """Stage making key a symlink to target."""
    data = {"target": target}
    if target_namespace:
        data["namespace"] = target_namespace
    _txn(flux_handle, namespace).append(
        {"key": key, "flags": 0, "dirent": {"ver": 1, "type": "symlink", "data": data}}
    )


def commit_async(flux_handle, flags=0, namespace=None):
    """Send the staged operations for namespace; returns the RPC (its
    get() is {"rootref", "rootseq"})."""
    ns = _namespace(namespace)
    ops = []
    if flux_handle.aux_txn:
        ops = flux_handle.aux_txn.pop(ns, [])
    return flux_handle._rpc_compact(
        "kvs.commit", {"namespace": ns, "flags": flags, "ops": ops}
    )


def commit(flux_handle, flags=0, namespace=None):
    """Commit the staged operations atomically. Returns the commit
    response ({"rootref", "rootseq"})."""
    return commit_async(flux_handle, flags, namespace).get()


def dropcache(flux_handle):
    """Drop the local KVS cache."""
    flux_handle._rpc_compact("kvs.dropcache").get()


def get_version(flux_handle, namespace=None):
    """The root sequence number of namespace."""
    resp = flux_handle._rpc_compact(
        "kvs.getroot", {"namespace": _namespace(namespace), "flags": 0}
    ).get()
    return resp["rootseq"]


def namespace_list(flux_handle):
    """Names of the KVS namespaces."""
    resp = flux_handle._rpc_compact("kvs.namespace-list").get()
    return [ns["namespace"] for ns in resp.get("namespaces", [])]


def _join(path, key):
    if path in ("", "."):
        return key
    return path + "." + key


class KVSDir:
    """A KVS directory as a mapping. Reads go to the KVS; writes are
    staged on the handle until commit() (or the end of a with block).

        d = flux.kvs.get_dir(h, "test")
        d["x"] = 1
        d.commit()
        "x" in d, d["x"], list(d.keys())
    """

    def __init__(self, flux_handle, path=".", namespace=None):
        self.fhdl = flux_handle
        self.path = path or "."
        self.namespace = namespace

    def _entries(self):
        return listdir(self.fhdl, self.path, self.namespace)

    def key_at(self, key):
        return _join(self.path, key)

    def __getitem__(self, key):
        try:
            return get(self.fhdl, self.key_at(key), self.namespace)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise KeyError(key) from None
            raise

    def __setitem__(self, key, value):
        put(self.fhdl, self.key_at(key), value, self.namespace)

    def __delitem__(self, key):
        put_unlink(self.fhdl, self.key_at(key), self.namespace)

    def __contains__(self, key):
        return exists(self.fhdl, self.key_at(key), self.namespace)

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self._entries())

    def keys(self):
        return list(self._entries().keys())

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def files(self):
        """Names of the entries that are values."""
        return [k for k, t in self._entries().items() if t in ("val", "valref")]

    def directories(self):
        """Names of the entries that are directories."""
        return [k for k, t in self._entries().items() if t in ("dir", "dirref")]

    def list_all(self, topdir=""):
        """(files, directories) of this directory."""
        return self.files(), self.directories()

    def mkdir(self, key, contents=None):
        """Stage a subdirectory, optionally filled from a dict."""
        put_mkdir(self.fhdl, self.key_at(key), self.namespace)
        if contents:
            KVSDir(self.fhdl, self.key_at(key), self.namespace).fill(contents)

    def fill(self, contents):
        """Stage every key/value of a dict (nested dicts as directories)."""
        for k, v in contents.items():
            if isinstance(v, dict):
                self.mkdir(k, v)
            else:
                self[k] = v

    def commit(self, flags=0):
        return commit(self.fhdl, flags, self.namespace)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.commit()
        return False

    def __repr__(self):
        return "KVSDir(%r)" % self.path


def get_dir(flux_handle, key=".", namespace=None):
    """KVSDir for directory key; OSError(ENOTDIR/ENOENT) otherwise."""
    listdir(flux_handle, key, namespace)
    return KVSDir(flux_handle, key, namespace)


def walk(flux_handle, key=".", namespace=None):
    """os.walk-style (path, dirs, files) triples under key."""
    entries = listdir(flux_handle, key, namespace)
    dirs = [k for k, t in entries.items() if t in ("dir", "dirref")]
    files = [k for k, t in entries.items() if t not in ("dir", "dirref")]
    yield key, dirs, files
    for d in dirs:
        yield from walk(flux_handle, _join(key, d), namespace)
