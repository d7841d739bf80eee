"""Topic names as Kafka's ``org.apache.kafka.common.internals.Topic`` knows them: the internal
topics, which Metadata marks ``is_internal`` and regex subscriptions and topic listings leave out,
and the rules a topic name must follow (``Topic.validate``), which every API that takes a new or
client-given name checks."""

from __future__ import annotations

import re

from kcompat.protocol.errors import ErrorCode, KafkaError

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
# Kafka 4.3.1's Topic.INTERNAL_TOPICS (__cluster_metadata is not a topic clients see)
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME})

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def is_internal(name: str) -> bool:
    """``Topic.isInternal``: one of :data:`INTERNAL_TOPICS`."""
    return name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka 4.3.1's ``Topic.validate`` (``Topic name is invalid: <reason>``, the reasons of its
    ``detectInvalidTopic``); raises KafkaError(INVALID_TOPIC_EXCEPTION) with that message."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    elif not _LEGAL_TOPIC.match(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return
    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
