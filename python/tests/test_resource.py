"""flux.resource: ResourceSet algebra on R documents, and resource_list /
resource_status against a real instance (compared with flux resource
list / status)."""

import json
import time
import unittest

import fluxtest

import flux
import flux.job
import flux.resource
from flux.hostlist import Hostlist
from flux.idset import IDset
from flux.job import JobspecV1
from flux.resource import ResourceSet, SchedResourceList

TIMEOUT = 60

R4 = {
    "version": 1,
    "execution": {
        "R_lite": [
            {"rank": "0-1", "children": {"core": "0-3", "gpu": "0"}},
            {"rank": "2-3", "children": {"core": "0-3"}},
        ],
        "starttime": 0,
        "expiration": 0,
        "nodelist": ["node[0-3]"],
        "properties": {"pbatch": "2-3"},
    },
}


class TestResourceSet(unittest.TestCase):
    def test_counts_and_forms(self):
        rs = ResourceSet(R4)
        self.assertEqual((rs.nnodes, rs.ncores, rs.ngpus), (4, 16, 2))
        self.assertEqual(rs.ranks, IDset("0-3"))
        self.assertEqual(rs.nodelist, Hostlist("node[0-3]"))
        self.assertEqual(rs.rlist, "rank[0-1]/core[0-3],gpu0 rank[2-3]/core[0-3]")
        self.assertEqual(str(rs), rs.rlist)
        self.assertEqual(rs.properties, "pbatch")
        self.assertEqual(json.loads(rs.get_properties()), {"pbatch": "2-3"})
        # encode() reads back the same; a JSON string is accepted too
        again = ResourceSet(rs.encode())
        self.assertEqual(again, rs)
        self.assertEqual(json.loads(rs.encode())["execution"]["nodelist"], ["node[0-3]"])
        self.assertEqual(ResourceSet().nnodes, 0)
        self.assertEqual(ResourceSet().rlist, "")

    def test_algebra(self):
        rs = ResourceSet(R4)
        alloc = ResourceSet(
            {
                "version": 1,
                "execution": {
                    "R_lite": [
                        {"rank": "0", "children": {"core": "0-3", "gpu": "0"}},
                        {"rank": "2", "children": {"core": "0-1"}},
                    ],
                    "nodelist": ["node[0,2]"],
                },
            }
        )
        free = rs - alloc
        # rank 0 is used up entirely and leaves the set
        self.assertEqual(free.rlist, "rank1/core[0-3],gpu0 rank2/core[2-3] rank3/core[0-3]")
        self.assertEqual(free.nodelist, Hostlist("node[1-3]"))
        self.assertEqual((free.nnodes, free.ncores, free.ngpus), (3, 10, 1))
        self.assertEqual(json.loads(free.get_properties()), {"pbatch": "2-3"})
        self.assertEqual((rs & alloc).rlist, alloc.rlist)
        self.assertEqual(free | alloc, rs)
        self.assertEqual(rs.copy_ranks("2-3").properties, "pbatch")
        self.assertEqual(rs.copy_ranks(1).rlist, "rank1/core[0-3],gpu0")
        self.assertEqual(rs.copy().remove_ranks("1-3").rlist, "rank0/core[0-3],gpu0")
        self.assertEqual(rs.host_ranks("node[3,1]"), [3, 1])
        with self.assertRaises(FileNotFoundError):
            rs.host_ranks("nosuchhost")
        self.assertEqual(rs.host_ranks("node1,nosuchhost", ignore_nomatch=True), [1])
        with self.assertRaises(ValueError):
            rs.copy().append(alloc)
        self.assertEqual(free.copy().append(alloc), rs)

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            ResourceSet({"version": 2, "execution": {}})
        with self.assertRaises(KeyError):
            ResourceSet({"execution": {}})
        with self.assertRaises(TypeError):
            ResourceSet(42)
        with self.assertRaisesRegex(ValueError, "nodelist has 1 hosts but R_lite has 2 ranks"):
            ResourceSet(
                {
                    "version": 1,
                    "execution": {
                        "R_lite": [{"rank": "0-1", "children": {"core": "0"}}],
                        "nodelist": ["a"],
                    },
                }
            )
        with self.assertRaisesRegex(ValueError, "rank"):
            ResourceSet({"version": 1, "execution": {"R_lite": [{"children": {}}]}})
        with self.assertRaisesRegex(ValueError, "invalid idset"):
            ResourceSet(
                {"version": 1, "execution": {"R_lite": [{"rank": "x", "children": {}}]}}
            )

    def test_sched_resource_list(self):
        down = {
            "version": 1,
            "execution": {
                "R_lite": [{"rank": "3", "children": {"core": "0-3"}}],
                "nodelist": ["node3"],
            },
        }
        rl = SchedResourceList({"all": R4, "down": down, "allocated": None})
        self.assertEqual(rl.up.ranks, IDset("0-2"))
        self.assertEqual(rl.free.ncores, 12)
        self.assertEqual(rl["free"].state, "free")
        with self.assertRaises(KeyError):
            rl["bogus"]  # pylint: disable=pointless-statement
        rl.filter("node[0-1]")
        self.assertEqual((rl.all.nnodes, rl.up.nnodes, rl.free.ngpus), (2, 2, 2))


def cli_counts(inst, state):
    """(nnodes, ncores, ngpus, nodelist) of flux resource list for state."""
    res = inst.flux(
        "resource", "list", "-n", "-s", state, "-o", "{nnodes} {ncores} {ngpus} {nodelist}"
    )
    if res.returncode != 0:
        raise AssertionError(res.stderr.decode())
    fields = res.stdout.decode().split()
    return (int(fields[0]), int(fields[1]), int(fields[2]), fields[3] if len(fields) > 3 else "")


class TestResourceList(fluxtest.InstanceTestCase):
    def test_matches_cli_and_tracks_a_running_job(self):
        # another test's job may still hold a core as this one starts:
        # compare once the instance is idle (the two reads are not one)
        deadline = time.time() + TIMEOUT
        rl = flux.resource.list.resource_list(self.h).get()
        while rl.allocated.ncores != 0 and time.time() < deadline:
            time.sleep(0.05)  # waiting for the other job's resources to be freed
            rl = flux.resource.list.resource_list(self.h).get()
        for state in ("free", "allocated", "down"):
            rset = rl[state]
            self.assertEqual(
                (rset.nnodes, rset.ncores, rset.ngpus, str(rset.nodelist)),
                cli_counts(self.inst, state),
                state,
            )
        self.assertEqual(rl.all.nnodes, self.inst.size)
        self.assertEqual(rl.all.ranks, IDset("0-%d" % (self.inst.size - 1)))
        self.assertGreater(rl.all.ncores, 0)

        js = JobspecV1.from_command(["sleep", "60"], num_tasks=1, cores_per_task=1)
        jobid = flux.job.submit(self.h, js)
        try:
            flux.job.wait_for(self.h, jobid, "start", timeout=TIMEOUT)
            R = flux.job.job_info_lookup(self.h, jobid, keys=["R"]).get()["R"]
            if isinstance(R, str):
                R = json.loads(R)
            job_rset = ResourceSet(R)
            rl2 = flux.resource.resource_list(self.h).get()
            self.assertEqual(rl2.allocated.ncores, rl.allocated.ncores + 1)
            self.assertEqual(rl2.free.ncores, rl.free.ncores - 1)
            self.assertEqual(len((rl2.allocated & job_rset).ranks), 1)
            self.assertEqual(
                (rl2.free.nnodes, rl2.free.ncores), cli_counts(self.inst, "free")[:2]
            )
        finally:
            flux.job.cancel(self.h, jobid)
            flux.job.wait_for(self.h, jobid, "clean", timeout=TIMEOUT)

    def test_then(self):
        got = []
        flux.resource.resource_list(self.h).then(lambda f: got.append(f.get().all.nnodes))
        self.h.reactor_run()
        self.assertEqual(got, [self.inst.size])


class TestResourceStatus(unittest.TestCase):
    """On its own instance, since it drains a rank."""

    @classmethod
    def setUpClass(cls):
        cls.inst = fluxtest.Instance(2)

    @classmethod
    def tearDownClass(cls):
        cls.inst.stop()

    def test_drain_and_allocated(self):
        h = flux.Flux(self.inst.uri)
        try:
            rs = flux.resource.status.ResourceStatusRPC(h).get()
            self.assertEqual(rs.all, IDset("0-1"))
            self.assertEqual(rs.online, IDset("0-1"))
            self.assertEqual(rs.avail, IDset("0-1"))
            self.assertEqual(len(rs.nodelist), 2)
            self.assertEqual(rs.drain_info, [])

            js = JobspecV1.from_command(["sleep", "60"], num_tasks=1)
            jobid = flux.job.submit(h, js)
            flux.job.wait_for(h, jobid, "start", timeout=TIMEOUT)
            job = flux.job.job_list_id(h, jobid, ["ranks"]).get_job()
            job_rank = int(job["ranks"])
            other = 1 - job_rank
            res = self.inst.flux("resource", "drain", str(job_rank), "busy rank")
            self.assertEqual(res.returncode, 0, res.stderr)
            res = self.inst.flux("resource", "drain", str(other), "idle rank")
            self.assertEqual(res.returncode, 0, res.stderr)

            rs = flux.resource.resource_status(h).get()
            self.assertEqual(rs.allocated, IDset(job_rank))
            self.assertEqual(rs.draining, IDset(job_rank))
            self.assertEqual(rs.drained, IDset(other))
            self.assertEqual(rs.avail, IDset())
            self.assertEqual(rs.get_idset("drained", "draining"), IDset("0-1"))
            info = rs.get_drain_info(other)
            self.assertEqual(info.reason, "idle rank")
            self.assertEqual(info.ranks, IDset(other))
            self.assertGreater(info.timestamp, 0)
            with self.assertRaises(ValueError):
                rs.get_drain_info(7)
            rs.filter(str(other))
            self.assertEqual((rs.all, rs.draining, rs.drained), (IDset(other), IDset(), IDset(other)))

            rl = flux.resource.resource_list(h).get()
            self.assertEqual(rl.down.ranks, IDset("0-1"))
            self.assertEqual(rl.up.nnodes, 0)

            flux.job.cancel(h, jobid)
            flux.job.wait_for(h, jobid, "clean", timeout=TIMEOUT)
            self.inst.flux("resource", "undrain", "0-1")
            rs = flux.resource.resource_status(h).get()
            self.assertEqual((rs.drained, rs.draining, rs.avail), (IDset(), IDset(), IDset("0-1")))
        finally:
            h.close()


if __name__ == "__main__":
    unittest.main()
