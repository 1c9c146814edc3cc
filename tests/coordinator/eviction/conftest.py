"""The executor rig's fixtures (an emulated API server with the coordinator's namespace, and
the executor wired to it), for the executor's and the approval gate's tests."""

from tests.coordinator.eviction.executorrig import kube, rig

__all__ = ["kube", "rig"]
