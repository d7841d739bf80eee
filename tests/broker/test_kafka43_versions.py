"""The request versions Kafka 4.3.1's clients prefer, on the wire against a real broker: Metadata
v13 (top-level ErrorCode, KIP-1102), Fetch v17/v18 (ReplicaDirectoryId, KIP-853; HighWatermark,
KIP-1166), Produce v12/v13 (KIP-890 part 2 off; topic ids, KIP-516), ListOffsets v10/v11 (TimeoutMs,
KIP-1075; EARLIEST_PENDING_UPLOAD, KIP-1023), OffsetCommit/OffsetFetch v10 (topic ids, KIP-848),
with their error cases (unknown topic ids, ...)."""

from __future__ import annotations

import uuid

import pytest

from kcompat.broker.handlers import metadata as metadata_handler
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTReq
from kcompat.protocol.messages.metadata import MetadataRequest as MReq, MetadataResponse as MResp
from kcompat.protocol.primitives import ZERO_UUID
from kcompat.testing import wire


def new_topic(addr, partitions=1):
    """A fresh topic: (name, topic id), once every partition has a leader."""
    name = f"k43-{uuid.uuid4().hex[:8]}"
    resp = wire.call(addr, CTReq(topics=[CTReq.CreatableTopic(name=name, num_partitions=partitions,
                                                              replication_factor=1)], timeout_ms=10000), 7)
    assert resp.topics[0].error_code == 0, resp
    return name, resp.topics[0].topic_id


def metadata(addr, topics, version=13):
    return wire.call(addr, MReq(topics=topics, allow_auto_topic_creation=False), version)


# ---- Metadata v13 -----------------------------------------------------------------------------------

def test_metadata_v13_answers_with_a_top_level_error_code_of_zero(broker):
    name, tid = new_topic(broker.bootstrap)
    resp = metadata(broker.bootstrap, [MReq.MetadataRequestTopic(name=name)])
    assert resp.error_code == 0
    [t] = resp.topics
    assert (t.error_code, t.name, t.topic_id, [p.partition_index for p in t.partitions]) == (0, name, tid, [0])
    unknown = uuid.uuid4()
    resp = metadata(broker.bootstrap, [MReq.MetadataRequestTopic(name=None, topic_id=unknown)])
    assert resp.error_code == 0                        # per-topic errors stay per topic
    assert [(t.error_code, t.topic_id) for t in resp.topics] == [(ErrorCode.UNKNOWN_TOPIC_ID, unknown)]


def test_metadata_error_response_carries_the_code_at_the_top_from_v13():
    """Kafka's ``MetadataRequest.getErrorResponse`` sets every topic's and (v13) the top-level code."""
    tid = uuid.uuid4()
    req = MReq(topics=[MReq.MetadataRequestTopic(name="a"), MReq.MetadataRequestTopic(name=None, topic_id=tid)])
    for version, top in ((12, 0), (13, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)):
        out = bytearray()
        metadata_handler.error_response(req, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED).write(out, version)
        resp, _ = MResp.read(memoryview(bytes(out)), 0, version)
        assert resp.error_code == top
        assert [(t.name, t.topic_id, t.error_code) for t in resp.topics] == \
            [("a", ZERO_UUID, ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("", tid, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]


def test_advertised_versions(broker):
    advertised = {k: (lo, hi) for k, lo, hi in wire.api_versions(broker.bootstrap)}
    assert advertised[3] == (0, 13)
