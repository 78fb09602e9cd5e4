"""Jobs: build jobspecs, submit, watch eventlogs, list, wait, cancel,
reallocate (RFC 51)."""

from flux.job.JobID import JobID, id_encode, id_parse
from flux.job.Jobspec import Jobspec, JobspecV1, parse_fsd, validate_jobspec
from flux.job.submit import SubmitFuture, submit, submit_async, submit_get_id
from flux.job.event import (
    MAIN_EVENTS,
    EventLogEvent,
    JobEventWatchFuture,
    JobException,
    event_wait,
    event_watch,
    event_watch_async,
    wait_for,
)
from flux.job.info import (
    JobInfo,
    job_fields_to_attrs,
    resulttostr,
    statetostr,
    strtoresult,
    strtostate,
)
from flux.job.list import (
    JobList,
    JobListIdRPC,
    JobListRPC,
    get_job,
    job_list,
    job_list_id,
    job_list_inactive,
)
from flux.job.wait import (
    JobResultFuture,
    JobWaitResult,
    result,
    result_async,
    wait,
    wait_async,
    wait_get_status,
)
from flux.job.kill import (
    cancel,
    cancel_async,
    kill,
    kill_async,
    raise_async,
    raise_job,
    set_urgency,
    set_urgency_async,
)
from flux.job.realloc import (
    REALLOC_CANCEL,
    REALLOC_DENY,
    REALLOC_SUCCESS,
    REALLOC_UNSUPPORTED,
    ReallocFuture,
    realloc,
    realloc_async,
    realloc_cancel,
    realloc_cancel_async,
    realloc_spec,
    realloc_type_name,
    shell_release,
    shell_release_async,
    shell_service,
)
from flux.job.kvslookup import JobInfoLookupRPC, job_info_lookup
from flux.job.kvs import job_kvs, job_kvs_guest
from flux.job.executor import FluxExecutor, FluxExecutorFuture
from flux.job.stats import JobStats
from flux.job import stats  # noqa: F401,E402
