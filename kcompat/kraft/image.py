"""The metadata image: cluster metadata built only by replaying ``__cluster_metadata`` records.

Kafka's ``MetadataImage`` / ``MetadataDelta`` (metadata module): topics with their ids and
partitions (replicas, ISR, leader, epochs), configs per resource, the next producer id block,
finalized features. Every controller and broker builds the same image from the same records;
nothing else changes it (DESIGN.md section 6).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcompat.kraft import quota_control
from kcompat.protocol.metadata_records import RECORD_TYPES
from kcompat.security.acl import AclBinding, AclStore

# ConfigResource types (DescribeConfigs / ConfigRecord.resource_type)
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16  # client metrics subscriptions (KIP-714): resource name = subscription name
RESOURCE_GROUP = 32  # dynamic group configs (KIP-848, KIP-932): resource name = group id

REGISTER_BROKER_RECORD = 0
UNREGISTER_BROKER_RECORD = 1
TOPIC_RECORD = 2
PARTITION_RECORD = 3
CONFIG_RECORD = 4
PARTITION_CHANGE_RECORD = 5
PRODUCER_IDS_RECORD = 15
REMOVE_TOPIC_RECORD = 9
FENCE_BROKER_RECORD = 7
UNFENCE_BROKER_RECORD = 8
FEATURE_LEVEL_RECORD = 12
BROKER_REGISTRATION_CHANGE_RECORD = 17
USER_SCRAM_CREDENTIAL_RECORD = 11
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
ACCESS_CONTROL_ENTRY_RECORD = 18
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
CLIENT_QUOTA_RECORD = 14
DELEGATION_TOKEN_RECORD = 10
REMOVE_DELEGATION_TOKEN_RECORD = 26

NO_LEADER = -1
NO_CHANGE_LEADER = -2  # PartitionChangeRecord: leader unchanged


def record_type_of(record) -> int:
    return type(record).API_KEY


@dataclass
class PartitionImage:
    """One partition as the controller assigned it. During a reassignment (KIP-455) ``replicas``
    is the target set followed by the replicas being removed; ``adding_replicas`` are target
    replicas not yet in the ISR and ``removing_replicas`` the old ones that go when it completes
    (both empty otherwise), as Kafka's ``PartitionRegistration``."""

    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # replica -> the directory.id of the log dir holding it (KIP-858 ``Directories``); replicas
    # without an entry are unassigned (Kafka DirectoryId.UNASSIGNED, the zero uuid)
    directories: dict[int, uuid.UUID] = field(default_factory=dict)
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)

    @property
    def reassigning(self) -> bool:
        """A reassignment is in progress (adding or removing replicas)."""
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass
class BrokerEndpoint:
    """One listener of a registered broker (RegisterBrokerRecord.BrokerEndpoint)."""

    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass
class BrokerImage:
    """A registered broker (Kafka ``BrokerRegistration``): ``epoch`` is the broker epoch the
    controller assigned at registration (the offset of its RegisterBrokerRecord); a fenced broker
    leads nothing and is not shown to clients."""

    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: dict[str, BrokerEndpoint]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    # directory ids of its online log dirs (KIP-858); empty: unknown (every dir counts as online)
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    # the feature levels it supports, name -> (min, max) (its registration's Features, KIP-584)
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    # directory ids of its cordoned log dirs (KIP-1066); None until its first heartbeat that
    # carries them (sent once the broker has caught up with the metadata)
    cordoned_log_dirs: list[uuid.UUID] | None = None

    def has_online_dir(self, directory: uuid.UUID | None) -> bool:
        """Kafka ``BrokerRegistration.hasOnlineDir``: an unassigned replica (None, the zero uuid)
        or a broker that registered no dirs counts as online."""
        return directory is None or directory.int == 0 or not self.log_dirs or directory in self.log_dirs

    def has_uncordoned_dirs(self) -> bool:
        """Kafka ``BrokerRegistration.hasUncordonedDirs`` (KIP-1066): False only when every log dir
        it registered is cordoned; a broker with no registered dirs, or that has not reported its
        cordoned dirs yet, has room for new replicas."""
        if not self.log_dirs or self.cordoned_log_dirs is None:
            return True
        return bool(set(self.log_dirs) - set(self.cordoned_log_dirs))


@dataclass
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


class MetadataImage:
    """Mutable image of the cluster metadata; ``apply(record, offset)`` is the only writer.

    Attributes: ``topics`` (name -> TopicImage), ``topics_by_id`` (uuid -> TopicImage),
    ``configs`` ((resource type, resource name) -> {config name: value}), ``next_producer_id``
    (first id of the next unallocated block, ProducerIdsRecord), ``features`` (name -> level),
    ``brokers`` (id -> BrokerImage), ``acls`` (the ACL set, :class:`kcompat.security.acl.AclStore`,
    AccessControlEntryRecords), ``delegation_tokens`` (token id -> DelegationTokenRecord, KIP-48,
:mod:`kcompat.kraft.token_control`), ``client_quotas`` (quota entity -> {key: value}, ClientQuotaRecords,
    :mod:`kcompat.kraft.quota_control`), ``offset`` (metadata log offset of the last applied record,
    -1 if none).
    """

    def __init__(self) -> None:
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[uuid.UUID, TopicImage] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.next_producer_id = 0
        self.features: dict[str, int] = {}
        self.brokers: dict[int, BrokerImage] = {}
        self.acls = AclStore()
        # SCRAM credentials (Kafka's ScramImage): (mechanism type 1|2, user) -> UserScramCredentialRecord
        self.scram: dict[tuple[int, str], object] = {}
        self.client_quotas: dict[quota_control.EntityKey, dict[str, float]] = {}
        # delegation tokens (Kafka's DelegationTokenImage): token id -> DelegationTokenRecord
        self.delegation_tokens: dict[str, object] = {}
        self.offset = -1

    def apply(self, record, offset: int) -> None:
        """Apply one metadata record (a generated metadata_records class instance)."""
        kind = record_type_of(record)
        if kind == TOPIC_RECORD:
            t = TopicImage(record.name, record.topic_id)
            self.topics[record.name] = t
            self.topics_by_id[record.topic_id] = t
        elif kind == PARTITION_RECORD:
            t = self.topics_by_id[record.topic_id]
            t.partitions[record.partition_id] = PartitionImage(
                record.partition_id, list(record.replicas), list(record.isr), record.leader,
                record.leader_epoch, record.partition_epoch, _directories(record.replicas, record.directories),
                adding_replicas=list(record.adding_replicas), removing_replicas=list(record.removing_replicas))
        elif kind == PARTITION_CHANGE_RECORD:
            p = self.topics_by_id[record.topic_id].partitions[record.partition_id]
            if record.isr is not None:
                p.isr = list(record.isr)
            if record.replicas is not None:
                p.replicas = list(record.replicas)
                p.directories = {r: d for r, d in p.directories.items() if r in p.replicas}
            if record.directories is not None:
                p.directories = _directories(p.replicas, record.directories)
            if record.adding_replicas is not None:
                p.adding_replicas = list(record.adding_replicas)
            if record.removing_replicas is not None:
                p.removing_replicas = list(record.removing_replicas)
            if record.leader != NO_CHANGE_LEADER:
                p.leader = record.leader
                p.leader_epoch += 1
            p.partition_epoch += 1
        elif kind == REMOVE_TOPIC_RECORD:
            t = self.topics_by_id.pop(record.topic_id, None)
            if t is not None:
                self.topics.pop(t.name, None)
                self.configs.pop((RESOURCE_TOPIC, t.name), None)
        elif kind == CONFIG_RECORD:
            key = (record.resource_type, record.resource_name)
            if record.value is None:
                d = self.configs.get(key)
                if d is not None:
                    d.pop(record.name, None)
                    if not d:
                        del self.configs[key]
            else:
                self.configs.setdefault(key, {})[record.name] = record.value
        elif kind == PRODUCER_IDS_RECORD:
            self.next_producer_id = max(self.next_producer_id, record.next_producer_id)
        elif kind == FEATURE_LEVEL_RECORD:
            # level 0 finalizes nothing (Kafka removes the feature); kraft.version belongs to the
            # Raft layer and its records are skipped (KAFKA-18979)
            if record.name == "kraft.version":
                pass
            elif record.feature_level == 0 and record.name != "metadata.version":
                self.features.pop(record.name, None)
            else:
                self.features[record.name] = record.feature_level
        elif kind == REGISTER_BROKER_RECORD:
            self.brokers[record.broker_id] = BrokerImage(
                record.broker_id, record.broker_epoch, record.incarnation_id,
                {e.name: BrokerEndpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points},
                record.rack, bool(record.fenced), bool(record.in_controlled_shutdown), list(record.log_dirs),
                {f.name: (f.min_supported_version, f.max_supported_version) for f in record.features},
                None if record.cordoned_log_dirs is None else list(record.cordoned_log_dirs))
        elif kind == UNREGISTER_BROKER_RECORD:
            b = self.brokers.get(record.broker_id)
            if b is not None and b.epoch == record.broker_epoch:
                del self.brokers[record.broker_id]
        elif kind in (FENCE_BROKER_RECORD, UNFENCE_BROKER_RECORD):
            b = self.brokers.get(record.id)
            if b is not None and b.epoch == record.epoch:
                b.fenced = kind == FENCE_BROKER_RECORD
                if not b.fenced:
                    b.in_controlled_shutdown = False
        elif kind == BROKER_REGISTRATION_CHANGE_RECORD:
            b = self.brokers.get(record.broker_id)
            if b is not None and b.epoch == record.broker_epoch:
                if record.fenced:  # 1 fenced, -1 unfenced, 0 no change
                    b.fenced = record.fenced > 0
                if record.in_controlled_shutdown:
                    b.in_controlled_shutdown = True
                if record.log_dirs:
                    b.log_dirs = list(record.log_dirs)
                if record.cordoned_log_dirs is not None:   # null: no change (KIP-1066)
                    b.cordoned_log_dirs = list(record.cordoned_log_dirs)
        elif kind == ACCESS_CONTROL_ENTRY_RECORD:
            self.acls.add(record.id, AclBinding.of(record.resource_type, record.resource_name, record.pattern_type,
                                                   record.principal, record.host, record.operation,
                                                   record.permission_type))
        elif kind == REMOVE_ACCESS_CONTROL_ENTRY_RECORD:
            self.acls.remove(record.id)
        elif kind == USER_SCRAM_CREDENTIAL_RECORD:
            self.scram[(record.mechanism, record.name)] = record
        elif kind == REMOVE_USER_SCRAM_CREDENTIAL_RECORD:
            self.scram.pop((record.mechanism, record.name), None)
        elif kind == CLIENT_QUOTA_RECORD:
            quota_control.apply_record(self.client_quotas, record)
        elif kind == DELEGATION_TOKEN_RECORD:
            self.delegation_tokens[record.token_id] = record
        elif kind == REMOVE_DELEGATION_TOKEN_RECORD:
            self.delegation_tokens.pop(record.token_id, None)
        # other record types are not used by kcompat yet
        self.offset = offset

    def offline_replicas(self, p: PartitionImage) -> list[int]:
        """Replicas of ``p`` that cannot serve: the broker is not registered, or the log dir the
        replica is assigned to is offline (Kafka ``isReplicaOffline``, KIP-858)."""
        out = []
        for r in p.replicas:
            b = self.brokers.get(r)
            if b is None or not b.has_online_dir(p.directories.get(r)):
                out.append(r)
        return out

    def has_partition(self, topic: str, partition: int) -> bool:
        """Whether ``topic``-``partition`` exists in the image."""
        t = self.topics.get(topic)
        return t is not None and partition in t.partitions

    def topic_configs(self, name: str) -> dict[str, str]:
        """Topic-level config overrides (DYNAMIC_TOPIC_CONFIG) of ``name``."""
        return dict(self.configs.get((RESOURCE_TOPIC, name), {}))

    def broker_configs(self, resource_name: str) -> dict[str, str]:
        """Dynamic broker configs: ``""`` is the cluster-wide default, ``"<node id>"`` per broker."""
        return dict(self.configs.get((RESOURCE_BROKER, resource_name), {}))

    def group_config(self, group_id: str) -> dict[str, str]:
        """The dynamic configs set on group ``group_id`` (ConfigRecords of resource type GROUP, 32),
        a copy: ``{"share.auto.offset.reset": "earliest", ...}``, empty if none. Raw strings as
        stored; ``kcompat.config.group.effective_group_config`` gives the typed effective values.
        A group keeps its configs when it is deleted, and may have them before it exists."""
        return self.resource_configs(RESOURCE_GROUP, group_id)

    def resource_configs(self, resource_type: int, name: str) -> dict[str, str]:
        """The dynamic configs of any config resource (ConfigRecords of ``resource_type``: 2 topic,
        4 broker, 16 client metrics, 32 group), a copy, ``{name: raw value}``, empty if none."""
        return dict(self.configs.get((resource_type, name), {}))

    def names_with_configs(self, resource_type: int) -> list[str]:
        """Names of the resources of ``resource_type`` that have dynamic configs, sorted: the
        groups (32) and client metrics subscriptions (16, KIP-714) ListConfigResources lists. A
        resource whose last config is deleted is gone (:meth:`apply` drops empty entries)."""
        return sorted(name for rtype, name in self.configs if rtype == resource_type)

    def unfenced_brokers(self) -> list[int]:
        """Ids of registered brokers that may lead partitions (not fenced, not shutting down)."""
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced and not b.in_controlled_shutdown)

    def to_records(self) -> list:
        """Records that rebuild this image from empty (a metadata snapshot, KIP-630): features,
        brokers, topics with partitions, configs, ACLs, SCRAM credentials, client quotas, delegation
        tokens, the producer id watermark."""
        from kcompat.protocol.metadata_records import (
            AccessControlEntryRecord, ConfigRecord, FeatureLevelRecord, PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord, TopicRecord,
        )
        out: list = [FeatureLevelRecord(name=n, feature_level=lvl) for n, lvl in sorted(self.features.items())]
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            out.append(RegisterBrokerRecord(
                broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
                end_points=[RegisterBrokerRecord.BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                                                security_protocol=e.security_protocol)
                            for e in b.endpoints.values()],
                rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
                log_dirs=list(b.log_dirs),
                features=[RegisterBrokerRecord.BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, (lo, hi) in sorted(b.features.items())],
                cordoned_log_dirs=None if b.cordoned_log_dirs is None else list(b.cordoned_log_dirs)))
        for t in self.topics.values():
            out.append(TopicRecord(name=t.name, topic_id=t.topic_id))
            for p in t.partitions.values():
                out.append(PartitionRecord(partition_id=p.partition_id, topic_id=t.topic_id, replicas=list(p.replicas),
                                           isr=list(p.isr), leader=p.leader, leader_epoch=p.leader_epoch,
                                           partition_epoch=p.partition_epoch,
                                           directories=directory_list(p) if p.directories else [],
                                           adding_replicas=list(p.adding_replicas),
                                           removing_replicas=list(p.removing_replicas)))
        for (rtype, rname), values in sorted(self.configs.items()):
            out += [ConfigRecord(resource_type=rtype, resource_name=rname, name=k, value=v)
                    for k, v in sorted(values.items())]
        for acl_id, a in sorted(self.acls.by_id.items()):
            out.append(AccessControlEntryRecord(
                id=acl_id, resource_type=a.resource_type, resource_name=a.resource_name, pattern_type=a.pattern_type,
                principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type))
        out += [self.scram[key] for key in sorted(self.scram)]
        out += quota_control.quota_records(self.client_quotas)
        out += list(self.delegation_tokens.values())
        if self.next_producer_id:
            out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=self.next_producer_id))
        return out


def _directories(replicas, directories) -> dict[int, uuid.UUID]:
    """Replica -> assigned directory from a record's ``Directories`` (aligned with its replicas;
    the zero uuid, UNASSIGNED, and a list of another length give no entry)."""
    if not directories or len(directories) != len(replicas):
        return {}
    return {r: d for r, d in zip(replicas, directories) if d.int != 0}


def directory_list(p: PartitionImage) -> list[uuid.UUID]:
    """``p.directories`` as a record's ``Directories``: one per replica, UNASSIGNED (zero) if none."""
    return [p.directories.get(r, uuid.UUID(int=0)) for r in p.replicas]


def record_class(record_type: int):
    """The generated class for a metadata record type id; KeyError if unknown."""
    return RECORD_TYPES[record_type]
