"""Cluster membership on the active controller: broker registration, heartbeats, fencing and the
partition leadership that follows from them.

As Kafka's ``ClusterControlManager`` + ``BrokerHeartbeatManager`` + the broker-state parts of
``ReplicationControlManager`` (KIP-631):

- BrokerRegistration writes a RegisterBrokerRecord with a new broker epoch; the broker starts
  fenced. A second registration of a live broker id with another incarnation id is
  DUPLICATE_BROKER_REGISTRATION until the old session expires (or the broker names its previous
  epoch, KIP-966); INCONSISTENT_CLUSTER_ID for a broker of another cluster.
- BrokerHeartbeat (every ``broker.heartbeat.interval.ms``): unknown broker ->
  BROKER_ID_NOT_REGISTERED, wrong epoch -> STALE_BROKER_EPOCH. A fenced broker whose metadata
  offset has reached its registration is unfenced (UnfenceBrokerRecord) and becomes leader of the
  leaderless partitions whose ISR it is in. ``want_shut_down`` starts controlled shutdown
  (BrokerRegistrationChangeRecord): leadership moves to other ISR members, and once the broker
  leads nothing it is told to shut down and is fenced.
- A broker without a heartbeat for ``broker.session.timeout.ms`` is fenced (FenceBrokerRecord):
  it leaves the ISR of every partition where others remain and loses leadership to the next ISR
  member, or the partition goes leaderless (leader -1) when it was the last one.

Heartbeat times live only in the active controller's memory; a new active controller starts
every registered broker's session afresh, as Kafka does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from kcompat.kraft.image import NO_CHANGE_LEADER, NO_LEADER, MetadataImage
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import (
    BrokerRegistrationChangeRecord, FenceBrokerRecord, PartitionChangeRecord, RegisterBrokerRecord,
    UnfenceBrokerRecord,
)


@dataclass
class Listener:
    """One listener a broker registers: ``security_protocol`` is Kafka's id (PLAINTEXT 0)."""

    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass
class HeartbeatResult:
    """BrokerHeartbeatResponse fields."""

    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


class ClusterControl:
    """Membership operations; records go to ``sink(records, now_ms)`` (see ``Controller``)."""

    def __init__(self, image: MetadataImage, sink: Callable[[list, int], None], *, cluster_id: str,
                 session_timeout_ms: Callable[[], int]) -> None:
        self.image = image
        self._sink = sink
        self.cluster_id = cluster_id
        self._session_timeout_ms = session_timeout_ms
        self.last_heartbeat: dict[int, int] = {}
        self.heard_from: set[int] = set()

    def activate(self, now_ms: int) -> None:
        """This node just became the active controller: every broker's session starts now. A
        broker this controller has not heard from yet may register a new incarnation at once
        (a whole single node restarted, or the old incarnation died with the old controller)."""
        self.last_heartbeat = {b: now_ms for b in self.image.brokers}
        self.heard_from = set()

    def _has_session(self, broker_id: int, now_ms: int) -> bool:
        last = self.last_heartbeat.get(broker_id)
        return last is not None and now_ms - last < self._session_timeout_ms()

    # -- registration ----------------------------------------------------------------------------

    def register(self, broker_id: int, cluster_id: str, incarnation_id: uuid.UUID, listeners: list[Listener],
                 rack: str | None, previous_broker_epoch: int, now_ms: int) -> int:
        """BrokerRegistration: returns the new broker epoch. Raises KafkaError
        (INCONSISTENT_CLUSTER_ID, DUPLICATE_BROKER_REGISTRATION, INVALID_REQUEST)."""
        if cluster_id != self.cluster_id:
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f"Expected cluster ID {self.cluster_id}, but got cluster ID {cluster_id}")
        if not listeners:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "A broker must register at least one listener")
        existing = self.image.brokers.get(broker_id)
        records: list = []
        if existing is not None and existing.incarnation_id != incarnation_id \
                and broker_id in self.heard_from and self._has_session(broker_id, now_ms) \
                and not existing.fenced and previous_broker_epoch != existing.epoch:
            raise KafkaError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                             f"Another broker is registered with that broker id {broker_id}.")
        if existing is not None and not existing.fenced:
            # the old incarnation is gone (restart): it must not keep leading anything
            records += self._leave_partitions(broker_id, fenced_or_down={broker_id})
        epoch = max(self.image.offset + 1, (existing.epoch + 1) if existing is not None else 0)
        records.append(RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=incarnation_id, broker_epoch=epoch,
            end_points=[RegisterBrokerRecord.BrokerEndpoint(name=lst.name, host=lst.host, port=lst.port,
                                                            security_protocol=lst.security_protocol)
                        for lst in listeners],
            rack=rack, fenced=True, in_controlled_shutdown=False))
        self._sink(records, now_ms)
        self.last_heartbeat[broker_id] = now_ms
        self.heard_from.add(broker_id)
        return epoch

    # -- heartbeats ------------------------------------------------------------------------------

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, now_ms: int) -> HeartbeatResult:
        """BrokerHeartbeat. Raises KafkaError (BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH)."""
        b = self.image.brokers.get(broker_id)
        if b is None:
            raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
        if b.epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Expected broker epoch {b.epoch}, but got broker epoch {broker_epoch}")
        self.last_heartbeat[broker_id] = now_ms
        self.heard_from.add(broker_id)
        caught_up = metadata_offset >= b.epoch
        records: list = []
        fenced = b.fenced
        should_shut_down = False
        if want_shut_down:
            if not b.in_controlled_shutdown and not b.fenced:
                records.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=b.epoch,
                                                              in_controlled_shutdown=1))
                records += self._leave_partitions(broker_id, fenced_or_down={broker_id})
            if not self._leads_any(broker_id, records):
                should_shut_down = True
                if not b.fenced:
                    records.append(FenceBrokerRecord(id=broker_id, epoch=b.epoch))
                fenced = True
        elif want_fence:
            if not b.fenced:
                records.append(FenceBrokerRecord(id=broker_id, epoch=b.epoch))
                records += self._leave_partitions(broker_id, fenced_or_down={broker_id})
            fenced = True
        elif b.fenced and caught_up:
            records.append(UnfenceBrokerRecord(id=broker_id, epoch=b.epoch))
            records += self._lead_leaderless(broker_id)
            fenced = False
        if records:
            self._sink(records, now_ms)
        return HeartbeatResult(caught_up, fenced, should_shut_down)

    def fence_stale_brokers(self, now_ms: int) -> list[int]:
        """Fence unfenced brokers whose session expired; returns their ids."""
        stale = [b.broker_id for b in self.image.brokers.values()
                 if not b.fenced and not self._has_session(b.broker_id, now_ms)]
        if not stale:
            return []
        records: list = []
        down = set(stale)
        for broker_id in stale:
            records.append(FenceBrokerRecord(id=broker_id, epoch=self.image.brokers[broker_id].epoch))
        for broker_id in stale:
            records += self._leave_partitions(broker_id, fenced_or_down=down, pending=records)
        self._sink(records, now_ms)
        return stale

    # -- leadership ------------------------------------------------------------------------------

    def _usable(self, exclude: set[int]) -> set[int]:
        return {b for b in self.image.unfenced_brokers() if b not in exclude}

    def _leave_partitions(self, broker_id: int, *, fenced_or_down: set[int], pending: list | None = None) -> list:
        """PartitionChangeRecords taking ``broker_id`` out of leadership and (where others remain)
        out of the ISR (Kafka ``ReplicationControlManager.handleBrokerFenced``). ``pending``:
        records already queued in this operation, whose changes are taken into account."""
        usable = self._usable(fenced_or_down)
        changed = _pending_changes(self.image, pending or [])
        out = []
        for t in self.image.topics.values():
            for p in t.partitions.values():
                leader, isr = changed.get((t.topic_id, p.partition_id), (p.leader, p.isr))
                if leader != broker_id and broker_id not in isr:
                    continue
                new_isr = [r for r in isr if r != broker_id] or list(isr)
                new_leader = leader
                if leader == broker_id:
                    new_leader = next((r for r in p.replicas if r in new_isr and r in usable), NO_LEADER)
                if new_leader == leader and new_isr == isr:
                    continue
                out.append(PartitionChangeRecord(
                    partition_id=p.partition_id, topic_id=t.topic_id,
                    isr=new_isr if new_isr != isr else None,
                    leader=new_leader if new_leader != leader else NO_CHANGE_LEADER))
        return out

    def _lead_leaderless(self, broker_id: int) -> list:
        """Leaderless partitions with ``broker_id`` in the ISR get it as leader (Kafka
        ``handleBrokerUnfenced``)."""
        out = []
        for t in self.image.topics.values():
            for p in t.partitions.values():
                if p.leader == NO_LEADER and broker_id in p.isr:
                    out.append(PartitionChangeRecord(partition_id=p.partition_id, topic_id=t.topic_id,
                                                     isr=None, leader=broker_id))
        return out

    def _leads_any(self, broker_id: int, pending: list) -> bool:
        changed = _pending_changes(self.image, pending)
        for t in self.image.topics.values():
            for p in t.partitions.values():
                leader, _isr = changed.get((t.topic_id, p.partition_id), (p.leader, p.isr))
                if leader == broker_id:
                    return True
        return False


def _pending_changes(image: MetadataImage, records: list) -> dict:
    """(topic id, partition) -> (leader, isr) after the PartitionChangeRecords in ``records``
    (applied over the image); only partitions that have one."""
    out: dict = {}
    for r in records:
        if isinstance(r, PartitionChangeRecord):
            key = (r.topic_id, r.partition_id)
            if key not in out:
                p = image.topics_by_id[r.topic_id].partitions[r.partition_id]
                out[key] = (p.leader, list(p.isr))
            leader, isr = out[key]
            out[key] = (r.leader if r.leader != NO_CHANGE_LEADER else leader,
                        list(r.isr) if r.isr is not None else isr)
    return out
