"""The Produce and Fetch handlers run on the ApiServices they are given, with no broker behind them
(issue 20: handlers decode, call and encode over narrow, typed dependencies): a ReplicaManager over
a real log, a metadata image and its MetadataCache, the config, the clock and the client quotas.
The controller-side and coordinator fields stay None, so a handler that reached for anything else
would fail here."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from types import SimpleNamespace

import pytest

from kcompat.broker.api_services import ApiServices, MetadataCache
from kcompat.broker.context import RequestContext
from kcompat.broker.handlers import fetch, produce
from kcompat.broker.quota.client_quota import QuotaManagers
from kcompat.config import BrokerConfig
from kcompat.isr.partition import AppendPolicy
from kcompat.isr.replica_manager import ReplicaManager
from kcompat.kraft.image import BrokerEndpoint, BrokerImage, MetadataImage, PartitionImage, TopicImage
from kcompat.log import LogConfig, LogManager
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest as FQ
from kcompat.protocol.messages.produce import ProduceRequest as PQ

NOW = 1_700_000_000_000
LISTENER = "PLAINTEXT"


def _broker(node_id: int, port: int, fenced: bool = False) -> BrokerImage:
    return BrokerImage(node_id, 1, uuid.uuid4(), {LISTENER: BrokerEndpoint(LISTENER, "127.0.0.1", port)},
                       fenced=fenced)


@pytest.fixture
def services(tmp_path):
    """Node 1 leads t-0 (hosted); node 2 leads t-1 (not hosted here); node 3 is fenced."""
    logs = LogManager([tmp_path / "d"], lambda topic: LogConfig())
    logs.startup(NOW, "c", 1)
    image = MetadataImage()
    topic = image.topics["t"] = TopicImage("t", uuid.uuid4())
    topic.partitions[0] = PartitionImage(0, [1], [1], 1, 0, 0)
    topic.partitions[1] = PartitionImage(1, [2], [2], 2, 5, 0)
    image.topics_by_id[topic.topic_id] = topic   # (no TopicRecord replayed: filled in directly)
    image.brokers.update({2: _broker(2, 9002), 1: _broker(1, 9001), 3: _broker(3, 9003, fenced=True)})
    metadata = MetadataCache(image)
    rm = ReplicaManager(logs, 1, log_config_for=lambda t: LogConfig(), policy_for=lambda t: AppendPolicy(),
                        now_ms=lambda: NOW, leader_of=metadata.leader_of, topic_exists=lambda t: t in image.topics)
    p = rm.ensure_partition("t", 0, topic.topic_id, 0)
    rm.apply_partition_state(p, leader=1, leader_epoch=0, partition_epoch=0, replicas=[1], isr=[1], now_ms=NOW,
                             min_insync_replicas=1, replica_lag_time_max_ms=30_000)
    config = BrokerConfig({"node.id": "1"})
    yield ApiServices(
        node_id=1, cluster_id="c", config=config, image=image, metadata_cache=metadata, now_ms=lambda: NOW,
        authorizer=None, quotas=QuotaManagers(config.get), describe_topic_configs=None,
        controller_service=None, controller=None, cluster_control=None, quorum=None,
        is_shutting_down=lambda: False, replica_manager=rm)
    logs.shutdown()


def _ctx(services: ApiServices, api_key: int, version: int) -> RequestContext:
    header = SimpleNamespace(client_id="test", request_api_key=api_key)
    return RequestContext(services, None, header, version, LISTENER, request_bytes=100)


def _answer(result):
    """The response, whether the handler answered at once, with a coroutine or with a Completion."""
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(result):
    return await result


def _produce(services, partition: int, values: list[bytes], version: int = 10):
    batch = bytearray(rb.build_batch([(NOW, None, v, ()) for v in values]))   # as the decoder hands it over
    req = PQ(acks=1, timeout_ms=1000, topic_data=[
        PQ.TopicProduceData(name="t", partition_data=[PQ.PartitionProduceData(index=partition, records=batch)])])
    return _answer(produce.handle(_ctx(services, 0, version), req))


def test_produce_then_fetch_through_the_services_alone(services):
    first = _produce(services, 0, [b"a", b"b"])
    second = _produce(services, 0, [b"c"])
    assert [(p.error_code, p.base_offset) for r in (first, second) for p in r.responses[0].partition_responses] \
        == [(0, 0), (0, 2)]

    req = FQ(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        FQ.FetchTopic(topic="t", partitions=[FQ.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])])
    resp = _answer(fetch.handle(_ctx(services, 1, 12), req))
    pd = resp.responses[0].partitions[0]
    assert (pd.error_code, pd.high_watermark, pd.log_start_offset) == (0, 3, 0)
    data = bytes(pd.records)
    values = [r.value for pos, h in rb.iter_batches(data) for r in rb.iter_records(data[pos:])]
    assert values == [b"a", b"b", b"c"]   # the whole first batch: offset 1 is inside it


def test_not_leader_answers_carry_the_metadata_cache_leader(services):
    """Produce v10 to a partition node 2 leads: NOT_LEADER_OR_FOLLOWER with node 2 and its
    endpoint from the image (KIP-951); the fenced node 3 is never listed."""
    resp = _produce(services, 1, [b"x"])
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 5)
    assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [(2, "127.0.0.1", 9002)]


def test_metadata_cache_answers_from_the_live_image(services):
    cache = services.metadata_cache
    assert cache.live_broker_endpoints(LISTENER) == [(1, "127.0.0.1", 9001, None), (2, "127.0.0.1", 9002, None)]
    assert cache.endpoint_of(2, LISTENER) == ("127.0.0.1", 9002)
    assert cache.endpoint_of(3, LISTENER) is None             # fenced
    assert cache.endpoint_of(2, "OTHER") is None
    assert (cache.leader_of("t", 1), cache.leader_of("t", 9), cache.leader_of("u", 0)) == (2, None, None)
    services.image.brokers[3].fenced = False                 # replay updates the image in place
    assert cache.endpoint_of(3, LISTENER) == ("127.0.0.1", 9003)
