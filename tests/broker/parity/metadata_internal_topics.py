"""Metadata and the internal topics side by side with Apache Kafka 4.3.1 (KafkaApis.getTopicMetadata,
AutoTopicCreationManager): a missing internal topic is answered flagged internal; with
``allow_auto_topic_creation`` (and the broker's ``auto.create.topics.enable``) it is created as its
coordinator creates it, with its own partition count and configs, not the broker's topic defaults.
Kafka 4.3.1 answers UNKNOWN_TOPIC_OR_PARTITION while it creates the topic and kcompat answers once
it has, so the scenario asks until the topics are there. Also CreatePartitions of a missing topic:
UNKNOWN_TOPIC_OR_PARTITION without a message, and a JoinGroup before ``__consumer_offsets`` exists:
NOT_COORDINATOR without the member id."""

from __future__ import annotations

import time

from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest as CP
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DC
from kcompat.protocol.messages.join_group import JoinGroupRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire

OFFSETS, TXN, SHARE = "__consumer_offsets", "__transaction_state", "__share_group_state"


def _metadata(bootstrap: str, names: list[str], auto: bool) -> list[tuple]:
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                          allow_auto_topic_creation=auto, include_topic_authorized_operations=False)
    return sorted((t.name, t.error_code, t.is_internal, len(t.partitions)) for t in wire.call(bootstrap, req, 12).topics)


def _configs(bootstrap: str, topic: str, keys: list[str]) -> dict[str, str]:
    req = DC(resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=keys)],
             include_synonyms=False, include_documentation=False)
    return {c.name: c.value for c in wire.call(bootstrap, req, 4).results[0].configs}


def _join_before_offsets_topic(bootstrap: str) -> tuple[int, str]:
    """A classic JoinGroup with a member id before __consumer_offsets exists: (error, member id)."""
    req = JoinGroupRequest(group_id="early", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="m1",
                           group_instance_id=None, protocol_type="consumer", protocols=[
                               JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")], reason=None)
    resp = wire.call(bootstrap, req, 9)
    return resp.error_code, resp.member_id


def scenario(bootstrap: str) -> dict:
    out = {"join before the offsets topic": _join_before_offsets_topic(bootstrap),
           "missing, no auto-creation": _metadata(bootstrap, [SHARE], auto=False)}
    deadline = time.monotonic() + 60
    while True:
        got = _metadata(bootstrap, [OFFSETS, TXN], auto=True)
        if all(error == 0 for _, error, _, _ in got):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the internal topics were not auto-created: {got}")
        time.sleep(0.2)
    out["auto-created"] = got
    keys = ["cleanup.policy", "compression.type", "segment.bytes"]
    out["configs"] = {t: _configs(bootstrap, t, keys) for t in (OFFSETS, TXN)}
    cp = wire.call(bootstrap, CP(topics=[CP.CreatePartitionsTopic(name="nope", count=3, assignments=None)],
                                 timeout_ms=5000, validate_only=False), 3).results[0]
    out["create partitions of a missing topic"] = (cp.error_code, cp.error_message)
    return out


def check(ours, theirs) -> None:
    """Kafka 4.3.1's answers are the expected ones and kcompat's the same."""
    assert theirs["join before the offsets topic"] == (16, "")   # NOT_COORDINATOR, no member id
    assert theirs["missing, no auto-creation"] == [(SHARE, 3, True, 0)]
    assert theirs["auto-created"] == [(OFFSETS, 0, True, 50), (TXN, 0, True, 50)]
    assert theirs["configs"][OFFSETS]["cleanup.policy"] == "compact"
    assert ours == theirs
