"""What a broker does with committed metadata (Kafka's ``BrokerMetadataPublisher`` +
``ReplicaManager.applyDelta``).

The image (:class:`kcompat.kraft.image.MetadataImage`) has already replayed the records; this
module makes the broker follow it: partitions whose replicas include this node are hosted (log
loaded or created) and made leader or follower with the image's leader, epochs, replicas and ISR
(followers start fetching from their leader; see :mod:`kcompat.broker.replica_fetcher`); the group
and transaction coordinators follow the leadership of their internal partitions (loaded when this
node becomes leader, unloaded when it stops); removed topics are deleted, and so is a partition
a reassignment moves off this broker; configs are applied.
"""

from __future__ import annotations

import logging

from kcompat.broker.group_runtime import OFFSETS_TOPIC
from kcompat.broker.txn_runtime import TRANSACTION_STATE_TOPIC
from kcompat.share.state_coordinator import SHARE_GROUP_STATE_TOPIC
from kcompat.broker.quota.replication import FOLLOWER_REPLICAS, LEADER_REPLICAS
from kcompat.kraft.image import (
    CLIENT_QUOTA_RECORD, CONFIG_RECORD, PARTITION_CHANGE_RECORD, PARTITION_RECORD, REMOVE_TOPIC_RECORD, RESOURCE_BROKER,
    RESOURCE_TOPIC, record_type_of,
)

log = logging.getLogger("kcompat.broker")


class MetadataPublisher:
    """Applies committed metadata to ``broker`` (a :class:`kcompat.broker.broker.Broker`)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        # internal partitions whose coordinator is loaded here -> the leader epoch it was loaded at
        self._led: dict[tuple[str, int], int] = {}

    # -- hosting ---------------------------------------------------------------------------------

    def host_partition(self, t, pid: int, ip) -> None:
        """Host partition ``pid`` of topic image ``t`` (``ip``: its PartitionImage) and give it
        its role."""
        b = self.broker
        existing = b.log_manager.get(t.name, pid)
        if existing is not None and (t.name, pid) not in b.replica_manager.partitions:
            stored_id = b.log_manager.topic_id_of(t.name, pid)
            if stored_id is not None and stored_id != t.topic_id:
                log.warning("log %s-%d belongs to an older topic of that name (id %s, now %s); "
                            "setting it aside as stray", t.name, pid, stored_id, t.topic_id)
                b.log_manager.mark_stray(t.name, pid)
        b.replica_manager.ensure_partition(t.name, pid, t.topic_id, ip.leader_epoch)
        self.apply_role(t, pid, ip)

    def apply_role(self, t, pid: int, ip) -> None:
        """Make the hosted partition leader or follower as ``ip`` says; move coordinators."""
        b = self.broker
        p = b.replica_manager.get(t.name, pid)
        if p is None:
            return
        b.replica_manager.apply_partition_state(
            p, leader=ip.leader, leader_epoch=ip.leader_epoch, partition_epoch=ip.partition_epoch,
            replicas=ip.replicas, isr=ip.isr, now_ms=b.now_ms(),
            min_insync_replicas=b.topic_values(t.name)["min.insync.replicas"],
            replica_lag_time_max_ms=b.config.get("replica.lag.time.max.ms"), is_eligible=self.is_eligible)
        if t.name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC):
            if ip.leader == b.node_id:
                self._coordinator_partition_led(t.name, pid, ip.leader_epoch)
            else:
                self._coordinator_partition_lost(t.name, pid)

    def remove_replica(self, topic: str, pid: int) -> None:
        """A reassignment took this broker out of the replicas of ``topic``-``pid``: stop it
        and delete its log (Kafka ``ReplicaManager.applyDelta``'s deletes)."""
        if topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC):
            self._coordinator_partition_lost(topic, pid)
        if self.broker.replica_manager.remove_partition(topic, pid):
            log.info("%s-%d: no longer a replica here (reassigned); log deleted", topic, pid)

    def is_eligible(self, replica_id: int) -> bool:
        """A replica may join an ISR: registered, unfenced, not shutting down (KIP-841)."""
        br = self.broker.image.brokers.get(replica_id)
        return br is not None and not br.fenced and not br.in_controlled_shutdown

    def host_coordinators(self) -> None:
        """Load the group and transaction coordinators of internal partitions this node leads."""
        b = self.broker
        for topic, runtime in ((OFFSETS_TOPIC, b.groups), (TRANSACTION_STATE_TOPIC, b.txn),
                               (SHARE_GROUP_STATE_TOPIC, b.share_state)):
            t = b.image.topics.get(topic)
            if t is not None:
                for pid, p in t.partitions.items():
                    if p.leader == b.node_id:
                        self._coordinator_partition_led(topic, pid, p.leader_epoch)

    def _runtime(self, topic: str):
        b = self.broker
        name = {OFFSETS_TOPIC: "groups", TRANSACTION_STATE_TOPIC: "txn", SHARE_GROUP_STATE_TOPIC: "share_state"}
        return getattr(b, name[topic], None)

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
        b = self.broker
        for t in list(b.image.topics.values()):
            for pid, p in t.partitions.items():
                if b.node_id in p.replicas:
                    self.host_partition(t, pid, p)
        for topic, pid in list(b.replica_manager.partitions):
            t = b.image.topics.get(topic)
            p = t.partitions.get(pid) if t is not None else None
            if p is not None and b.node_id not in p.replicas:
                self.remove_replica(topic, pid)
        for name in b.image.topics:
            b.replication_quotas.update_topic(name, b.image.topic_configs(name))
        b._apply_dynamic_broker_configs()
        b.quotas.update(b.image.client_quotas)
        if hasattr(b, "groups"):
            self.host_coordinators()

    def on_metadata(self, records: list) -> None:
        """React to committed metadata records already applied to the image."""
        b = self.broker
        refresh_all = False
        if any(record_type_of(r) == CLIENT_QUOTA_RECORD for r in records):
            b.quotas.update(b.image.client_quotas)   # the quota managers follow the image
        for r in records:
            kind = record_type_of(r)
            if kind == PARTITION_RECORD:
                t = b.image.topics_by_id.get(r.topic_id)
                if t is not None and b.node_id in r.replicas:
                    self.host_partition(t, r.partition_id, t.partitions[r.partition_id])
            elif kind == PARTITION_CHANGE_RECORD:
                t = b.image.topics_by_id.get(r.topic_id)
                if t is not None:
                    ip = t.partitions[r.partition_id]
                    if b.replica_manager.get(t.name, r.partition_id) is not None:
                        if b.node_id in ip.replicas:
                            self.apply_role(t, r.partition_id, ip)
                        else:
                            self.remove_replica(t.name, r.partition_id)
                    elif b.node_id in ip.replicas:
                        self.host_partition(t, r.partition_id, ip)
            elif kind == REMOVE_TOPIC_RECORD:
                names = {p.topic for p in b.replica_manager.partitions.values() if p.topic_id == r.topic_id}
                for name in names:
                    b.replication_quotas.update_topic(name, {})
                for name in names:
                    removed = [(name, p.partition_id) for p in b.replica_manager.topic_partitions(name)]
                    if getattr(b, "remote_log", None) is not None:   # KIP-405: its remote segments go too
                        b.remote_log.on_partitions_deleted(b.replica_manager.topic_partitions(name))
                    n = b.replica_manager.remove_topic(name)
                    log.info("deleted topic %s (%d partitions)", name, n)
                    if hasattr(b, "groups"):
                        b.groups.on_partitions_deleted(removed)
                if hasattr(b, "share_state") and b.share_state.coordinator.owned_partitions():
                    b.share_state.on_topics_deleted([r.topic_id])
            elif kind == CONFIG_RECORD:
                if r.resource_type == RESOURCE_TOPIC:
                    if r.name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
                        b.replication_quotas.update_topic(r.resource_name, b.image.topic_configs(r.resource_name))
                    b.replica_manager.update_topic_config(r.resource_name)
                    self._reapply_roles(r.resource_name)
                elif r.resource_type == RESOURCE_BROKER:
                    refresh_all = True
        if refresh_all:
            b._apply_dynamic_broker_configs()
            for topic in {p.topic for p in b.replica_manager.partitions.values()}:
                b.replica_manager.update_topic_config(topic)
                self._reapply_roles(topic)

    def _reapply_roles(self, topic: str) -> None:
        """A config change (min.insync.replicas) reaches the leaders of ``topic``."""
        t = self.broker.image.topics.get(topic)
        if t is None:
            return
        for p in self.broker.replica_manager.topic_partitions(topic):
            ip = t.partitions.get(p.partition_id)
            if ip is not None and p.is_leader:
                self.apply_role(t, p.partition_id, ip)
