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
  leaderless partitions whose ISR it is in (of any it replicates, for topics with
  ``unclean.leader.election.enable``). ``want_shut_down`` starts controlled shutdown
  (BrokerRegistrationChangeRecord): leadership moves to other ISR members, and once the broker
  leads nothing it is told to shut down and is fenced. ``offline_log_dirs`` (KIP-858): the
  partitions whose replica on this broker is assigned to one of those directories
  (AssignReplicasToDirs, :mod:`kcompat.kraft.directories`) lose it as leader and ISR member, as if
  the broker were fenced for them alone (Kafka ``ReplicationControlManager.handleDirectoriesOffline``).
  ``cordoned_log_dirs`` (KIP-1066), once the broker sends them, are kept in its registration
  (BrokerRegistrationChangeRecord) when they change; a broker whose every log dir is cordoned gets
  no new replicas (``Controller``'s usable brokers, Kafka ``BrokerRegistration.hasUncordonedDirs``).
- A broker without a heartbeat for ``broker.session.timeout.ms`` is fenced (FenceBrokerRecord):
  it leaves the ISR of every partition where others remain and loses leadership to the next ISR
  member, or the partition goes leaderless (leader -1) when it was the last one - unless the
  topic has ``unclean.leader.election.enable``: then the first live replica leads, with an ISR of
  itself alone.
- UnregisterBroker (``kafka-cluster.sh unregister``, Kafka's ``ReplicationControlManager.
  unregisterBroker``): BROKER_ID_NOT_REGISTERED for an unknown id; otherwise the broker leaves
  leadership and the ISR as when fenced, and an UnregisterBrokerRecord removes its registration.
  Kafka does not require the broker to be stopped (a running one registers again); kcompat also
  refuses (INVALID_REQUEST, naming the partition) while the broker is the last in-sync replica of
  a partition, whose data would otherwise have no in-sync copy left.

Partition reassignments (KIP-455, :mod:`kcompat.kraft.reassignment`) run here too: fencing or
unregistering a broker may complete one whose remaining replicas are then all in sync.

Leader choice is :mod:`kcompat.kraft.leader_election`'s, also used by ElectLeaders, the periodic
unclean elections and the preferred-leader rebalance (``elect_leaders``, ``elect_unclean_leaders``,
``balance_leaders``).

Heartbeat times live only in the active controller's memory; a new active controller starts
every registered broker's session afresh, as Kafka does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from kcompat.kraft import leader_election
from kcompat.kraft.image import NO_CHANGE_LEADER, NO_LEADER, MetadataImage
from kcompat.kraft import reassignment
from kcompat.kraft.reassignment import build_change
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import (
    BrokerRegistrationChangeRecord, FenceBrokerRecord, PartitionChangeRecord, RegisterBrokerRecord,
    UnfenceBrokerRecord, UnregisterBrokerRecord,
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
                 session_timeout_ms: Callable[[], int], unclean_enabled: Callable[[str], bool] | None = None) -> None:
        """``unclean_enabled(topic name)``: the topic's effective ``unclean.leader.election.enable``
        (default: from the image alone, see ``leader_election.unclean_enabled_in_image``; the
        broker's ControllerService sets one that also falls back to the static broker config)."""
        self.image = image
        self._sink = sink
        self.cluster_id = cluster_id
        self._session_timeout_ms = session_timeout_ms
        self.unclean_enabled: Callable[[str], bool] = unclean_enabled or (
            lambda topic: leader_election.unclean_enabled_in_image(self.image, topic))
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
                 rack: str | None, previous_broker_epoch: int, now_ms: int, *, log_dirs=(),
                 features: dict[str, tuple[int, int]] | None = None) -> int:
        """BrokerRegistration (``log_dirs``: directory ids of its online log dirs, KIP-858;
        ``features``: the levels it supports, name -> (min, max), KIP-584, which UpdateFeatures
        checks new levels against): returns the new broker epoch. Raises KafkaError
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
            rack=rack, fenced=True, in_controlled_shutdown=False, log_dirs=list(log_dirs),
            features=[RegisterBrokerRecord.BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, (lo, hi) in sorted((features or {}).items())]))
        self._sink(records, now_ms)
        self.last_heartbeat[broker_id] = now_ms
        self.heard_from.add(broker_id)
        return epoch

    # -- heartbeats ------------------------------------------------------------------------------

    def touch(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat from ``broker_id`` at ``broker_epoch`` arrived: its session runs from now,
        even before :meth:`heartbeat` gets its turn behind earlier controller operations (Kafka's
        ``BrokerHeartbeatManager.touch``, also for heartbeats that time out in the controller's
        queue). Nothing for an unknown broker or another epoch."""
        b = self.image.brokers.get(broker_id)
        if b is not None and b.epoch == broker_epoch:
            self.last_heartbeat[broker_id] = max(now_ms, self.last_heartbeat.get(broker_id, now_ms))
            self.heard_from.add(broker_id)

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, now_ms: int, offline_dirs=(), cordoned_dirs=None) -> HeartbeatResult:
        """BrokerHeartbeat; ``offline_dirs``: directory ids of the broker's failed log dirs;
        ``cordoned_dirs``: of its cordoned ones (KIP-1066), None before the broker has caught up.
        Raises KafkaError (BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH)."""
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
        if offline_dirs and not b.fenced:
            offline = set(offline_dirs)
            records += self._leave_partitions(broker_id, fenced_or_down={broker_id},
                                              where=lambda p: p.directories.get(broker_id) in offline)
            if offline & set(b.log_dirs):   # the registration keeps only the online dirs (Kafka)
                records.append(BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=b.epoch, log_dirs=[d for d in b.log_dirs if d not in offline]))
        if cordoned_dirs is not None and set(cordoned_dirs) != set(b.cordoned_log_dirs or ()):
            # Kafka ReplicationControlManager.handleDirectoriesCordoned: the registration follows.
            # None (not known yet) and [] mean the same here, so nothing is written until a dir is
            # cordoned: below metadata.version 4.3-IV0 Kafka cannot represent a non-null cordoned
            # list (BrokerRegistration.toRecord), and its tools (kafka-metadata-shell) refuse an
            # image holding one
            records.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=b.epoch,
                                                          cordoned_log_dirs=list(cordoned_dirs)))
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

    # -- unregistration --------------------------------------------------------------------------

    def unregister(self, broker_id: int, now_ms: int) -> None:
        """UnregisterBroker. Raises KafkaError (BROKER_ID_NOT_REGISTERED, INVALID_REQUEST)."""
        b = self.image.brokers.get(broker_id)
        if b is None:
            raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                             f"Broker ID {broker_id} is not currently registered")
        for t in sorted(self.image.topics.values(), key=lambda t: t.name):
            for p in sorted(t.partitions.values(), key=lambda p: p.partition_id):
                if p.isr == [broker_id]:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Broker {broker_id} is the last in-sync replica of partition "
                                     f"{t.name}-{p.partition_id}; move or re-replicate it first")
        records = self._leave_partitions(broker_id, fenced_or_down={broker_id})
        records.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=b.epoch))
        self._sink(records, now_ms)
        self.last_heartbeat.pop(broker_id, None)
        self.heard_from.discard(broker_id)

    # -- leadership ------------------------------------------------------------------------------

    def _leave_partitions(self, broker_id: int, *, fenced_or_down: set[int], pending: list | None = None,
                          where: Callable | None = None) -> list:
        """PartitionChangeRecords taking ``broker_id`` out of leadership and (where others remain)
        out of the ISR (Kafka ``ReplicationControlManager.handleBrokerFenced``): the next leader is
        elected from the ISR, or, for a topic with ``unclean.leader.election.enable``, from any
        live replica when no ISR member is live (:mod:`kcompat.kraft.leader_election`).
        ``pending``: records already queued in this operation, whose changes are taken into account;
        ``where(partition image)``: only the partitions for which it is true."""
        acceptable = leader_election.acceptable_leaders(self.image, exclude=fenced_or_down)
        changed = _pending_changes(self.image, pending or [])
        out = []
        for t in self.image.topics.values():
            unclean = None
            for p in t.partitions.values():
                leader, isr = changed.get((t.topic_id, p.partition_id), (p.leader, p.isr))
                if leader != broker_id and broker_id not in isr or where is not None and not where(p):
                    continue
                if unclean is None:
                    unclean = self.unclean_enabled(t.name)
                election = leader_election.UNCLEAN if unclean else leader_election.ONLINE
                target_isr = [r for r in isr if r != broker_id] or list(isr)
                ok = acceptable.difference(self.image.offline_replicas(p))   # never a replica in an offline dir
                if p.reassigning and (t.topic_id, p.partition_id) not in changed:
                    # the smaller ISR may complete a reassignment (Kafka's PartitionChangeBuilder)
                    rec = build_change(t.topic_id, p, ok, election=election, isr=target_isr)
                else:
                    rec = leader_election.change(t.topic_id, p, election, ok, leader=leader, isr=isr,
                                                 target_isr=target_isr)
                if rec is not None:
                    out.append(rec)
        return out

    def _lead_leaderless(self, broker_id: int) -> list:
        """Leaders for the leaderless partitions now that ``broker_id`` is unfenced (Kafka
        ``handleBrokerUnfenced``): an ISR member, or for a topic with unclean election enabled any
        live replica."""
        acceptable = leader_election.acceptable_leaders(self.image, include={broker_id})
        out = []
        for t in self.image.topics.values():
            unclean = None
            for p in t.partitions.values():
                if p.leader != NO_LEADER:
                    continue
                if unclean is None:
                    unclean = self.unclean_enabled(t.name)
                rec = leader_election.change(   # never a replica whose log dir is offline (KIP-858)
                    t.topic_id, p, leader_election.UNCLEAN if unclean else leader_election.ONLINE,
                    acceptable.difference(self.image.offline_replicas(p)))
                if rec is not None:
                    out.append(rec)
        return out

    # -- elections -------------------------------------------------------------------------------

    def elect_unclean_leaders(self, now_ms: int) -> int:
        """Leaderless partitions of topics with ``unclean.leader.election.enable`` get a live
        replica as leader (Kafka 3.9 ``maybeElectUncleanLeaders``); returns how many."""
        records = leader_election.unclean_elections(
            self.image, leader_election.acceptable_leaders(self.image), self.unclean_enabled)
        if records:
            self._sink(records, now_ms)
        return len(records)

    def balance_leaders(self, now_ms: int, limit: int = leader_election.MAX_ELECTIONS_PER_IMBALANCE) -> tuple[int, bool]:
        """Preferred replica elections for partitions led elsewhere (``auto.leader.rebalance.enable``,
        Kafka 3.9 ``maybeBalancePartitionLeaders``): returns (elections, more may be due)."""
        records, more = leader_election.preferred_elections(
            self.image, leader_election.acceptable_leaders(self.image), limit)
        if records:
            self._sink(records, now_ms)
        return len(records), more

    def elect_leaders(self, election_type: int, topic_partitions: list[tuple[str, list[int]]] | None,
                      now_ms: int) -> list[leader_election.TopicElection]:
        """ElectLeaders: see :func:`kcompat.kraft.leader_election.elect_leaders` (raises
        KafkaError(INVALID_REQUEST) for an unknown election type)."""
        results, records = leader_election.elect_leaders(
            self.image, election_type, topic_partitions, leader_election.acceptable_leaders(self.image))
        if records:
            self._sink(records, now_ms)
        return results

    # -- reassignments ---------------------------------------------------------------------------

    def alter_reassignments(self, topics: list[tuple[str, list[tuple[int, list[int] | None]]]],
                            now_ms: int, allow_rf_change: bool = True) -> list[reassignment.TopicResult]:
        """AlterPartitionReassignments: see :func:`kcompat.kraft.reassignment.alter_reassignments`;
        the records of every partition that succeeded are committed as one batch."""
        results, records = reassignment.alter_reassignments(
            self.image, topics, leader_election.acceptable_leaders(self.image), self.unclean_enabled,
            allow_rf_change)
        if records:
            self._sink(records, now_ms)
        return results

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
