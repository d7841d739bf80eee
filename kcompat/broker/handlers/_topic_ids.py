"""Shared by the handlers whose newest versions name topics by id instead of name (Produce v13,
KIP-516; OffsetCommit v10, OffsetFetch v10, KIP-848): Kafka 4.3.1's ``KafkaApis`` resolves the ids
through the metadata cache before the request goes on (committed offsets stay stored by topic
name), answers a topic whose id is unknown with UNKNOWN_TOPIC_ID for each of its partitions, and
puts the ids back into the answer."""

from __future__ import annotations

TOPIC_IDS_MIN_VERSION = 10   # OffsetCommit / OffsetFetch (Produce: its own, v13)


def resolve_names(image, topics) -> list:
    """Set ``name`` on each of ``topics`` (request entries with ``topic_id``) from the metadata
    ``image``; returns the entries whose id is unknown (their name stays ``""``)."""
    unknown = []
    for t in topics:
        found = image.topics_by_id.get(t.topic_id)
        if found is None:
            t.name = ""
            unknown.append(t)
        else:
            t.name = found.name
    return unknown


def set_ids(image, topics, drop_unknown: bool = False) -> list:
    """``topics`` (response entries named by the coordinator) with ``topic_id`` set from the
    ``image``: entries that already carry an id keep it; with ``drop_unknown`` those of topics that
    no longer exist are left out (Kafka's all-topics OffsetFetch keeps only topics with an id)."""
    kept = []
    for t in topics:
        if t.topic_id.int == 0:
            found = image.topics.get(t.name)
            if found is not None:
                t.topic_id = found.topic_id
            elif drop_unknown:
                continue
        kept.append(t)
    return kept
