"""What the group and transaction coordinators share as I/O-free state machines (Kafka's
coordinator-common module): the result every call returns. The runtime that applies results
inside the broker is :mod:`kcompat.broker.coordinator_runtime`."""

from kcompat.coordinator.result import CoordinatorResult

__all__ = ["CoordinatorResult"]
