"""Classic consumer-group coordinator and committed offsets (Kafka's GroupCoordinator), a state
machine without I/O whose state lives in ``__consumer_offsets``. See :mod:`kcompat.group.coordinator`."""

from kcompat.group.coordinator import GroupConfig, GroupCoordinator, Record, Result, TxnMarker, partition_for
from kcompat.group.state import GroupEvent, GroupState

__all__ = ["GroupConfig", "GroupCoordinator", "GroupEvent", "GroupState", "Record", "Result", "TxnMarker",
           "partition_for"]
