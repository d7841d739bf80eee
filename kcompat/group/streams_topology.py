"""A streams group's topology and its configuration against the metadata image (KIP-1071).

A Kafka Streams client sends its topology when it joins (StreamsGroupHeartbeat ``Topology``): the
subtopologies, each with its source topics, the repartition topics it reads and writes, and its
state changelog topics. The broker, not the client, decides how many partitions the internal
(repartition and changelog) topics get and creates the missing ones (KIP-1071 "Internal topic
creation"), as Kafka 4.3.1's ``InternalTopicManager.configureTopics`` does:

- every external source topic must exist, else MISSING_SOURCE_TOPICS;
- a repartition topic without a fixed partition count gets the largest partition count of the
  source (and repartition source) topics of the subtopology writing to it, repeated until every
  count is known (``RepartitionTopics``); a loop that cannot be resolved is STREAMS_INVALID_TOPOLOGY;
- a changelog topic gets the task count of its subtopology (``ChangelogTopics``): the largest
  partition count of the subtopology's source and repartition source topics;
- internal topics that exist with another partition count are INCORRECTLY_PARTITIONED_TOPICS;
  those that do not exist are returned to be created, with status MISSING_INTERNAL_TOPICS.

- the topics of each copartition group (a join's inputs) must have the same partition count:
  repartition topics take the external topics' count, and external topics with different counts
  are INCORRECTLY_PARTITIONED_TOPICS (``CopartitionedTopicsEnforcer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kcompat.coordinator.java_strings import java_hash_order

# StreamsGroupHeartbeatResponse.Status codes (Kafka 4.3.1's StreamsGroupHeartbeatResponse.Status)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True)
class InternalTopic:
    """A repartition or changelog topic as the topology gives it: ``partitions`` 0 = decided by the
    broker, ``replication_factor`` 0 = the broker default, ``configs`` ``((key, value), ...)``."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    """One subtopology (its id is the task id's first half, e.g. ``"0"``)."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[InternalTopic, ...] = ()
    repartition_source_topics: tuple[InternalTopic, ...] = ()
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()

    @property
    def stateful(self) -> bool:
        """Has state stores (changelog topics): standby replicas are assigned only for these."""
        return bool(self.state_changelog_topics)


@dataclass(frozen=True)
class Topology:
    """The topology a streams group runs at ``epoch``; subtopologies sorted by id."""

    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()

    def source_topic_subtopology(self) -> dict[str, str]:
        """Source topic (external or repartition) -> the subtopology reading it."""
        out = {}
        for s in self.subtopologies:
            for t in s.source_topics:
                out[t] = s.subtopology_id
            for t in s.repartition_source_topics:
                out[t.name] = s.subtopology_id
        return out

    def required_topics(self) -> set[str]:
        """Every topic the topology reads or writes (StreamsTopology.requiredTopics)."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(s.repartition_sink_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out


def _topic_info(t) -> InternalTopic:
    return InternalTopic(t.name, t.partitions, t.replication_factor,
                         tuple((c.key, c.value) for c in t.topic_configs or ()))


def from_request(topology) -> Topology:
    """A :class:`Topology` from a StreamsGroupHeartbeat request's ``Topology`` (or a record's)."""
    subs = []
    for s in topology.subtopologies or ():
        subs.append(Subtopology(
            s.subtopology_id, tuple(s.source_topics or ()), tuple(s.repartition_sink_topics or ()),
            tuple(_topic_info(t) for t in s.state_changelog_topics or ()),
            tuple(_topic_info(t) for t in s.repartition_source_topics or ()),
            tuple((tuple(g.source_topics or ()), tuple(g.repartition_source_topics or ()))
                  for g in s.copartition_groups or ())))
    return Topology(topology.epoch, tuple(sorted(subs, key=lambda s: s.subtopology_id)))


class TopologyError(Exception):
    """The topology cannot be configured now: ``status`` is a heartbeat status code (or None when
    the topology itself is invalid: STREAMS_INVALID_TOPOLOGY)."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ConfiguredTopology:
    """The topology checked against the image (Kafka's ``ConfiguredTopology``): ``tasks``
    subtopology id -> number of tasks (None: not ready), ``to_create`` internal topics missing
    (name -> (partitions, replication factor or -1, configs)), and the status to report
    (``(code, detail)``) while it is not ready."""

    epoch: int
    tasks: dict[str, int] | None = None
    to_create: dict[str, tuple[int, int, dict[str, str]]] = field(default_factory=dict)
    status: tuple[int, str] | None = None
    partitions: dict[str, int] = field(default_factory=dict)   # internal topic -> decided partition count

    @property
    def ready(self) -> bool:
        return self.tasks is not None and not self.to_create and self.status is None


def summarize(topics) -> str:
    """At most three names, then how many more (InternalTopicManager.summarizeTopics)."""
    topics = list(topics)
    if not topics:
        return "<none>"
    text = ", ".join(topics[:3])
    return text + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def configure(topology: Topology, partition_count: Callable[[str], int | None]) -> ConfiguredTopology:
    """Configure ``topology`` against the image (``partition_count(topic)``: its partition count,
    None if it does not exist) as InternalTopicManager.configureTopics. Raises
    :class:`TopologyError` with status None for an invalid topology."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics if partition_count(t) is None})
        if missing:
            raise TopologyError(MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing.")
        decided = _repartition_counts(topology, partition_count)

        def count(topic: str) -> int | None:
            n = partition_count(topic)
            return n if n is not None else decided.get(topic)

        _enforce_copartitioning(topology, count, decided)

        tasks = {}
        for s in topology.subtopologies:
            counts = [count(t) for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))]
            if not counts or any(c is None for c in counts):
                raise TopologyError(None, f"No source topics found for subtopology {s.subtopology_id}")
            tasks[s.subtopology_id] = max(counts)
            for t in s.state_changelog_topics:
                decided[t.name] = tasks[s.subtopology_id]
        wanted: dict[str, tuple[int, int, dict[str, str]]] = {}
        for s in topology.subtopologies:
            for t in (*s.repartition_source_topics, *s.state_changelog_topics):
                wanted[t.name] = (decided[t.name], t.replication_factor or -1, dict(t.configs))
        for name in sorted(topology.required_topics()):
            existing = partition_count(name)
            expected = wanted.pop(name, None) if existing is not None else None
            if expected is not None and expected[0] != existing:
                raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                                    f"Existing topic {name} has different number of partitions: expected "
                                    f"{expected[0]}, found {existing}")
        if wanted:
            # listed in the order of Kafka's HashMap of the topics to create
            size = 16
            while len(wanted) > size * 0.75:
                size *= 2
            wanted = {n: wanted[n] for n in java_hash_order(list(wanted), size)}
            return ConfiguredTopology(topology.epoch, tasks, wanted,
                                      (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {summarize(wanted)}"),
                                      decided)
        return ConfiguredTopology(topology.epoch, tasks, partitions=decided)
    except TopologyError as e:
        if e.status is None:
            raise
        return ConfiguredTopology(topology.epoch, None, {}, (e.status, e.message))


def _enforce_copartitioning(topology: Topology, count: Callable[[str], int | None], decided: dict[str, int]) -> None:
    """InternalTopicManager.enforceCopartitioning: each copartition group's repartition topics get
    one partition count (the external topics' one, which must agree; else the fixed repartition
    topics', which must agree; else the largest), written into ``decided``."""
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions}
    flexible = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if not t.partitions}

    def mismatch(counts: dict[str, int]) -> TopologyError:
        listed = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        return TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                             f"Following topics do not have the same number of partitions: [{{{listed}}}]")

    for s in topology.subtopologies:
        for sources, repartitions in s.copartition_groups:
            topics = {s.source_topics[i] for i in sources} | {s.repartition_source_topics[i].name
                                                               for i in repartitions}
            if not topics:
                continue
            internal = {t: count(t) for t in topics if t in fixed or t in flexible}
            external = {t: count(t) for t in topics if t not in internal}
            if not external:
                if fixed:
                    wanted = {count(t) for t in fixed}
                    if len(wanted) > 1:
                        raise mismatch(internal)
                    n = wanted.pop()
                else:
                    n = max(internal.values())
                    if not n:
                        raise TopologyError(None, "All topics in the copartition group had undefined partition "
                                                  f"number: {sorted(internal)}")
            else:
                if len(set(external.values())) > 1:
                    raise mismatch(external)
                n = next(iter(external.values()))
            for topic, current in internal.items():
                decided[topic] = n
                if topic in fixed and current != n:
                    raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                                        f"Number of partitions [{current}] of repartition topic [{topic}] doesn't "
                                        f"match number of partitions [{n}] of the source topic.")


def _repartition_counts(topology: Topology, partition_count: Callable[[str], int | None]) -> dict[str, int]:
    """Partition counts of the repartition topics (RepartitionTopics.setup): the fixed ones, then
    each sink topic gets the largest count of its writing subtopology's inputs, until all are known."""
    counts = {t.name: t.partitions for s in topology.subtopologies for t in s.repartition_source_topics
              if t.partitions}
    while True:
        needed = progress = False
        for s in topology.subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                inputs = [counts.get(t.name) for t in s.repartition_source_topics]
                inputs += [partition_count(t) for t in s.source_topics]
                known = [n for n in inputs if n is not None]
                if known:
                    counts[sink] = max(known)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise TopologyError(None, "Failed to compute number of partitions for all repartition topics. "
                                      "There may be loops in the topology that cannot be resolved.")
    if any(t.name not in counts for s in topology.subtopologies for t in s.repartition_source_topics):
        raise TopologyError(None, "Failed to compute number of partitions for all repartition topics, because "
                                  "a repartition source topic is never used as a sink topic.")
    return counts
