"""Sending ISR changes of the partitions this broker leads to the active controller.

Kafka's ``AlterPartitionManager`` (KIP-497): a leader's proposed ISR (an expansion when a follower
caught up, a shrink when one fell behind for ``replica.lag.time.max.ms``) is batched with the
others pending and sent as one AlterPartition v3 (topic ids, new ISR members with the broker
epochs they fetched with, KIP-903) through the controller service (local on the active
controller, else over the controller listener). Each partition's answer goes back to the
partition (:meth:`kcompat.isr.partition_replication.ReplicationMixin.on_isr_change_result`); a
failed request drops the proposals, and the next fetch or ISR check proposes them again - after
``controller.quorum.retry.backoff.ms``, so an unavailable controller is not flooded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcompat.broker.handlers import alter_partition
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.alter_partition import AlterPartitionRequest as Q

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.api_services import ApiServices
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.controller_service import ControllerService

log = logging.getLogger("kcompat.isr")

VERSION = 3


class IsrUpdates:
    """Pending ISR proposals of this broker and the task that sends them.

    - ``context``: this node's id (the request's ``broker_id``), config
      (``controller.quorum.retry.backoff.ms``), clock (ms) and shutdown flag;
    - ``broker_epoch()``: this broker's epoch from its registration, -1 while unregistered (sent
      as the request's ``broker_epoch``);
    - ``controller_service``: runs the request on this node when it is the active controller,
      else forwards it over the controller listener.

    ``api_services`` (the handlers' :class:`~kcompat.broker.api_services.ApiServices`, which
    :func:`kcompat.broker.handlers.alter_partition.local` runs against on the active controller)
    is set by the broker once it exists, before any request is sent.
    """

    def __init__(self, context: BrokerContext, *, broker_epoch: Callable[[], int],
                 controller_service: ControllerService) -> None:
        self.context = context
        self.broker_epoch = broker_epoch
        self.controller_service = controller_service
        self.api_services: ApiServices | None = None
        self._pending: dict[tuple[str, int], tuple[object, object]] = {}
        self._task: asyncio.Task | None = None

    def submit(self, partition, change) -> None:
        """The partitions' ``isr_change_listener``: queue ``change`` (a PendingIsrChange)."""
        self._pending[(partition.topic, partition.partition_id)] = (partition, change)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._send_all())

    async def _send_all(self) -> None:
        await asyncio.sleep(0)   # gather the proposals of this loop iteration
        while self._pending and not self.context.is_shutting_down():
            batch, self._pending = self._pending, {}
            try:
                if not await self._send(list(batch.values())):
                    await asyncio.sleep(self.context.config.get("controller.quorum.retry.backoff.ms") / 1000.0)
            except asyncio.CancelledError:
                raise
            except Exception as e:   # never leave a proposal stuck in flight
                log.warning("AlterPartition failed: %s", e)
                for partition, _change in batch.values():
                    partition.on_isr_change_result(ErrorCode.UNKNOWN_SERVER_ERROR)
                await asyncio.sleep(self.context.config.get("controller.quorum.retry.backoff.ms") / 1000.0)

    async def _send(self, items: list) -> bool:
        """One AlterPartition for ``items``; True if every partition's change was accepted."""
        epoch = self.broker_epoch()
        topics: dict = {}
        by_key = {}
        for partition, change in items:
            rs = partition.replica_state
            members = []
            for r in change.proposed_isr:
                f = rs.follower(r) if rs is not None else None
                members.append(Q.BrokerState(broker_id=r, broker_epoch=f.broker_epoch if f is not None and
                                             f.broker_epoch is not None else -1))
            topics.setdefault(partition.topic_id, []).append(Q.PartitionData(
                partition_index=partition.partition_id, leader_epoch=change.leader_epoch,
                new_isr_with_epochs=members, leader_recovery_state=0, partition_epoch=change.partition_epoch))
            by_key[(partition.topic_id, partition.partition_id)] = partition
            log.info("%s: proposing ISR %s (%s)", partition, list(change.proposed_isr), change.kind)
        req = Q(broker_id=self.context.node_id, broker_epoch=epoch,
                topics=[Q.TopicData(topic_id=tid, partitions=parts) for tid, parts in topics.items()])
        try:
            resp = await self.controller_service.call(
                req, VERSION, lambda: alter_partition.local(self.api_services, VERSION, req),
                alter_partition.error_response)
        except KafkaError as e:
            resp = alter_partition.error_response(req, VERSION, e.code)
        now = self.context.now_ms()
        answered = set()
        accepted = 0
        if resp.error_code == ErrorCode.NONE:
            for t in resp.topics:
                for pd in t.partitions:
                    partition = by_key.get((t.topic_id, pd.partition_index))
                    if partition is None:
                        continue
                    answered.add((t.topic_id, pd.partition_index))
                    code = ErrorCode(pd.error_code)
                    if code == ErrorCode.NONE:
                        accepted += 1
                    partition.on_isr_change_result(code, isr=pd.isr, partition_epoch=pd.partition_epoch,
                                                   leader_epoch=pd.leader_epoch, now_ms=now)
        else:
            log.info("AlterPartition answered %s", ErrorCode(resp.error_code).name)
        for key, partition in by_key.items():
            if key not in answered:
                partition.on_isr_change_result(ErrorCode(resp.error_code) if resp.error_code else
                                               ErrorCode.UNKNOWN_SERVER_ERROR)
        return accepted == len(by_key)
