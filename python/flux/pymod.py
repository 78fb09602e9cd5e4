"""Runner of the pymod broker module (flux module load pymod
--module=FILE ARGS...): load FILE, register the "pymod" service on a
handle to the broker, and call the file's mod_main(handle, *ARGS)."""

import importlib.util
import os
import sys

import flux


def main(argv):
    if len(argv) < 1:
        print("usage: python -m flux.pymod FILE [ARGS...]", file=sys.stderr)
        return 2
    path, args = argv[0], argv[1:]
    spec = importlib.util.spec_from_file_location("pymod_user", path)
    if spec is None or spec.loader is None:
        print(f"pymod: {path}: not a Python file", file=sys.stderr)
        return 1
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, "mod_main"):
        print(f"pymod: {path} has no mod_main(f, *args)", file=sys.stderr)
        return 1
    handle = flux.Flux()
    handle.service_register("pymod").get()
    fd = os.environ.pop("FLUXGO_PYMOD_READY_FD", None)
    if fd is not None:
        # the module is running once mod_main enters its reactor: tell
        # the pymod module then (a mod_main that raises first makes
        # flux module load fail)
        run = handle.reactor_run

        def reactor_run(*a, **kw):
            nonlocal fd
            if fd is not None:
                try:
                    os.write(int(fd), b"1")
                    os.close(int(fd))
                except OSError:
                    pass
                fd = None
            return run(*a, **kw)

        handle.reactor_run = reactor_run
    mod.mod_main(handle, *args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
