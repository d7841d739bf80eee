"""Producer id allocation for InitProducerId (Kafka's ``RPCProducerIdManager``).

Ids come from blocks that the controller allocates durably (AllocateProducerIds ->
ProducerIdsRecord in the metadata log), so an id is never handed out twice, also across
restarts: after a restart the broker asks for a fresh block and never reuses the rest of its old
one.
"""

from __future__ import annotations

from typing import Callable


class ProducerIdManager:
    """Hands out producer ids from blocks obtained through ``allocate_block() -> (first, length)``."""

    def __init__(self, allocate_block: Callable[[], tuple[int, int]]) -> None:
        self._allocate_block = allocate_block
        self._next = 0
        self._end = 0  # exclusive

    def generate(self) -> int:
        """The next unused producer id (int64). Whatever ``allocate_block`` raises (KafkaError
        COORDINATOR_LOAD_IN_PROGRESS while the controller has not answered yet) propagates."""
        if self._next >= self._end:
            first, length = self._allocate_block()
            self._next, self._end = first, first + length
        pid = self._next
        self._next += 1
        return pid
