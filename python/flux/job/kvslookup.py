"""job-info.lookup: a job's KVS items (jobspec, R, eventlog ...),
answered by the job-info service (with access checks)."""

import json

from flux.core.rpc import RPC

# job-info.lookup flags
JSON_DECODE = 0x01
CURRENT = 0x02

_JSON_KEYS = ("jobspec", "R")


class JobInfoLookupRPC(RPC):
    """get() is the response dict ({"id": ..., key: value ...}); with
    decode=True the JSON values (jobspec, R) are decoded."""

    def __init__(self, *args, **kwargs):
        self.decode = kwargs.pop("decode", True)
        super().__init__(*args, **kwargs)

    def get(self):
        resp = super().get()
        if self.decode and resp:
            resp = dict(resp)
            for key in _JSON_KEYS:
                if isinstance(resp.get(key), str):
                    resp[key] = json.loads(resp[key])
        return resp

    def get_decode(self):
        self.decode = True
        return self.get()


def job_info_lookup(flux_handle, jobid, keys=("jobspec",), decode=True, current=False):
    """Look up keys of job jobid; current=True returns the jobspec/R as
    updated by later events."""
    flags = CURRENT if current else 0
    return JobInfoLookupRPC(
        flux_handle,
        "job-info.lookup",
        {"id": int(jobid), "keys": list(keys), "flags": flags},
        _compact=True,
        decode=decode,
    )
