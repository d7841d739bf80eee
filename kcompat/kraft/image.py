"""The metadata image: cluster metadata built only by replaying ``__cluster_metadata`` records.

Kafka's ``MetadataImage`` / ``MetadataDelta`` (metadata module): topics with their ids and
partitions (replicas, ISR, leader, epochs), configs per resource, the next producer id block,
finalized features. Every controller and broker builds the same image from the same records;
nothing else changes it (DESIGN.md section 6).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcompat.protocol.metadata_records import RECORD_TYPES

# ConfigResource types (DescribeConfigs / ConfigRecord.resource_type)
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

TOPIC_RECORD = 2
PARTITION_RECORD = 3
CONFIG_RECORD = 4
PARTITION_CHANGE_RECORD = 5
PRODUCER_IDS_RECORD = 15
REMOVE_TOPIC_RECORD = 9
FEATURE_LEVEL_RECORD = 12

NO_LEADER = -1
NO_CHANGE_LEADER = -2  # PartitionChangeRecord: leader unchanged


def record_type_of(record) -> int:
    return type(record).API_KEY


@dataclass
class PartitionImage:
    """One partition as the controller assigned it."""

    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


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
    ``offset`` (metadata log offset of the last applied record, -1 if none).
    """

    def __init__(self) -> None:
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[uuid.UUID, TopicImage] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.next_producer_id = 0
        self.features: dict[str, int] = {}
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
                record.leader_epoch, record.partition_epoch)
        elif kind == PARTITION_CHANGE_RECORD:
            p = self.topics_by_id[record.topic_id].partitions[record.partition_id]
            if record.isr is not None:
                p.isr = list(record.isr)
            if record.replicas is not None:
                p.replicas = list(record.replicas)
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
            self.features[record.name] = record.feature_level
        # other record types (brokers, ACLs, quotas, ...) are not used by a single node yet
        self.offset = offset

    def topic_configs(self, name: str) -> dict[str, str]:
        """Topic-level config overrides (DYNAMIC_TOPIC_CONFIG) of ``name``."""
        return dict(self.configs.get((RESOURCE_TOPIC, name), {}))

    def broker_configs(self, resource_name: str) -> dict[str, str]:
        """Dynamic broker configs: ``""`` is the cluster-wide default, ``"<node id>"`` per broker."""
        return dict(self.configs.get((RESOURCE_BROKER, resource_name), {}))


def record_class(record_type: int):
    """The generated class for a metadata record type id; KeyError if unknown."""
    return RECORD_TYPES[record_type]
