"""The broker's client of the share coordinator (Kafka's ``DefaultStatePersister`` with its
``PersisterStateManager``): how share-partition leaders and the group coordinator read and write
durable share state.

Each call concerns one share-partition key ``(group id, topic id, partition)``. The coordinator of
the key is the leader of its ``__share_group_state`` partition, found in this broker's metadata
image (Kafka looks it up with FindCoordinator, or in its metadata cache); the topic is created on
first use as FindCoordinator does. When that leader is this broker the local
:class:`~kcompat.broker.share_state_runtime.ShareStateRuntime` answers directly; otherwise the
request goes over the inter-broker listener (:class:`~kcompat.broker.node_client.NodeClients`).

As PersisterStateManager does, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
COORDINATOR_LOAD_IN_PROGRESS (no coordinator yet, one still loading, one that just lost its
partition) are retried, the coordinator looked up again each time, with a short exponential
backoff; so are a connection that fails and a request that gets no answer (Kafka completes those
with NETWORK_EXCEPTION / REQUEST_TIMED_OUT, which SharePartition then retries itself). Retries stop
at ``request.timeout.ms``; the last error is then the answer. Other errors (FENCED_STATE_EPOCH,
FENCED_LEADER_EPOCH, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION...) are answered at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Iterable, NamedTuple

from kcompat.broker.inter_broker import inter_broker_clients
from kcompat.broker.node_client import NodeClients, NodeConnectionError
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kcompat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kcompat.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kcompat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kcompat.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from kcompat.share.state_batches import PersistedStateBatch
from kcompat.share.state_coordinator import ShareKey

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.share_state_runtime import ShareStateRuntime

log = logging.getLogger("kcompat.share")

# the versions sent: the highest of Kafka 4.3.1's specs (the same as the handlers serve)
INITIALIZE_VERSION = 0
READ_VERSION = 0
WRITE_VERSION = 1
DELETE_VERSION = 0
SUMMARY_VERSION = 1

RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT})
BACKOFF_MS = 50
BACKOFF_MAX_MS = 1000


class ReadStateResult(NamedTuple):
    """ReadShareGroupState of one key: ``error`` NONE or Kafka's code."""

    error: ErrorCode
    state_epoch: int
    start_offset: int
    batches: list[PersistedStateBatch]
    error_message: str | None = None


class ReadSummaryResult(NamedTuple):
    """ReadShareGroupStateSummary of one key."""

    error: ErrorCode
    state_epoch: int
    start_offset: int
    leader_epoch: int
    delivery_complete_count: int
    error_message: str | None = None


def _first_partition(response, topic_id: uuid.UUID, partition: int):
    for t in response.results:
        if t.topic_id == topic_id:
            for pr in t.partitions:
                if pr.partition == partition:
                    return pr
    return None


class SharePersister:
    """Kafka's DefaultStatePersister of one broker.

    - ``context``: this node's id (a key coordinated here is answered locally), config
      (``request.timeout.ms``, the bound on retries), metadata image (the coordinators'
      inter-broker endpoints) and shutdown flag (no more retries once set);
    - ``share_state``: this broker's share coordinator
      (:class:`~kcompat.broker.share_state_runtime.ShareStateRuntime`): which broker coordinates
      a key (``coordinator_node``), and the answers for the keys coordinated here.
    """

    def __init__(self, context: BrokerContext, share_state: ShareStateRuntime) -> None:
        self.context = context
        self.share_state = share_state
        self._clients: NodeClients | None = None

    # -- the persister API ------------------------------------------------------------------------

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                               start_offset: int) -> ErrorCode:
        """InitializeShareGroupState: the key's state starts afresh at ``start_offset`` (-1: not
        known yet) with ``state_epoch``."""
        Q = InitializeShareGroupStateRequest
        req = Q(group_id=group_id, topics=[Q.InitializeStateData(topic_id=topic_id, partitions=[
            Q.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])
        code, _pr = await self._call(ShareKey(group_id, topic_id, partition), req, INITIALIZE_VERSION,
                                     "initialize_state")
        return code

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> ReadStateResult:
        """ReadShareGroupState: ``(error, state_epoch, start_offset, batches)``; a leader epoch
        above the recorded one is recorded (fencing the previous leader's writes)."""
        Q = ReadShareGroupStateRequest
        req = Q(group_id=group_id, topics=[Q.ReadStateData(topic_id=topic_id, partitions=[
            Q.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        code, pr = await self._call(ShareKey(group_id, topic_id, partition), req, READ_VERSION, "read_state")
        if code != ErrorCode.NONE:
            return ReadStateResult(code, 0, -1, [], getattr(pr, "error_message", None))
        return ReadStateResult(code, pr.state_epoch, pr.start_offset, [
            PersistedStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in pr.state_batches])

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int, batches: Iterable,
                          delivery_complete_count: int = -1) -> ErrorCode:
        """WriteShareGroupState: the new start offset (-1: unchanged) and the changed batches
        (:class:`PersistedStateBatch` or ``(first, last, state, count)`` tuples)."""
        Q = WriteShareGroupStateRequest
        req = Q(group_id=group_id, topics=[Q.WriteStateData(topic_id=topic_id, partitions=[Q.PartitionData(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            delivery_complete_count=delivery_complete_count,
            state_batches=[Q.StateBatch(first_offset=b[0], last_offset=b[1], delivery_state=b[2], delivery_count=b[3])
                           for b in batches])])])
        code, _pr = await self._call(ShareKey(group_id, topic_id, partition), req, WRITE_VERSION, "write_state")
        return code

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partitions: Iterable[int]
                           ) -> dict[int, ErrorCode]:
        """DeleteShareGroupState for ``partitions`` of a topic: ``{partition: error}`` (each key
        goes to its own coordinator, concurrently)."""
        Q = DeleteShareGroupStateRequest
        partitions = list(dict.fromkeys(partitions))

        async def one(p: int) -> ErrorCode:
            req = Q(group_id=group_id, topics=[Q.DeleteStateData(topic_id=topic_id, partitions=[
                Q.PartitionData(partition=p)])])
            code, _pr = await self._call(ShareKey(group_id, topic_id, p), req, DELETE_VERSION, "delete_state")
            return code

        codes = await asyncio.gather(*(one(p) for p in partitions))
        return dict(zip(partitions, codes))

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int = 0) -> ReadSummaryResult:
        """ReadShareGroupStateSummary: ``(error, state_epoch, start_offset, leader_epoch,
        delivery_complete_count)``; a key never initialized answers start offset -1."""
        Q = ReadShareGroupStateSummaryRequest
        req = Q(group_id=group_id, topics=[Q.ReadStateSummaryData(topic_id=topic_id, partitions=[
            Q.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        code, pr = await self._call(ShareKey(group_id, topic_id, partition), req, SUMMARY_VERSION,
                                    "read_state_summary")
        if code != ErrorCode.NONE:
            return ReadSummaryResult(code, 0, -1, 0, -1, getattr(pr, "error_message", None))
        return ReadSummaryResult(code, pr.state_epoch, pr.start_offset, pr.leader_epoch, pr.delivery_complete_count)

    def close(self) -> None:
        if self._clients is not None:
            self._clients.close()
            self._clients = None

    # -- one key, with retries --------------------------------------------------------------------

    def coordinator_node(self, key: ShareKey) -> int | None:
        """The broker coordinating ``key`` now (None: no topic or no leader yet)."""
        return self.share_state.coordinator_node(key)

    async def _call(self, key: ShareKey, req, version: int, method: str):
        """Send ``req`` (one key) to the key's coordinator until it answers something other than a
        retriable error or ``request.timeout.ms`` passed: ``(error code, partition result)``."""
        timeout_ms = self.context.config.get("request.timeout.ms")
        deadline = time.monotonic() + timeout_ms / 1000.0
        backoff = BACKOFF_MS
        attempt = 0
        while True:
            attempt += 1
            code, pr = await self._attempt(key, req, version, method, max(0.001, deadline - time.monotonic()))
            if code not in RETRIABLE or self.context.is_shutting_down():
                return code, pr
            left = deadline - time.monotonic()
            if left <= 0:
                log.info("%s for %s/%s-%d failed after %d attempts: %s", type(req).__name__[:-7], key.group_id,
                         key.topic_id, key.partition, attempt, code.name)
                return code, pr
            await asyncio.sleep(min(backoff, left * 1000.0) / 1000.0)
            backoff = min(backoff * 2, BACKOFF_MAX_MS)

    async def _attempt(self, key: ShareKey, req, version: int, method: str, timeout_s: float):
        try:
            node = self.coordinator_node(key)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, None
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        try:
            if node == self.context.node_id:
                response = await asyncio.wait_for(asyncio.shield(getattr(self.share_state, method)(
                    req, version)), timeout_s)
            else:
                response = await self._node_clients().send(node, req, version, timeout_s)
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT, None
        except (NodeConnectionError, OSError) as e:
            log.debug("share coordinator %d unreachable: %s", node, e)
            if self._clients is not None:
                self._clients.close_node(node)
            return ErrorCode.NETWORK_EXCEPTION, None
        except KafkaError as e:
            return e.code, None
        pr = _first_partition(response, key.topic_id, key.partition)
        if pr is None:  # Kafka: IllegalStateException("Failed to ... for share partition")
            return ErrorCode.UNKNOWN_SERVER_ERROR, None
        try:
            code = ErrorCode(pr.error_code)
        except ValueError:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        return code, pr

    def _node_clients(self) -> NodeClients:
        if self._clients is None:
            self._clients = inter_broker_clients(self.context.config, self.context.image,
                                                 f"kcompat-share-persister-{self.context.node_id}")
        return self._clients
