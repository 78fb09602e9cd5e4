"""Jobspec (RFC 14, version 1 per RFC 25): what a job runs and on which
resources.

``JobspecV1.from_command(["hostname"], num_tasks=2, num_nodes=2)`` builds
the jobspec the submit commands would; setters and ``setattr()`` adjust
it; ``dumps()`` is the JSON sent to job-ingest.
"""

import datetime
import json
import math
import numbers
import os
from collections import abc

from flux.util import Fileref, parse_fsd

def _set_tree(d, dotted, value):
    keys = dotted.split(".")
    for k in keys[:-1]:
        nxt = d.get(k)
        if not isinstance(nxt, abc.MutableMapping):
            nxt = {}
            d[k] = nxt
        d = nxt
    d[keys[-1]] = value


def _attr_key(key):
    """'system.duration' or 'attributes.system.duration' -> full key.
    Bare keys (neither system. nor user.) go under attributes.system."""
    if key.startswith("attributes."):
        return key
    if key.startswith("system.") or key.startswith("user."):
        return "attributes." + key
    return "attributes.system." + key


def _check_count(count, what):
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError("%s must be an integer >= 1" % what)


class Jobspec:
    """A jobspec: resources, tasks, attributes, version."""

    def __init__(self, resources, tasks, attributes=None, version=1):
        if not isinstance(resources, abc.Sequence) or isinstance(resources, str):
            raise TypeError("resources must be a sequence")
        if not isinstance(tasks, abc.Sequence) or isinstance(tasks, str):
            raise TypeError("tasks must be a sequence")
        if attributes is None:
            attributes = {}
        if not isinstance(attributes, abc.Mapping):
            raise TypeError("attributes must be a mapping")
        if not isinstance(version, int) or version < 1:
            raise ValueError("version must be an integer >= 1")
        for task in tasks:
            if "command" not in task or "slot" not in task or "count" not in task:
                raise ValueError("each task needs command, slot and count")
            cmd = task["command"]
            if isinstance(cmd, str) or not isinstance(cmd, abc.Sequence) or not cmd:
                raise TypeError("task command must be a non-empty list of strings")
        self.jobspec = {
            "resources": list(resources),
            "tasks": list(tasks),
            "attributes": dict(attributes),
            "version": version,
        }

    # -- construction from text ------------------------------------------
    @classmethod
    def from_yaml_stream(cls, stream):
        """A jobspec from YAML (or JSON) text or a file object. JSON needs
        nothing more; YAML needs the yaml module."""
        text = stream.read() if hasattr(stream, "read") else stream
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            try:
                import yaml  # pylint: disable=import-outside-toplevel
            except ImportError:
                raise ValueError(
                    "jobspec is not JSON, and YAML needs the yaml module"
                ) from None
            data = yaml.safe_load(text)
        return cls(**data)

    @classmethod
    def from_yaml_file(cls, filename):
        with open(filename, encoding="utf-8") as f:
            return cls.from_yaml_stream(f)

    from_json = from_yaml_stream

    # -- sections ----------------------------------------------------------
    @property
    def resources(self):
        return self.jobspec.get("resources")

    @property
    def tasks(self):
        return self.jobspec.get("tasks")

    @property
    def attributes(self):
        return self.jobspec.get("attributes")

    @property
    def version(self):
        return self.jobspec.get("version")

    # -- attributes --------------------------------------------------------
    def getattr(self, key):
        """An attribute by dotted key ("system.duration"); KeyError if unset."""
        value = self.jobspec
        for k in _attr_key(key).split("."):
            if not isinstance(value, abc.Mapping) or k not in value:
                raise KeyError(key)
            value = value[k]
        return value

    def setattr(self, key, val):
        """Set an attribute by dotted key ("system.cwd", "user.x")."""
        _set_tree(self.jobspec, _attr_key(key), val)

    def setattr_shell_option(self, key, val):
        """Set a job shell option (attributes.system.shell.options.KEY)."""
        self.setattr("system.shell.options." + key, val)

    def add_file(self, path, data, perms=0o600, encoding=None):
        """Add a file to the RFC 37 archive attributes.system.files under
        name path. data is a dict (JSON content), the content itself when
        it has a newline or encoding is given, else a local file to read
        (see flux.util.Fileref)."""
        if not isinstance(data, (abc.Mapping, str)):
            raise TypeError("data must be a Mapping or string")
        if encoding is None and isinstance(data, str) and "\n" in data:
            encoding = "utf-8"
        system = self.jobspec.setdefault("attributes", {}).setdefault("system", {})
        files = system.get("files", {})
        files[path] = Fileref(dict(data) if isinstance(data, abc.Mapping) else data,
                              perms=perms, encoding=encoding)
        system["files"] = files

    def _get_system(self, key):
        try:
            return self.jobspec["attributes"]["system"][key]
        except KeyError:
            return None

    @property
    def duration(self):
        """Time limit in seconds (0: none). Set with a number, an RFC 23
        duration string ("10m") or a datetime.timedelta."""
        return self._get_system("duration")

    @duration.setter
    def duration(self, duration):
        if isinstance(duration, str):
            secs = parse_fsd(duration)
        elif isinstance(duration, datetime.timedelta):
            secs = duration.total_seconds()
        elif isinstance(duration, numbers.Real) and not isinstance(duration, bool):
            secs = float(duration)
        else:
            raise TypeError("duration must be a number, string or timedelta")
        if secs < 0:
            raise ValueError("duration must not be negative")
        if math.isnan(secs) or math.isinf(secs):
            raise ValueError("duration must be a finite value")
        self.setattr("system.duration", secs)

    @property
    def cwd(self):
        """Working directory of the job."""
        return self._get_system("cwd")

    @cwd.setter
    def cwd(self, cwd):
        if isinstance(cwd, os.PathLike):
            cwd = os.fspath(cwd)
        if not isinstance(cwd, str):
            raise ValueError("cwd must be a string")
        self.setattr("system.cwd", cwd)

    @property
    def environment(self):
        """Environment of the job (a mapping)."""
        return self._get_system("environment")

    @environment.setter
    def environment(self, environ):
        if not isinstance(environ, abc.Mapping):
            raise ValueError("environment must be a mapping")
        self.setattr("system.environment", environ)

    @property
    def queue(self):
        return self._get_system("queue")

    @queue.setter
    def queue(self, queue):
        if not isinstance(queue, str):
            raise TypeError("queue must be a string")
        self.setattr("system.queue", queue)

    def _io_path(self, iotype, stream):
        try:
            return self.getattr("system.shell.options.%s.%s.path" % (iotype, stream))
        except KeyError:
            return None

    def _set_io_path(self, iotype, stream, path):
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError("path must be a string or path object")
        self.setattr_shell_option("%s.%s.type" % (iotype, stream), "file")
        self.setattr_shell_option("%s.%s.path" % (iotype, stream), path)

    @property
    def input(self):
        return self._io_path("input", "stdin")

    @input.setter
    def input(self, path):
        self._set_io_path("input", "stdin", path)

    @property
    def output(self):
        return self._io_path("output", "stdout")

    @output.setter
    def output(self, path):
        self._set_io_path("output", "stdout", path)

    @property
    def error(self):
        return self._io_path("output", "stderr")

    @error.setter
    def error(self, path):
        self._set_io_path("output", "stderr", path)

    stdin = input
    stdout = output
    stderr = error

    # -- output ------------------------------------------------------------
    def dumps(self, **kwargs):
        """The jobspec as JSON text."""
        return json.dumps(self.jobspec, ensure_ascii=False, **kwargs)

    # -- resources ---------------------------------------------------------
    def __iter__(self):
        """Depth-first walk of the resources."""

        def walk(res_list):
            for res in res_list:
                yield res
                yield from walk(res.get("with", []))

        return walk(self.resources or [])

    def resource_walk(self):
        """(parent, resource, total count) for each resource, depth first."""

        def walk(res_list, parent, mult):
            for res in res_list:
                count = mult * res["count"]
                yield parent, res, count
                yield from walk(res.get("with", []), res, count)

        return walk(self.resources or [], None, 1)

    def resource_counts(self):
        """Total count of each resource type."""
        counts = {}
        for _, res, count in self.resource_walk():
            counts[res["type"]] = counts.get(res["type"], 0) + count
        return counts

    def __repr__(self):
        return "%s(%r, %r, attributes=%r, version=%r)" % (
            type(self).__name__,
            self.resources,
            self.tasks,
            self.attributes,
            self.version,
        )

    def __str__(self):
        return str(self.jobspec)


def _resource(rtype, count, children=None, exclusive=False):
    res = {"type": rtype, "count": count}
    if exclusive:
        res["exclusive"] = True
    if children:
        res["with"] = children
    return res


def _slot(count, children):
    res = _resource("slot", count, children)
    res["label"] = "task"
    return res


class JobspecV1(Jobspec):
    """A version 1 jobspec (RFC 25): attributes.system.duration required,
    task counts per_slot or total."""

    def __init__(self, resources, tasks, attributes=None, version=1):
        if version != 1:
            raise ValueError("version must be 1")
        if attributes is None:
            attributes = {"system": {"duration": 0}}
        super().__init__(resources, tasks, attributes=attributes, version=1)
        system = self.jobspec["attributes"].get("system")
        if not isinstance(system, abc.Mapping):
            raise ValueError("attributes.system is a required mapping")
        if not isinstance(system.get("duration"), numbers.Number):
            raise ValueError("attributes.system.duration must be a number")
        for task in self.jobspec["tasks"]:
            if not {"per_slot", "total"} & set(task["count"]):
                raise ValueError("task count per_slot or total must be set")

    def _set_extra_options(
        self,
        duration=None,
        environment=None,
        env_expand=None,
        cwd=None,
        rlimits=None,
        name=None,
        input=None,  # pylint: disable=redefined-builtin
        output=None,
        error=None,
        label_io=False,
        unbuffered=False,
        queue=None,
        bank=None,
    ):
        if duration is not None:
            self.duration = duration
        self.environment = dict(os.environ) if environment is None else environment
        if env_expand is not None:
            if not isinstance(env_expand, abc.Mapping):
                raise ValueError("env_expand must be a mapping")
            self.setattr_shell_option("env-expand", dict(env_expand))
        if cwd is not None:
            self.cwd = cwd
        if rlimits is not None:
            if not isinstance(rlimits, abc.Mapping):
                raise ValueError("rlimits must be a mapping")
            self.setattr_shell_option("rlimit", dict(rlimits))
        if name is not None:
            self.setattr("system.job.name", name)
        if input is not None:
            self.input = input
        if output is not None and output not in ("none", "kvs"):
            self.output = output
            if label_io:
                self.setattr_shell_option("output.stdout.label", True)
        if error is not None and error not in ("none", "kvs"):
            self.error = error
            if label_io:
                self.setattr_shell_option("output.stderr.label", True)
        if unbuffered:
            self.setattr_shell_option("output.stdout.buffer.type", "none")
            self.setattr_shell_option("output.stderr.buffer.type", "none")
            self.setattr_shell_option("output.batch-timeout", 0.05)
        if queue is not None:
            self.queue = queue
        if bank is not None:
            self.setattr("system.bank", bank)
        return self

    @classmethod
    def from_command(
        cls,
        command,
        num_tasks=1,
        cores_per_task=1,
        gpus_per_task=None,
        num_nodes=None,
        exclusive=False,
        duration=None,
        environment=None,
        env_expand=None,
        cwd=None,
        rlimits=None,
        name=None,
        input=None,  # pylint: disable=redefined-builtin
        output=None,
        error=None,
        label_io=False,
        unbuffered=False,
        queue=None,
        bank=None,
    ):
        """The jobspec of `flux run`/`flux submit` for command (a list of
        strings): num_tasks tasks of cores_per_task cores (and
        gpus_per_task GPUs) each, spread over num_nodes nodes if given.
        environment defaults to os.environ; duration is seconds or an RFC
        23 string; cwd, name, queue, bank, rlimits, env_expand, input,
        output, error, label_io, unbuffered as for flux submit."""
        if isinstance(command, str) or not isinstance(command, abc.Sequence):
            raise TypeError("command must be a list of strings")
        command = list(command)
        if not command:
            raise ValueError("command must not be empty")
        _check_count(num_tasks, "task count")
        _check_count(cores_per_task, "cores per task")
        if gpus_per_task is not None:
            if not isinstance(gpus_per_task, int) or gpus_per_task < 0:
                raise ValueError("gpus per task must be an integer >= 0")
        if num_nodes is not None:
            _check_count(num_nodes, "node count")
            if num_nodes > num_tasks:
                raise ValueError("node count must not be greater than task count")
        elif exclusive:
            raise ValueError("exclusive can only be set with a node count")
        children = [_resource("core", cores_per_task)]
        if gpus_per_task:
            children.append(_resource("gpu", gpus_per_task))
        count = {"per_slot": 1}
        if num_nodes is not None:
            slots_per_node = -(-num_tasks // num_nodes)
            if num_tasks % num_nodes:
                count = {"total": num_tasks}
            top = _resource(
                "node", num_nodes, [_slot(slots_per_node, children)], exclusive
            )
        else:
            top = _slot(num_tasks, children)
        tasks = [{"command": command, "slot": "task", "count": count}]
        jobspec = cls([top], tasks, attributes={"system": {"duration": 0}})
        return jobspec._set_extra_options(
            duration=duration,
            environment=environment,
            env_expand=env_expand,
            cwd=cwd,
            rlimits=rlimits,
            name=name,
            input=input,
            output=output,
            error=error,
            label_io=label_io,
            unbuffered=unbuffered,
            queue=queue,
            bank=bank,
        )

    @classmethod
    def from_nest_command(
        cls,
        command,
        num_slots=1,
        cores_per_slot=1,
        gpus_per_slot=None,
        num_nodes=None,
        broker_opts=None,
        exclusive=False,
        conf=None,
    ):
        """A jobspec running a nested instance (flux broker) whose initial
        program is command: one broker per node (shell option
        per-resource.type=node, mpi=none), num_slots slots of
        cores_per_slot cores (and gpus_per_slot GPUs) over num_nodes
        nodes. conf, a dict, goes in the file archive as conf.json and
        the brokers get -c{{tmpdir}}/conf.json."""
        broker_opts = list(broker_opts or [])
        if conf is not None:
            broker_opts.append("-c{{tmpdir}}/conf.json")
        jobspec = cls.from_command(
            ["flux", "broker", *broker_opts, *command],
            num_tasks=num_slots,
            cores_per_task=cores_per_slot,
            gpus_per_task=gpus_per_slot,
            num_nodes=num_nodes,
            exclusive=exclusive,
        )
        jobspec.setattr_shell_option("per-resource.type", "node")
        jobspec.setattr_shell_option("mpi", "none")
        if conf is not None:
            jobspec.add_file("conf.json", conf)
        return jobspec

    @classmethod
    def from_batch_command(
        cls,
        script,
        jobname,
        args=None,
        num_slots=1,
        cores_per_slot=1,
        gpus_per_slot=None,
        num_nodes=None,
        broker_opts=None,
        exclusive=False,
        conf=None,
    ):
        """A nested instance (see from_nest_command) whose initial program
        is script (text starting with "#!"), carried in the jobspec's file
        archive as "script" (mode 0700) and run as {{tmpdir}}/script with
        args; the job is named jobname."""
        if not script.startswith("#!"):
            raise ValueError("%s does not appear to start with '#!'" % jobname)
        jobspec = cls.from_nest_command(
            ["{{tmpdir}}/script", *(args or ())],
            num_slots=num_slots,
            cores_per_slot=cores_per_slot,
            gpus_per_slot=gpus_per_slot,
            num_nodes=num_nodes,
            broker_opts=broker_opts,
            exclusive=exclusive,
            conf=conf,
        )
        jobspec.add_file("script", script, perms=0o700, encoding="utf-8")
        jobspec.setattr("system.job.name", jobname)
        return jobspec

    @classmethod
    def per_resource(
        cls,
        command,
        ncores=None,
        nnodes=None,
        per_resource_type=None,
        per_resource_count=None,
        gpus_per_node=None,
        exclusive=False,
        **kwargs
    ):
        """A jobspec running per_resource_count tasks per node or core
        (shell option per-resource) on ncores cores and/or nnodes nodes."""
        if (per_resource_type is None) != (per_resource_count is None):
            raise ValueError("per_resource_type and per_resource_count go together")
        if per_resource_type is not None:
            if per_resource_type not in ("node", "core"):
                raise ValueError("per_resource_type must be node or core")
            _check_count(per_resource_count, "per_resource_count")
        if ncores is not None:
            _check_count(ncores, "ncores")
        if nnodes is not None:
            _check_count(nnodes, "nnodes")
        elif exclusive:
            raise ValueError("exclusive can only be set with a node count")
        if nnodes and ncores:
            if ncores < nnodes or ncores % nnodes:
                raise ValueError("ncores must be a multiple of nnodes")
            nslots, slot_size = 1, ncores // nnodes
        elif ncores:
            nslots, slot_size = ncores, 1
        elif nnodes:
            if not exclusive:
                raise ValueError("nnodes without ncores needs exclusive")
            nslots, slot_size = 1, 1
        else:
            raise ValueError("per_resource needs a node or core count")
        children = [_resource("core", slot_size)]
        if gpus_per_node:
            if not nnodes:
                raise ValueError("gpus_per_node needs nnodes")
            children.append(_resource("gpu", gpus_per_node))
        top = _slot(nslots, children)
        if nnodes:
            top = _resource("node", nnodes, [top], exclusive)
        tasks = [{"command": list(command), "slot": "task", "count": {"per_slot": 1}}]
        attributes = {"system": {"duration": 0}}
        if per_resource_type:
            _set_tree(
                attributes,
                "system.shell.options.per-resource",
                {"type": per_resource_type, "count": per_resource_count},
            )
        return cls([top], tasks, attributes=attributes)._set_extra_options(**kwargs)


def validate_jobspec(jobspec, require_version=None):
    """Check jobspec (text or a mapping) by building a Jobspec from it.
    Returns (0, None) or raises ValueError/TypeError."""
    if isinstance(jobspec, (str, bytes)):
        jobspec = json.loads(jobspec)
    if require_version == 1 or jobspec.get("version") == 1:
        JobspecV1(**jobspec)
    else:
        Jobspec(**jobspec)
    return 0, None
