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
from flux.core.rpc import RPC

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
def _ops(flux_handle, namespace, _kvstxn):
    """The operation list to stage into: a KVSTxn's, or the handle's
    default transaction for namespace."""
    if _kvstxn is not None:
        if not isinstance(_kvstxn, KVSTxn):
            raise TypeError("_kvstxn must be a KVSTxn, not %s" % type(_kvstxn).__name__)
        return _kvstxn.ops
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


def _check_key(key):
    if not isinstance(key, str) or not key:
        raise ValueError("KVS key must be a non-empty string, not %r" % (key,))


def put(flux_handle, key, value, namespace=None, _kvstxn=None):
    """Stage storing value at key (commit() applies it)."""
    _check_key(key)
    _ops(flux_handle, namespace, _kvstxn).append(
        {"key": key, "flags": 0, "dirent": _val_dirent(encode_value(value))}
    )


def put_raw(flux_handle, key, data, namespace=None, _kvstxn=None):
    """Stage storing bytes (or a str) at key as is."""
    _check_key(key)
    if isinstance(data, str):
        data = data.encode("utf-8")
    _ops(flux_handle, namespace, _kvstxn).append(
        {"key": key, "flags": 0, "dirent": _val_dirent(bytes(data))}
    )


def append(flux_handle, key, data, namespace=None, _kvstxn=None):
    """Stage appending bytes (or a str) to the value at key."""
    _check_key(key)
    if isinstance(data, str):
        data = data.encode("utf-8")
    _ops(flux_handle, namespace, _kvstxn).append(
        {"key": key, "flags": C.FLUX_KVS_APPEND, "dirent": _val_dirent(bytes(data))}
    )


def put_mkdir(flux_handle, key, namespace=None, _kvstxn=None):
    """Stage creating an empty directory at key."""
    _check_key(key)
    _ops(flux_handle, namespace, _kvstxn).append(
        {"key": key, "flags": 0, "dirent": {"ver": 1, "type": "dir", "data": {}}}
    )


def put_unlink(flux_handle, key, namespace=None, _kvstxn=None):
    """Stage removing key (recursively for a directory)."""
    _check_key(key)
    _ops(flux_handle, namespace, _kvstxn).append({"key": key, "flags": 0, "dirent": None})


def put_symlink(
    flux_handle, key, target, target_namespace=None, namespace=None, _kvstxn=None
):
    """Stage making key a symlink to target."""
    _check_key(key)
    data = {"target": target}
    if target_namespace:
        data["namespace"] = target_namespace
    _ops(flux_handle, namespace, _kvstxn).append(
        {"key": key, "flags": 0, "dirent": {"ver": 1, "type": "symlink", "data": data}}
    )


def commit_async(flux_handle, flags=0, namespace=None, _kvstxn=None):
    """Send the staged operations (of the handle's transaction for
    namespace, or of the KVSTxn _kvstxn); returns the RPC (its get() is
    {"rootref", "rootseq"})."""
    if _kvstxn is not None:
        if not isinstance(_kvstxn, KVSTxn):
            raise TypeError("_kvstxn must be a KVSTxn, not %s" % type(_kvstxn).__name__)
        ops = list(_kvstxn.ops)
        _kvstxn.clear()
    else:
        ops = []
        if flux_handle.aux_txn:
            ops = flux_handle.aux_txn.pop(_namespace(namespace), [])
    return flux_handle._rpc_compact(
        "kvs.commit", {"namespace": _namespace(namespace), "flags": flags, "ops": ops}
    )


def commit(flux_handle, flags=0, namespace=None, _kvstxn=None):
    """Commit the staged operations atomically. Returns the commit
    response ({"rootref", "rootseq"})."""
    return commit_async(flux_handle, flags, namespace, _kvstxn).get()


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


def namespace_create(flux_handle, namespace, owner=None, flags=0):
    """Create KVS namespace namespace, owned by owner (default: the
    caller's uid)."""
    if owner is None:
        owner = os.getuid()
    flux_handle._rpc_compact(
        "kvs.namespace-create",
        {"namespace": namespace, "owner": int(owner), "flags": flags},
        nodeid=0,
    ).get()


def namespace_remove(flux_handle, namespace):
    """Remove KVS namespace namespace (completes in the background)."""
    flux_handle._rpc_compact(
        "kvs.namespace-remove", {"namespace": namespace}, nodeid=0
    ).get()


def _join(path, key):
    if path in ("", "."):
        return key
    return path.rstrip(".") + "." + key


def join(*args):
    """Join KVS path components with "." (skipping empty ones), as
    os.path.join does for files."""
    return ".".join(a for a in args if a)


class KVSTxn:
    """A KVS transaction of its own (not the handle's default one).

        with flux.kvs.KVSTxn(h, "base") as txn:   # commits at the end
            txn.put("a", 1)                       # base.a
            txn.mkdir("d"); txn.unlink("old"); txn.symlink("l", "base.a")

    Keys are relative to path (default: the root).
    """

    def __init__(self, flux_handle=None, path=".", namespace=None):
        self.fhdl = flux_handle
        self.path = path
        self.namespace = namespace
        self.ops = []

    def _key(self, key):
        return _join(self.path or ".", key)

    def put(self, key, value):
        put(self.fhdl, self._key(key), value, _kvstxn=self)

    def mkdir(self, key):
        put_mkdir(self.fhdl, self._key(key), _kvstxn=self)

    def unlink(self, key):
        put_unlink(self.fhdl, self._key(key), _kvstxn=self)

    def symlink(self, key, target):
        put_symlink(self.fhdl, self._key(key), target, _kvstxn=self)

    def clear(self):
        """Drop the staged operations."""
        self.ops = []

    def commit_async(self, flags=0):
        return commit_async(self.fhdl, flags, self.namespace, _kvstxn=self)

    def commit(self, flags=0):
        """Apply the staged operations (nothing to do if there are none)."""
        if not self.ops:
            return None
        return commit(self.fhdl, flags, self.namespace, _kvstxn=self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.commit()
        return False


class KVSDir:
    """A KVS directory as a mapping. Reads go to the KVS; writes are
    staged in the directory's transaction (shared with subdirectories
    reached through it) until commit() or the end of a with block.

        d = flux.kvs.get_dir(h, "test")
        d["x"] = 1
        d["sub"]["y"] = 2
        d.commit()
        "x" in d, d["x"], list(d), d.files(), d.directories()

    OSError(ENOENT / ENOTDIR) if path is not a directory.
    """

    def __init__(self, flux_handle=None, path=".", handle=None, namespace=None, _kvstxn=None):
        if flux_handle is None:
            raise ValueError("KVSDir needs a Flux handle")
        self.fhdl = flux_handle
        self.path = path or "."
        self.namespace = namespace
        listdir(flux_handle, self.path, namespace)  # must be a directory
        self.kvstxn = _kvstxn if _kvstxn is not None else KVSTxn(flux_handle, ".", namespace)

    def _entries(self):
        return listdir(self.fhdl, self.path, self.namespace)

    def key_at(self, key):
        """The full KVS key of key in this directory."""
        return _join(self.path, key)

    def exists(self, name):
        """True if name exists in this directory."""
        return exists(self.fhdl, self.key_at(name), self.namespace)

    def __getitem__(self, key):
        try:
            value = get(self.fhdl, self.key_at(key), self.namespace)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise KeyError(
                    "%s not found under directory %s" % (key, self.path)
                ) from None
            raise
        if isinstance(value, KVSDir):
            value.kvstxn = self.kvstxn
        return value

    def __setitem__(self, key, value):
        put(self.fhdl, self.key_at(key), value, _kvstxn=self.kvstxn)

    def __delitem__(self, key):
        put_unlink(self.fhdl, self.key_at(key), _kvstxn=self.kvstxn)

    def __contains__(self, key):
        return self.exists(key)

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
        """Names of the entries that are not directories (values and
        symlinks)."""
        return [k for k, t in self._entries().items() if t not in ("dir", "dirref")]

    def directories(self):
        """Names of the entries that are directories."""
        return [k for k, t in self._entries().items() if t in ("dir", "dirref")]

    def list_all(self):
        """(files, directories) of this directory."""
        entries = self._entries()
        dirs = [k for k, t in entries.items() if t in ("dir", "dirref")]
        files = [k for k, t in entries.items() if t not in ("dir", "dirref")]
        return files, dirs

    def mkdir(self, key, contents=None):
        """Create subdirectory key now (committed), then fill() it with
        contents if given."""
        put_mkdir(self.fhdl, self.key_at(key), _kvstxn=self.kvstxn)
        self.commit()
        if contents is not None:
            KVSDir(self.fhdl, self.key_at(key), namespace=self.namespace).fill(contents)

    def fill(self, contents):
        """Store every key/value of the mapping contents and commit. A key
        "a.b" goes into subdirectory a; a dict value is stored as one JSON
        value."""
        if contents is None:
            raise ValueError("contents must be non-None")
        try:
            for k, v in contents.items():
                self[k] = v
        finally:
            self.commit()

    def commit(self, flags=0):
        """Apply this directory's staged writes."""
        return self.kvstxn.commit(flags)

    def commit_async(self, flags=0):
        return self.kvstxn.commit_async(flags)

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
    return KVSDir(flux_handle, key, namespace=namespace)


def walk(directory, topdown=False, flux_handle=None, namespace=None):
    """Walk a KVS directory like os.walk(): (path, directories, files)
    for it and every directory below, path relative to directory ("" for
    directory itself). Subdirectories come first unless topdown=True.
    directory is a KVSDir, or a key (then flux_handle is required)."""
    if not isinstance(directory, KVSDir):
        if flux_handle is None:
            raise ValueError("If directory is a key, flux_handle must be specified")
        directory = KVSDir(flux_handle, directory, namespace=namespace)
    return _walk(directory, "", topdown)


def _walk(kvsdir, relpath, topdown):
    files, dirs = kvsdir.list_all()
    if topdown:
        yield relpath, dirs, files
    for name in dirs:
        sub = KVSDir(kvsdir.fhdl, kvsdir.key_at(name), namespace=kvsdir.namespace)
        yield from _walk(sub, join(relpath, name), topdown)
    if not topdown:
        yield relpath, dirs, files


class KVSWatchFuture(RPC):
    """A kvs-watch.lookup stream: get() is the key's next value (decoded
    like flux.kvs.get()), None once the watch has ended; cancel() ends it."""

    def get(self, autoreset=True):  # pylint: disable=arguments-differ
        try:
            resp = super().get()
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                return None
            raise
        value = decode_value(_val_bytes(resp["val"]))
        if autoreset:
            self.reset()
        return value

    def cancel(self, stop=False):
        """Ask kvs-watch to end the stream (get() then returns None)."""
        self.get_flux()._rpc_compact(
            "kvs-watch.cancel", {"matchtag": self.matchtag}, flags=C.FLUX_RPC_NORESPONSE
        )
        if stop:
            self.stop()


def kvs_watch_async(flux_handle, key, namespace=None, waitcreate=False, uniq=False, full=False):
    """Watch key: a KVSWatchFuture whose get() returns its current value,
    then each new value committed. waitcreate waits for a missing key
    instead of failing; uniq skips values equal to the last one; full also
    notices changes of a parent directory."""
    flags = C.FLUX_KVS_WATCH
    if waitcreate:
        flags |= C.FLUX_KVS_WAITCREATE
    if uniq:
        flags |= C.FLUX_KVS_WATCH_UNIQ
    if full:
        flags |= C.FLUX_KVS_WATCH_FULL
    return KVSWatchFuture(
        flux_handle,
        "kvs-watch.lookup",
        {"key": key, "namespace": _namespace(namespace), "flags": flags},
        flags=C.FLUX_RPC_STREAMING,
        _compact=True,
    )
