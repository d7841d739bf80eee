"""``controller_mutation_rate`` (KIP-599) and ``request_percentage`` (KIP-124) on a real kcompat
process, on the wire: partitions created or deleted take tokens from a bucket of
``controller.quota.window.num`` x 1 s x the rate; once it is empty, CreateTopics v6+,
CreatePartitions v3+ and DeleteTopics v5+ (strict) refuse the topic with THROTTLING_QUOTA_EXCEEDED
and the time to wait, older versions (permissive) do it and throttle; a client over its share of
request handler time gets its answers with a throttle time of at most one window; other clients
are not affected."""

from __future__ import annotations

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest as PQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CQ
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest as DQ
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from tests.quotas.support import set_quota
from tests.support.broker_process import BrokerProcess

RATE = 2.0   # partitions per second; the bucket holds 11 windows of it: 22


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("mutation-quota") / "data") as b:
        set_quota(b.bootstrap, [("client-id", "mutator")], controller_mutation_rate=RATE)
        set_quota(b.bootstrap, [("user", None), ("client-id", "busy")], request_percentage=0.001)
        yield b


def _call(broker, request, version: int, client_id: str):
    """One request on a fresh connection (a throttled connection is muted for the throttle time)."""
    with wire.connect(broker.bootstrap) as sock:
        wire.send_request(sock, request, version, client_id=client_id)
        return wire.read_response(sock, type(request).API_KEY, version)[1]


def _create(broker, name: str, partitions: int, version: int, client_id: str = "mutator"):
    resp = _call(broker, CQ(topics=[CQ.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                            timeout_ms=30000), version, client_id)
    (t,) = resp.topics
    return t.error_code, t.error_message, resp.throttle_time_ms


def test_mutations_over_the_rate_are_refused_or_throttled(broker):
    assert _create(broker, "m-big", 30, 7) == (ErrorCode.NONE, None, 0)   # within the burst, 8 tokens short now
    code, message, throttle = _create(broker, "m-refused", 1, 7)
    assert (code, message) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
    assert 0 < throttle <= 8 / RATE * 1000
    code, _message, throttle = _create(broker, "m-permissive", 1, 5)   # before v6: done, then throttled
    assert code == ErrorCode.NONE and throttle > 0
    assert _create(broker, "m-other", 3, 7, client_id="someone-else") == (ErrorCode.NONE, None, 0)

    parts = _call(broker, PQ(topics=[PQ.CreatePartitionsTopic(name="m-other", count=5, assignments=None)],
                             timeout_ms=30000), 3, "mutator")
    assert [(r.error_code, r.error_message) for r in parts.results] == \
        [(ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")]
    assert parts.throttle_time_ms > 0
    deleted = _call(broker, DQ(topics=[DQ.DeleteTopicState(name="m-big")], timeout_ms=30000), 6, "mutator")
    assert [(r.name, r.error_code) for r in deleted.responses] == [("m-big", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
    deleted = _call(broker, DQ(topics=[DQ.DeleteTopicState(name="m-big")], timeout_ms=30000), 6, "someone-else")
    assert [(r.name, r.error_code) for r in deleted.responses] == [("m-big", ErrorCode.NONE)]


def test_a_client_over_its_request_percentage_is_throttled_at_most_a_window(broker):
    # the default user (ANONYMOUS here) with client id "busy": 0.001% of one handler thread
    throttles = [_call(broker, MetadataRequest(topics=None), 12, "busy").throttle_time_ms for _ in range(3)]
    assert max(throttles) > 0 and all(0 <= t <= 1000 for t in throttles), throttles   # one window: 1 s
    assert _call(broker, MetadataRequest(topics=None), 12, "idle").throttle_time_ms == 0
