"""Resources: RFC 20 resource sets (ResourceSet), the scheduler's view
(resource_list -> SchedResourceList) and resource status
(resource_status -> ResourceStatus)."""

from flux.resource.ResourceSet import ResourceSet
from flux.resource.list import ResourceListRPC, SchedResourceList, resource_list
from flux.resource.status import (
    DrainInfo,
    ResourceStatus,
    ResourceStatusRPC,
    resource_status,
)
from flux.resource import list, status  # noqa: F401,E402  pylint: disable=redefined-builtin
