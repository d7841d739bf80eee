"""The controller: validates cluster metadata changes and turns them into metadata records.

As Kafka's ``QuorumController`` (``ReplicationControlManager``, ``ConfigurationControlManager``,
``ProducerIdControlManager``): every operation checks the request against the current image and
returns the records that make the change plus the per-item results; :meth:`Controller.commit`
hands the records to a sink that commits them to the metadata log. The image changes only by
replaying committed records, on every node.

Errors are Kafka's (CreateTopics / DeleteTopics / CreatePartitions / IncrementalAlterConfigs):
INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
UNKNOWN_TOPIC_ID, TOPIC_DELETION_DISABLED.

Partitions created without a manual assignment are placed by :mod:`kcompat.kraft.replica_placer`
(Kafka's ``StripedReplicaPlacer``: rack-aware, leaders spread over racks and brokers) on the
usable brokers, registered and not in controlled shutdown, leaving out those whose every log dir
is cordoned (KIP-1066); a fenced broker may get a follower replica, outside the ISR, when there are
not enough unfenced ones (as in Kafka).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Callable

from kcompat.kraft import feature_control
from kcompat.kraft.feature_control import METADATA_VERSION
from kcompat.kraft.image import RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC, MetadataImage
from kcompat.kraft.replica_placer import UsableBroker, place_replicas
from kcompat.protocol.errors import ErrorCode, KafkaError, default_message
from kcompat.protocol.topic_names import validate_topic_name
from kcompat.protocol.metadata_records import (
    ConfigRecord, PartitionRecord, ProducerIdsRecord, RemoveTopicRecord, TopicRecord,
)

PRODUCER_ID_BLOCK_SIZE = 1000
# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: CreateTopics adding more partitions
# in one request fails with POLICY_VIOLATION (a huge count must not stall the broker placing them).
MAX_PARTITIONS_PER_BATCH = 10_000


def _unfenced(usable: list[UsableBroker]) -> list[int]:
    return sorted(b.broker_id for b in usable if not b.fenced)


def validate_replica_list(replicas: list[int], registered: set[int]) -> None:
    """One manual replica list as Kafka's ``validateManualPartitionAssignment`` checks it (for
    CreateTopics, CreatePartitions and AlterPartitionReassignments): raises
    KafkaError(INVALID_REPLICA_ASSIGNMENT) for an empty list, a broker not in ``registered`` or a
    broker named twice, with Kafka's messages."""
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for b in sorted(replicas):
        if b not in registered:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {b}, but no such broker is "
                             f"registered.")
        if b == previous:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {b} more than once.")
        previous = b


@dataclass
class NewTopic:
    """A topic to create: ``num_partitions``/``replication_factor`` -1 mean the broker defaults;
    ``assignments`` maps partition index -> replica broker ids (then both counts must be -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] = field(default_factory=dict)
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


class Controller:
    """The active controller's operations over a :class:`MetadataImage`.

    Every operation validates against the image and hands the records that make the change to
    ``sink(records, now_ms)``; the image changes only when those records come back committed from
    the metadata log (``ControllerService`` commits them through the Raft quorum and waits until
    they are applied before running the next operation, as Kafka's ``QuorumController`` event
    queue). ``defaults``: callable returning (num.partitions, default.replication.factor);
    ``validate_topic_configs``: callable normalizing a {name: value} dict, raising an exception
    with ``key`` and a message on bad input; ``usable_brokers``: callable returning the
    :class:`UsableBroker` list new replicas may go to (default: the image's registered brokers
    that are not in controlled shutdown, with rack and fenced flag, as Kafka's
    ``ClusterControlManager.usableBrokers``); ``seed``: seeds the controller's ``random.Random``
    (Kafka's placer ``Random``), so placement is deterministic for a given seed and sequence of
    operations (None: seeded from the OS).
    """

    def __init__(self, image: MetadataImage, sink: Callable[[list, int], None], *, node_id: int,
                 defaults: Callable[[], tuple[int, int]],
                 validate_topic_configs: Callable[[dict], dict],
                 delete_topic_enable: Callable[[], bool],
                 usable_brokers: Callable[[], list[UsableBroker]] | None = None,
                 seed: int | None = None) -> None:
        self.image = image
        self._sink = sink
        self.node_id = node_id
        self._defaults = defaults
        self._validate_configs = validate_topic_configs
        self._usable_brokers = usable_brokers or self._image_usable_brokers
        self.random = random.Random(seed)
        self._delete_enabled = delete_topic_enable

    # -- commit ----------------------------------------------------------------------------------

    def commit(self, records: list, now_ms: int) -> None:
        """Hand ``records`` (one atomic change) to the sink that commits them."""
        if records:
            self._sink(list(records), now_ms)

    def bootstrap(self, now_ms: int) -> None:
        """First start of a new cluster: finalize metadata.version and the feature levels Kafka 4.3
        finalizes with it (Kafka's bootstrap records, :func:`feature_control.bootstrap_records`)."""
        if "metadata.version" not in self.image.features:
            self.commit(feature_control.bootstrap_records(METADATA_VERSION), now_ms)

    # -- features --------------------------------------------------------------------------------

    def update_features(self, updates: list[feature_control.Update], *, validate_only: bool, now_ms: int) -> None:
        """UpdateFeatures (KIP-584, KIP-778): validated against this controller's supported levels
        and every registered broker's (:func:`feature_control.update_features`), committed as
        FeatureLevelRecords in one batch unless ``validate_only``. Raises
        KafkaError (INVALID_UPDATE_VERSION) for the whole request."""
        finalized = self.image.features
        records = feature_control.update_features(
            finalized, updates, node_id=self.node_id, local=feature_control.supported(finalized),
            brokers={b.broker_id: b.features for b in self.image.brokers.values()})
        if not validate_only:
            self.commit(records, now_ms)

    # -- topics ----------------------------------------------------------------------------------

    def create_topics(self, topics: list[NewTopic], *, validate_only: bool, now_ms: int) -> list[TopicResult]:
        """CreateTopics: returns one result per requested topic, in order."""
        if self._total_new_partitions(topics) > MAX_PARTITIONS_PER_BATCH:
            return [TopicResult(t.name, ErrorCode.POLICY_VIOLATION,
                                "Excessively large number of partitions per request.") for t in topics]
        results = []
        records: list = []
        seen: dict[str, int] = {}
        for t in topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        pending_names = set()
        for t in topics:
            res = TopicResult(t.name)
            results.append(res)
            try:
                if seen[t.name] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Duplicate topic name {t.name} in CreateTopics request")
                validate_topic_name(t.name)
                if t.name in self.image.topics or t.name in pending_names:
                    raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
                self._check_collision(t.name, pending_names)
                new_records, res.topic_id, res.num_partitions, res.replication_factor = \
                    self._topic_records(t)
                res.configs = self._validated_configs(t.configs)
                new_records += [ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=t.name, name=k, value=v)
                                for k, v in res.configs.items()]
            except KafkaError as e:
                res.error, res.message = e.code, e.message
                continue
            pending_names.add(t.name)
            records.extend(new_records)
        if not validate_only:
            self.commit(records, now_ms)
        return results

    def _total_new_partitions(self, topics: list[NewTopic]) -> int:
        """Kafka's ``validateTotalNumberOfPartitions``: assignments, else the count (-1 = default)."""
        default_partitions = self._defaults()[0]
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += default_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    def _check_collision(self, name: str, pending: set[str]) -> None:
        norm = name.replace(".", "_")
        for other in list(self.image.topics) + list(pending):
            if other != name and other.replace(".", "_") == norm:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {other}")

    def _validated_configs(self, configs: dict) -> dict[str, str]:
        if not configs:
            return {}
        for k, v in configs.items():
            if v is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {k}")
        try:
            return self._validate_configs(dict(configs))
        except KafkaError:
            raise
        except Exception as e:  # ConfigError from kcompat.config
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from e

    def _placeable(self, usable: list[UsableBroker]) -> list[UsableBroker]:
        """The usable brokers the placer may choose: not those whose every log dir is cordoned
        (Kafka ``BrokerHeartbeatManager.usableBrokers`` with ``hasUncordonedDirs``, KIP-1066);
        manual assignments may still name them."""
        brokers = self.image.brokers
        return [b for b in usable if b.broker_id not in brokers or brokers[b.broker_id].has_uncordoned_dirs()]

    def _image_usable_brokers(self) -> list[UsableBroker]:
        return [UsableBroker(b.broker_id, b.rack, b.fenced) for b in self.image.brokers.values()
                if not b.in_controlled_shutdown]

    def _topic_records(self, t: NewTopic):
        usable = self._usable_brokers()
        default_partitions, default_rf = self._defaults()
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.")
            assignment = self._check_assignments(t.assignments, 0, usable)
        else:
            n = default_partitions if t.num_partitions == -1 else t.num_partitions
            rf = default_rf if t.replication_factor == -1 else t.replication_factor
            if n <= 0:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 "Number of partitions was set to an invalid non-positive value.")
            if rf <= 0:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0, or -1 to use the default value.")
            try:
                assignment = place_replicas(self._placeable(usable), 0, n, rf, self.random)
            except KafkaError as e:  # ReplicationControlManager.createTopic's wording
                raise KafkaError(e.code, f"Unable to replicate the partition {rf} time(s): {e.message}") from e
        topic_id = uuid.uuid4()
        records: list = [TopicRecord(name=t.name, topic_id=topic_id)]
        records += self._partition_records(topic_id, assignment, _unfenced(usable))
        rf_out = len(next(iter(assignment.values())))
        return records, topic_id, len(assignment), rf_out

    def _check_assignments(self, assignments: dict[int, list[int]], first: int, usable: list[UsableBroker],
                           replication_factor: int | None = None) -> dict[int, list[int]]:
        """Manual assignments as Kafka's ``ReplicationControlManager`` checks them: partitions
        numbered consecutively from ``first``; each replica list non-empty, of registered brokers
        (fenced ones too), without repeats, as long as the others (or ``replication_factor``, the
        existing partitions' for CreatePartitions); at least one replica on an ``active`` broker
        (unfenced, not shutting down), which leads. ``usable``: the brokers new replicas may go to
        (registered ones in controlled shutdown count as registered too). Raises
        KafkaError(INVALID_REPLICA_ASSIGNMENT)."""
        indexes = sorted(assignments)
        if indexes != list(range(first, first + len(indexes))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "Partitions should be numbered consecutively starting from "
                             f"{first}; got {indexes}.")
        registered = set(self.image.brokers) | {b.broker_id for b in usable}
        active_ids = set(_unfenced(usable))
        rf = replication_factor
        for p in indexes:
            replicas = assignments[p]
            validate_replica_list(replicas, registered)
            if rf is not None and len(replicas) != rf:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes a partition with {len(replicas)} "
                                 f"replica(s), but this is not consistent with previous partitions, which have "
                                 f"{rf} replica(s).")
            rf = len(replicas)
            if not any(b in active_ids for b in replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"All brokers specified in the manual partition assignment for partition {p} "
                                 f"are fenced or in controlled shutdown.")
        return {p: list(assignments[p]) for p in indexes}

    @staticmethod
    def _partition_records(topic_id: uuid.UUID, assignment: dict[int, list[int]], active: list[int]) -> list:
        """PartitionRecords with the ISR = the replicas on active brokers (Kafka's
        ``buildPartitionRegistration``: leader = first of the ISR); the placer's leader is active."""
        records = []
        active_ids = set(active)
        for p, r in assignment.items():
            isr = [b for b in r if b in active_ids]
            records.append(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=list(r), isr=isr,
                                           leader=isr[0], leader_epoch=0, partition_epoch=0))
        return records

    def delete_topics(self, names: list[str], ids: list[uuid.UUID], *, now_ms: int) -> tuple[list, list]:
        """DeleteTopics by name and by id; returns (results by name, results by id) where each
        result is (name, topic_id, error, message)."""
        by_name, by_id, records = [], [], []
        enabled = self._delete_enabled()
        for name in names:
            t = self.image.topics.get(name)
            if not enabled:
                by_name.append((name, None, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."))
            elif t is None:
                by_name.append((name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            else:
                by_name.append((name, t.topic_id, ErrorCode.NONE, None))
                records.append(RemoveTopicRecord(topic_id=t.topic_id))
        for tid in ids:
            t = self.image.topics_by_id.get(tid)
            if not enabled:
                by_id.append((None, tid, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."))
            elif t is None:
                by_id.append((None, tid, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."))
            else:
                by_id.append((t.name, tid, ErrorCode.NONE, None))
                records.append(RemoveTopicRecord(topic_id=tid))
        seen = set()
        unique = []
        for r in records:
            if r.topic_id not in seen:
                seen.add(r.topic_id)
                unique.append(r)
        self.commit(unique, now_ms)
        return by_name, by_id

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                          validate_only: bool, now_ms: int) -> None:
        """CreatePartitions for one topic; raises KafkaError with Kafka's error and message."""
        t = self.image.topics.get(name)
        if t is None:   # no message (Kafka 4.3.1's ReplicationControlManager.createPartitions)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        current = len(t.partitions)
        # ReplicationControlManager.createPartitions' messages (KRaft mode; not AdminZkClient's)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"The topic {name} currently has {current} partition(s); {count} would not be an increase.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if count - current > MAX_PARTITIONS_PER_BATCH:
            # Kafka collects the records in a BoundedList of MAX_RECORDS_PER_USER_OP (10000); the
            # overflow is not an ApiException, so the topic fails with UNKNOWN_SERVER_ERROR
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Cannot add another element to the list because it would exceed the maximum "
                             f"length of {MAX_PARTITIONS_PER_BATCH}")
        usable = self._usable_brokers()
        active = _unfenced(usable)
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 1
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {count - current} additional partition(s), but only "
                                 f"{len(assignments)} assignment(s) were specified.")
            new = self._check_assignments({current + i: a for i, a in enumerate(assignments)}, current, usable,
                                          rf if t.partitions else None)
        else:  # the placer's message as it is (Kafka's createPartitionsForTopic adds no prefix)
            new = place_replicas(self._placeable(usable), current, count - current, rf, self.random)
        if not validate_only:
            self.commit(self._partition_records(t.topic_id, new, active), now_ms)

    # -- configs ---------------------------------------------------------------------------------

    def alter_topic_configs(self, name: str, new_configs: dict[str, str], *, validate_only: bool,
                            now_ms: int) -> None:
        """Replace the topic's overrides with ``new_configs`` (already merged by the caller)."""
        if name not in self.image.topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        normalized = self._validated_configs(new_configs)
        self._commit_config_diff(RESOURCE_TOPIC, name, self.image.topic_configs(name), normalized,
                                 validate_only, now_ms)

    def alter_broker_configs(self, resource_name: str, new_configs: dict[str, str], *,
                             validate_only: bool, now_ms: int) -> None:
        """Replace dynamic broker configs of ``resource_name`` ("" = cluster default)."""
        self._commit_config_diff(RESOURCE_BROKER, resource_name, self.image.broker_configs(resource_name),
                                 new_configs, validate_only, now_ms)

    def alter_group_configs(self, group_id: str, new_configs: dict[str, str], *, validate_only: bool,
                            now_ms: int) -> None:
        """Replace the dynamic configs of group ``group_id`` with ``new_configs`` (validated and
        normalised by the caller with the broker's bounds, ``kcompat.config.group``): ConfigRecords
        of resource type GROUP (32) for what changed. The group need not exist (as in Kafka).
        INVALID_REQUEST for the empty name (``Default group resources are not allowed.``)."""
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        self._commit_config_diff(RESOURCE_GROUP, group_id, self.image.group_config(group_id), new_configs,
                                 validate_only, now_ms)

    def alter_client_metrics_configs(self, name: str, new_configs: dict[str, str], *, validate_only: bool,
                                     now_ms: int) -> None:
        """Replace the configs of client metrics subscription ``name`` (KIP-714; validated by the
        caller, ``kcompat.config.client_metrics``): ConfigRecords of resource type CLIENT_METRICS
        (16) for what changed; no configs left = no subscription. INVALID_REQUEST for the empty
        name (``Subscription name can't be empty``, Kafka's ``ClientMetricsConfigs.validate``)."""
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        self._commit_config_diff(RESOURCE_CLIENT_METRICS, name, self.image.resource_configs(RESOURCE_CLIENT_METRICS, name),
                                 new_configs, validate_only, now_ms)

    def _commit_config_diff(self, rtype: int, rname: str, old: dict, new: dict, validate_only: bool,
                            now_ms: int) -> None:
        records = [ConfigRecord(resource_type=rtype, resource_name=rname, name=k, value=v)
                   for k, v in new.items() if old.get(k) != v]
        records += [ConfigRecord(resource_type=rtype, resource_name=rname, name=k, value=None)
                    for k in old if k not in new]
        if not validate_only:
            self.commit(records, now_ms)

    # -- producer ids ----------------------------------------------------------------------------

    def allocate_producer_ids(self, broker_id: int, now_ms: int, broker_epoch: int = -1) -> tuple[int, int]:
        """AllocateProducerIds: a fresh block ``(first id, length)``; never handed out twice."""
        start = self.image.next_producer_id
        self.commit([ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                       next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)], now_ms)
        return start, PRODUCER_ID_BLOCK_SIZE
