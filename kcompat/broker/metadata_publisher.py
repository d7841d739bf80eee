"""What a broker does with committed metadata (Kafka's ``BrokerMetadataPublisher`` +
``ReplicaManager.applyDelta``).

The image (:class:`kcompat.kraft.image.MetadataImage`) has already replayed the records; this
module makes the broker follow it: partitions whose replicas include this node are hosted (log
loaded or created) and made leader or follower with the image's leader, epochs, replicas and ISR
(followers start fetching from their leader; see :mod:`kcompat.broker.replica_fetcher`); the group
and transaction coordinators follow the leadership of their internal partitions (loaded when this
node becomes leader, unloaded when it stops or the topic is deleted); removed topics are deleted,
and so is a partition a reassignment moves off this broker; configs are applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcompat.broker.group_runtime import OFFSETS_TOPIC
from kcompat.broker.txn_runtime import TRANSACTION_STATE_TOPIC
from kcompat.share.state_coordinator import SHARE_GROUP_STATE_TOPIC
from kcompat.broker.quota.replication import FOLLOWER_REPLICAS, LEADER_REPLICAS
from kcompat.kraft.image import (
    CLIENT_QUOTA_RECORD, CONFIG_RECORD, PARTITION_CHANGE_RECORD, PARTITION_RECORD, REMOVE_TOPIC_RECORD, RESOURCE_BROKER,
    RESOURCE_TOPIC, record_type_of,
)

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.group_runtime import GroupRuntime
    from kcompat.broker.quota.client_quota import QuotaManagers
    from kcompat.broker.quota.replication import ReplicationQuotas
    from kcompat.broker.remote_log import RemoteLogManager
    from kcompat.broker.share_state_runtime import ShareStateRuntime
    from kcompat.broker.txn_runtime import TxnRuntime
    from kcompat.isr.replica_manager import ReplicaManager
    from kcompat.log import LogManager

log = logging.getLogger("kcompat.broker")
# the internal topics whose partition leaders host a coordinator (groups, transactions, share-group state)
COORDINATOR_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC)


class MetadataPublisher:
    """Applies committed metadata to this broker's partitions, coordinators, quotas and configs.

    - ``context``: the :class:`~kcompat.broker.broker_context.BrokerContext` (node id, config,
      the image the records were replayed into, the clock);
    - ``log_manager``, ``replica_manager``: the logs and the partitions hosted here;
    - ``replication_quotas``: the replication throttles (KIP-73), which follow the topics'
      ``leader/follower.replication.throttled.replicas`` configs;
    - ``client_quotas``: the client quota managers (KIP-13/55/124/599), which follow the image's
      client quotas;
    - ``topic_values(topic)``: the effective typed config values of a topic (its
      ``min.insync.replicas`` reaches the leaders);
    - ``apply_dynamic_broker_configs()``: applies the image's dynamic broker configs (KIP-226).

    The coordinator runtimes and the remote log manager exist only later in the start-up:
    :meth:`attach_coordinators` hands them over; until then no coordinator follows its partitions
    (start-up loads them with :meth:`host_coordinators`).
    """

    def __init__(self, context: BrokerContext, *, log_manager: LogManager, replica_manager: ReplicaManager,
                 replication_quotas: ReplicationQuotas, client_quotas: QuotaManagers,
                 topic_values: Callable[[str], dict], apply_dynamic_broker_configs: Callable[[], None]) -> None:
        self.context = context
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.replication_quotas = replication_quotas
        self.client_quotas = client_quotas
        self._topic_values = topic_values
        self._apply_dynamic_broker_configs = apply_dynamic_broker_configs
        self.groups: GroupRuntime | None = None
        self.txn: TxnRuntime | None = None
        self.share_state: ShareStateRuntime | None = None
        self.remote_log: RemoteLogManager | None = None
        # internal partitions whose coordinator is loaded here -> the leader epoch it was loaded at
        self._led: dict[tuple[str, int], int] = {}

    def attach_coordinators(self, *, groups: GroupRuntime, txn: TxnRuntime, share_state: ShareStateRuntime,
                            remote_log: RemoteLogManager | None) -> None:
        """The group, transaction and share-state coordinator runtimes, which follow the
        leadership of their internal partitions from now on, and the remote log manager (None
        without tiered storage), whose remote segments go with a deleted topic (KIP-405)."""
        self.groups = groups
        self.txn = txn
        self.share_state = share_state
        self.remote_log = remote_log

    # -- hosting ---------------------------------------------------------------------------------

    def host_partition(self, t, pid: int, ip) -> None:
        """Host partition ``pid`` of topic image ``t`` (``ip``: its PartitionImage) and give it
        its role."""
        existing = self.log_manager.get(t.name, pid)
        if existing is not None and (t.name, pid) not in self.replica_manager.partitions:
            stored_id = self.log_manager.topic_id_of(t.name, pid)
            if stored_id is not None and stored_id != t.topic_id:
                log.warning("log %s-%d belongs to an older topic of that name (id %s, now %s); "
                            "setting it aside as stray", t.name, pid, stored_id, t.topic_id)
                self.log_manager.mark_stray(t.name, pid)
        self.replica_manager.ensure_partition(t.name, pid, t.topic_id, ip.leader_epoch)
        self.apply_role(t, pid, ip)

    def apply_role(self, t, pid: int, ip) -> None:
        """Make the hosted partition leader or follower as ``ip`` says; move coordinators."""
        p = self.replica_manager.get(t.name, pid)
        if p is None:
            return
        self.replica_manager.apply_partition_state(
            p, leader=ip.leader, leader_epoch=ip.leader_epoch, partition_epoch=ip.partition_epoch,
            replicas=ip.replicas, isr=ip.isr, now_ms=self.context.now_ms(),
            min_insync_replicas=self._topic_values(t.name)["min.insync.replicas"],
            replica_lag_time_max_ms=self.context.config.get("replica.lag.time.max.ms"), is_eligible=self.is_eligible)
        if t.name in COORDINATOR_TOPICS:
            if ip.leader == self.context.node_id:
                self._coordinator_partition_led(t.name, pid, ip.leader_epoch)
            else:
                self._coordinator_partition_lost(t.name, pid)

    def remove_replica(self, topic: str, pid: int) -> None:
        """A reassignment took this broker out of the replicas of ``topic``-``pid``: stop it
        and delete its log (Kafka ``ReplicaManager.applyDelta``'s deletes)."""
        if topic in COORDINATOR_TOPICS:
            self._coordinator_partition_lost(topic, pid)
        if self.replica_manager.remove_partition(topic, pid):
            log.info("%s-%d: no longer a replica here (reassigned); log deleted", topic, pid)

    def is_eligible(self, replica_id: int) -> bool:
        """A replica may join an ISR: registered, unfenced, not shutting down (KIP-841)."""
        br = self.context.image.brokers.get(replica_id)
        return br is not None and not br.fenced and not br.in_controlled_shutdown

    def host_coordinators(self) -> None:
        """Load the group and transaction coordinators of internal partitions this node leads."""
        image, node_id = self.context.image, self.context.node_id
        for topic in COORDINATOR_TOPICS:
            t = image.topics.get(topic)
            if t is not None:
                for pid, p in t.partitions.items():
                    if p.leader == node_id:
                        self._coordinator_partition_led(topic, pid, p.leader_epoch)

    def _runtime(self, topic: str):
        return {OFFSETS_TOPIC: self.groups, TRANSACTION_STATE_TOPIC: self.txn,
                SHARE_GROUP_STATE_TOPIC: self.share_state}[topic]

    def _coordinator_partition_led(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Load the coordinator of an internal partition this node leads (again after an epoch
        change); before the runtimes exist, start-up loads them (:meth:`host_coordinators`)."""
        runtime = self._runtime(topic)
        if runtime is None or self._led.get((topic, partition)) == leader_epoch:
            return
        self._led[(topic, partition)] = leader_epoch
        runtime.on_partition_hosted(partition)

    def _coordinator_partition_lost(self, topic: str, partition: int) -> None:
        """This node stopped leading an internal partition: unload its coordinator state."""
        if self._led.pop((topic, partition), None) is None:
            return
        runtime = self._runtime(topic)
        if runtime is not None:
            runtime.on_partition_unhosted(partition)

    # -- records ---------------------------------------------------------------------------------

    def on_metadata_snapshot(self) -> None:
        """A snapshot replaced the image: host what it places here, apply its configs."""
        image, node_id = self.context.image, self.context.node_id
        for t in list(image.topics.values()):
            for pid, p in t.partitions.items():
                if node_id in p.replicas:
                    self.host_partition(t, pid, p)
        for topic, pid in list(self.replica_manager.partitions):
            t = image.topics.get(topic)
            p = t.partitions.get(pid) if t is not None else None
            if p is not None and node_id not in p.replicas:
                self.remove_replica(topic, pid)
        for name in image.topics:
            self.replication_quotas.update_topic(name, image.topic_configs(name))
        self._apply_dynamic_broker_configs()
        self.client_quotas.update(image.client_quotas)
        if self.groups is not None:
            self.host_coordinators()

    def on_metadata(self, records: list) -> None:
        """React to committed metadata records already applied to the image."""
        image, node_id, replica_manager = self.context.image, self.context.node_id, self.replica_manager
        refresh_all = False
        if any(record_type_of(r) == CLIENT_QUOTA_RECORD for r in records):
            self.client_quotas.update(image.client_quotas)   # the quota managers follow the image
        for r in records:
            kind = record_type_of(r)
            if kind == PARTITION_RECORD:
                t = image.topics_by_id.get(r.topic_id)
                if t is not None and node_id in r.replicas:
                    self.host_partition(t, r.partition_id, t.partitions[r.partition_id])
            elif kind == PARTITION_CHANGE_RECORD:
                t = image.topics_by_id.get(r.topic_id)
                if t is not None:
                    ip = t.partitions[r.partition_id]
                    if replica_manager.get(t.name, r.partition_id) is not None:
                        if node_id in ip.replicas:
                            self.apply_role(t, r.partition_id, ip)
                        else:
                            self.remove_replica(t.name, r.partition_id)
                    elif node_id in ip.replicas:
                        self.host_partition(t, r.partition_id, ip)
            elif kind == REMOVE_TOPIC_RECORD:
                names = {p.topic for p in replica_manager.partitions.values() if p.topic_id == r.topic_id}
                for name in names:
                    self.replication_quotas.update_topic(name, {})
                for name in names:
                    removed = [(name, p.partition_id) for p in replica_manager.topic_partitions(name)]
                    if name in COORDINATOR_TOPICS:
                        # a deleted coordinator topic's partitions resign, as Kafka's
                        # BrokerMetadataPublisher.updateCoordinator does for local deletes: its
                        # groups / transactions go with it, and a recreated topic loads anew
                        for _topic, pid in removed:
                            self._coordinator_partition_lost(name, pid)
                    if self.remote_log is not None:   # KIP-405: its remote segments go too
                        self.remote_log.on_partitions_deleted(replica_manager.topic_partitions(name))
                    n = replica_manager.remove_topic(name)
                    log.info("deleted topic %s (%d partitions)", name, n)
                    if self.groups is not None:
                        self.groups.on_partitions_deleted(removed)
                if self.share_state is not None and self.share_state.coordinator.owned_partitions():
                    self.share_state.on_topics_deleted([r.topic_id])
            elif kind == CONFIG_RECORD:
                if r.resource_type == RESOURCE_TOPIC:
                    if r.name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
                        self.replication_quotas.update_topic(r.resource_name, image.topic_configs(r.resource_name))
                    replica_manager.update_topic_config(r.resource_name)
                    self._reapply_roles(r.resource_name)
                elif r.resource_type == RESOURCE_BROKER:
                    refresh_all = True
        if refresh_all:
            self._apply_dynamic_broker_configs()
            for topic in {p.topic for p in replica_manager.partitions.values()}:
                replica_manager.update_topic_config(topic)
                self._reapply_roles(topic)

    def _reapply_roles(self, topic: str) -> None:
        """A config change (min.insync.replicas) reaches the leaders of ``topic``."""
        t = self.context.image.topics.get(topic)
        if t is None:
            return
        for p in self.replica_manager.topic_partitions(topic):
            ip = t.partitions.get(p.partition_id)
            if ip is not None and p.is_leader:
                self.apply_role(t, p.partition_id, ip)
