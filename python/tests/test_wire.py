"""Offline tests: the message codec and the requests the package builds,
byte for byte against the flux-core transcripts in testdata/wire."""

import base64
import errno
import glob
import json
import os
import struct
import unittest

import fluxtest  # noqa: F401  (sets sys.path)

from flux import constants as C
from flux import sign
from flux.core.message import Message, ProtocolError, StreamDecoder
from flux.core.rpc import RPC
import flux.job
import flux.kvs
from flux.job import JobID, JobspecV1, Jobspec


def transcript(name):
    with open(os.path.join(fluxtest.WIRE, name + ".jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def client_messages(name, topic=None):
    return [
        d
        for d in transcript(name)
        if d["dir"] == "client->broker"
        and "encoded_hex" in d
        and (topic is None or d["topic"] == topic)
    ]


class FakeHandle:
    """Records what the package sends instead of talking to a broker."""

    def __init__(self):
        self.sent = []
        self.aux_txn = None
        self._error = None
        self._tag = 0

    def send(self, msg):
        self.sent.append(msg)

    def _register_rpc(self, rpc):
        self._tag += 1
        return self._tag

    def _unregister_rpc(self, tag):
        pass

    def rpc(self, topic, payload=None, nodeid=C.FLUX_NODEID_ANY, flags=0):
        return RPC(self, topic, payload, nodeid, flags)

    def _rpc_compact(self, topic, payload=None, nodeid=C.FLUX_NODEID_ANY, flags=0):
        return RPC(self, topic, payload, nodeid, flags, _compact=True)


class TestCodec(unittest.TestCase):
    def test_every_transcript_message_roundtrips(self):
        """Decode each message of every transcript, check the decoded
        fields, and re-encode it to the same bytes."""
        n = 0
        for path in sorted(glob.glob(os.path.join(fluxtest.WIRE, "*.jsonl"))):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    d = json.loads(line)
                    if "encoded_hex" not in d:
                        continue
                    raw = bytes.fromhex(d["encoded_hex"])
                    msg = Message.decode(raw)
                    hdr = d["header"]
                    self.assertEqual(msg.type_str, hdr["type"], path)
                    self.assertEqual(msg.flags, hdr["flags"])
                    self.assertEqual(msg.userid, hdr["userid"])
                    self.assertEqual(msg.rolemask, hdr["rolemask"])
                    if hdr["type"] == "request":
                        self.assertEqual(msg.nodeid, hdr["nodeid"])
                        self.assertEqual(msg.matchtag, hdr["matchtag"])
                    elif hdr["type"] == "response":
                        self.assertEqual(msg.errnum, hdr["errnum"])
                        self.assertEqual(msg.matchtag, hdr["matchtag"])
                    elif hdr["type"] == "event":
                        self.assertEqual(msg.seq, hdr["sequence"])
                    self.assertEqual(msg.topic, d["topic"])
                    self.assertEqual(msg.routes or [], d["routes"])
                    payload = d.get("payload")
                    if isinstance(payload, dict) and "_raw_hex" in payload:
                        self.assertEqual(msg.payload_raw, bytes.fromhex(payload["_raw_hex"]))
                    elif payload is not None and msg.errnum == 0:
                        self.assertEqual(msg.payload, payload)
                    self.assertEqual(msg.encode(), raw, path)
                    n += 1
        self.assertGreater(n, 50)

    def test_stream_framing(self):
        msg = Message(C.FLUX_MSGTYPE_REQUEST, "attr.get")
        msg.enable_routes()
        msg.set_json({"name": "size"}, compact=True)
        msg.matchtag = 1
        data = msg.encode_stream()
        magic, length = struct.unpack("=I", data[:4])[0], struct.unpack(">I", data[4:8])[0]
        self.assertEqual(magic, 0xFFEE0012)
        self.assertEqual(length, len(data) - 8)
        self.assertEqual(
            data[8:].hex(), client_messages("getattr")[0]["encoded_hex"]
        )
        # byte at a time through the stream decoder, two messages back to back
        dec = StreamDecoder()
        got = []
        for b in data + data:
            dec.feed(bytes((b,)))
            m = dec.next_message()
            if m is not None:
                got.append(m)
        self.assertEqual(len(got), 2)
        self.assertEqual(got[1].payload, {"name": "size"})

    def test_long_frames(self):
        msg = Message(C.FLUX_MSGTYPE_RESPONSE, "x" * 300)
        msg.payload = {"data": "y" * 70000}
        msg.errnum = 0
        back = Message.decode(msg.encode())
        self.assertEqual(back.topic, "x" * 300)
        self.assertEqual(back.payload["data"], "y" * 70000)
        self.assertFalse(back.flags & C.FLUX_MSGFLAG_ROUTE)

    def test_routes(self):
        msg = Message(C.FLUX_MSGTYPE_REQUEST, "a.b")
        msg.push_route("first")
        msg.push_route("second")
        raw = msg.encode()
        self.assertTrue(raw.startswith(b"\x06second\x05first\x00"))
        self.assertEqual(Message.decode(raw).routes, ["first", "second"])

    def test_malformed(self):
        for bad in (
            b"",
            b"\x05abc",
            b"\x14" + b"\x8f" + b"\x01" * 19,
            b"\x14" + b"\x8e\x02" + b"\x00" * 18,
            b"\x14\x8e\x01\x01\x02" + b"\x00" * 16,  # payload flag, no frame
        ):
            with self.assertRaises(ProtocolError) as cm:
                Message.decode(bad)
            self.assertEqual(cm.exception.errno, errno.EPROTO)
        dec = StreamDecoder()
        dec.feed(b"\x00\x00\x00\x00\x00\x00\x00\x00")
        with self.assertRaises(ProtocolError):
            dec.next_message()

    def test_payload_forms(self):
        msg = Message(C.FLUX_MSGTYPE_EVENT, "t")
        self.assertIsNone(msg.payload)
        msg.payload = "hello"
        self.assertEqual(msg.payload_raw, b"hello\0")
        self.assertEqual(msg.payload_str, "hello")
        msg.payload = b"\x01\x02"
        self.assertEqual(msg.payload_raw, b"\x01\x02")
        msg.payload = {"a": [1, 2]}
        self.assertEqual(msg.payload_raw, b'{"a": [1, 2]}\0')
        self.assertEqual(msg.payload, {"a": [1, 2]})
        msg.payload = None
        self.assertFalse(msg.flags & C.FLUX_MSGFLAG_PAYLOAD)


class TestRequests(unittest.TestCase):
    """The requests built by the package equal flux-core's, byte for byte."""

    def assertSent(self, h, name, topic, index=0):
        want = client_messages(name, topic)[0]["encoded_hex"]
        self.assertEqual(h.sent[index].encode().hex(), want)

    def test_seed001_snippet(self):
        # the Python snippet of seed 001, as flux-core's bindings send it
        want = client_messages("seed001-R.py", "job-info.lookup")[0]
        jobid = int(JobID(str(want["payload"]["id"])))
        h = FakeHandle()
        h.rpc("job-info.lookup", {"id": jobid, "keys": ["R"], "flags": 0})
        self.assertEqual(h.sent[0].encode().hex(), want["encoded_hex"])

    def test_getattr(self):
        h = FakeHandle()
        h._rpc_compact("attr.get", {"name": "size"})
        self.assertSent(h, "getattr", "attr.get")

    def test_job_info_lookup(self):
        h = FakeHandle()
        flux.job.job_info_lookup(h, 52898562048, keys=["eventlog"])
        self.assertSent(h, "job-eventlog", "job-info.lookup")

    def test_eventlog_watch_and_cancel(self):
        h = FakeHandle()
        fut = flux.job.event_watch_async(h, 52898562048)
        self.assertSent(h, "submit-py", "job-info.eventlog-watch")
        fut.cancel()
        self.assertSent(h, "submit-py", "job-info.eventlog-watch-cancel", index=1)

    def test_cancel(self):
        h = FakeHandle()
        flux.job.cancel_async(h, 148360921088)
        self.assertSent(h, "cancel-pending", "job-manager.raise")

    def test_kvs(self):
        h = FakeHandle()
        flux.kvs.put(h, "test.a", 42)
        flux.kvs.commit_async(h)
        self.assertSent(h, "kvs-put", "kvs.commit")
        h = FakeHandle()
        flux.kvs._lookup_async(h, "test.a")
        self.assertSent(h, "kvs-get", "kvs.lookup")

    def test_list_id(self):
        h = FakeHandle()
        h._tag = 2  # the transcript's third RPC on that connection
        flux.job.job_list_id(h, 135190806528, attrs=["queue"])
        self.assertSent(h, "alloc-bypass", "job-list.list-id")

    def test_event_publish(self):
        h = FakeHandle()
        msg = Message(C.FLUX_MSGTYPE_EVENT, "test.topic")
        msg.enable_routes()
        msg.set_json({"x": 1}, compact=True)
        h.send(msg)
        self.assertSent(h, "event-pub", "test.topic")

    def test_submit(self):
        """Resubmitting the transcript's jobspec gives the same bytes."""
        want = client_messages("submit-py", "job-ingest.submit")[0]
        hdr, body, _ = want["payload"]["J"].split(".")
        self.assertEqual(base64.b64decode(hdr), b"version\0i1\0userid\0i0\0mechanism\0snone\0")
        jobspec = json.loads(base64.b64decode(body))

        h = FakeHandle()
        J = sign.wrap(JobspecV1(**jobspec).dumps(), userid=0)
        self.assertEqual(J, want["payload"]["J"])
        flux.job.submit_async(h, J, pre_signed=True)
        self.assertEqual(h.sent[0].encode().hex(), want["encoded_hex"])

        # from_command builds the same jobspec flux submit -n1 true does
        system = jobspec["attributes"]["system"]
        js = JobspecV1.from_command(
            ["true"],
            environment=system["environment"],
            cwd=system["cwd"],
            rlimits=system["shell"]["options"]["rlimit"],
        )
        self.assertEqual(js.dumps(), base64.b64decode(body).decode())
        payload, header = sign.unwrap(J)
        self.assertEqual(header, {"version": 1, "userid": 0, "mechanism": "none"})
        self.assertEqual(json.loads(payload), jobspec)

    def test_noresponse_and_streaming_flags(self):
        h = FakeHandle()
        fut = h.rpc("x.y", None, flags=C.FLUX_RPC_NORESPONSE)
        self.assertEqual(h.sent[0].flags, 0x0D)  # topic|noresponse|route
        self.assertEqual(h.sent[0].matchtag, 0)
        self.assertIsNone(fut.get())
        h.rpc("x.y", {}, nodeid=1, flags=C.FLUX_RPC_STREAMING)
        self.assertEqual(h.sent[1].flags, 0x4B)
        self.assertEqual(h.sent[1].nodeid, 1)
        self.assertEqual(h.sent[1].matchtag, 1)


class TestJobID(unittest.TestCase):
    VECTORS = [
        (0, "ƒ1", "0x0", "0000.0000.0000.0000", "😃"),
        (1, "ƒ2", "0x1", "0000.0000.0000.0001", "😄"),
        (1234, "ƒNH", "0x4d2", "0000.0000.0000.04d2", "😁👌"),
        (3364, "ƒ211", "0xd24", "0000.0000.0000.0d24", None),
        (4294967295, "ƒ7YXq9G", "0xffffffff", "0000.0000.ffff.ffff", "😳🏪🍖🍸"),
        (6731191091817518, "ƒuZZybuNNy", "0x17e9fb8df16c2e", "0017.e9fb.8df1.6c2e", None),
        (2**64 - 1, "ƒjpXCZedGfVQ", "0xffffffffffffffff", "ffff.ffff.ffff.ffff", "🚹💗💧👗😷📷📚"),
    ]

    def test_vectors(self):
        for value, f58, hx, dothex, emoji in self.VECTORS:
            jid = JobID(value)
            self.assertEqual(jid.f58, f58)
            self.assertEqual(jid.hex, hx)
            self.assertEqual(jid.dothex, dothex)
            self.assertEqual(jid.kvs, "job." + dothex)
            self.assertEqual(str(jid), f58)
            if emoji:
                self.assertEqual(jid.emoji, emoji)
            for form in (f58, "f" + f58[1:], hx, dothex, "job." + dothex, jid.words, jid.emoji, str(value)):
                self.assertEqual(JobID(form), value, form)
        self.assertEqual(
            JobID(6731191091817518).words, "reform-remote-galileo--heart-package-academy"
        )
        self.assertEqual(JobID(" ƒuZZybuNNy\n"), 6731191091817518)

    def test_invalid(self):
        for bad in ("", "ƒ", "f0", "0x", "0xg", "1.2.3", "12a", "a-a-a--a-a-a", str(2**64)):
            with self.assertRaises(ValueError, msg=bad):
                JobID(bad)
        with self.assertRaises(ValueError):
            JobID(-1)


class TestJobspec(unittest.TestCase):
    def test_from_command(self):
        js = JobspecV1.from_command(
            ["hostname"],
            num_tasks=4,
            cores_per_task=2,
            num_nodes=2,
            duration="1.5m",
            environment={"A": "1"},
            cwd="/tmp",
            name="myjob",
        )
        self.assertEqual(
            js.resources,
            [
                {
                    "type": "node",
                    "count": 2,
                    "with": [
                        {
                            "type": "slot",
                            "count": 2,
                            "with": [{"type": "core", "count": 2}],
                            "label": "task",
                        }
                    ],
                }
            ],
        )
        self.assertEqual(js.tasks[0]["count"], {"per_slot": 1})
        self.assertEqual(js.duration, 90.0)
        self.assertEqual(js.environment, {"A": "1"})
        self.assertEqual(js.cwd, "/tmp")
        self.assertEqual(js.getattr("system.job.name"), "myjob")
        self.assertEqual(js.resource_counts(), {"node": 2, "slot": 4, "core": 8})
        # uneven distribution: total task count
        js = JobspecV1.from_command(["x"], num_tasks=3, num_nodes=2)
        self.assertEqual(js.tasks[0]["count"], {"total": 3})
        self.assertEqual(js.resources[0]["with"][0]["count"], 2)
        # default environment is os.environ
        self.assertEqual(JobspecV1.from_command(["x"]).environment, dict(os.environ))

    def test_invalid(self):
        with self.assertRaises(ValueError):
            JobspecV1.from_command(["x"], num_tasks=0)
        with self.assertRaises(ValueError):
            JobspecV1.from_command(["x"], num_tasks=1, num_nodes=2)
        with self.assertRaises(TypeError):
            JobspecV1.from_command("hostname")
        with self.assertRaises(ValueError):
            JobspecV1.from_command(["x"], duration=-1)
        with self.assertRaises(ValueError):
            JobspecV1.from_command(["x"], exclusive=True)

    def test_roundtrip(self):
        js = JobspecV1.from_command(["a", "b"], environment={})
        back = Jobspec.from_yaml_stream(js.dumps())
        self.assertEqual(back.jobspec, js.jobspec)
        self.assertEqual(flux.job.parse_fsd("2h"), 7200.0)
        self.assertEqual(flux.job.parse_fsd("10"), 10.0)
        self.assertEqual(flux.job.parse_fsd("250ms"), 0.25)
        with self.assertRaises(ValueError):
            flux.job.parse_fsd("10x")


if __name__ == "__main__":
    unittest.main()
