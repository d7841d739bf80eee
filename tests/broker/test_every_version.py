"""Every version of the admin and data APIs, against a real broker, with a valid request each.

Versions are parametrized over the generated classes' full spec range (``VALID_VERSIONS``); each
case reads the live ApiVersions range: an advertised version must answer successfully and
meaningfully (all error codes 0, the effect visible through a second API), a version outside it
must be refused with UNSUPPORTED_VERSION. So the test follows what the broker advertises. The one
exception is Kafka 4.0's: Produce v0-v2 are advertised and refused (KAFKA-18659).
"""

from __future__ import annotations

import time
import uuid

import pytest

from kcompat.protocol import records
from kcompat.protocol._gen_support import Struct
from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest as CPReq
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTReq
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest as DRReq
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest as DTReq
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest as DCReq
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest as DCfgReq
from kcompat.protocol.messages.fetch import FetchRequest as FReq
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IACReq
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest as LOReq
from kcompat.protocol.messages.metadata import MetadataRequest as MReq
from kcompat.protocol.messages.produce import ProduceRequest as PReq
from kcompat.protocol.primitives import ZERO_UUID
from kcompat.testing import wire

UNSUPPORTED_VERSION, UNKNOWN_TOPIC = 35, 3
TOPIC, BROKER = 2, 4                               # config resource types
SET, DELETE, APPEND = 0, 1, 2                      # IncrementalAlterConfigs operations
TOPIC_CONFIG, DYN_BROKER, DYN_DEFAULT, DEFAULT = 1, 2, 3, 5   # DescribeConfigs config sources
RECS = [(1000, b"k0", b"v0", ()), (3000, b"k1", b"v1", [("h", b"x")]), (2000, None, b"v2", ())]
APIS = [MReq, PReq, FReq, LOReq, CTReq, DTReq, CPReq, DCfgReq, IACReq, DRReq, DCReq]
# advertised for librdkafka's compression check, refused as Kafka 4.0 does (KAFKA-18659)
ADVERTISED_BUT_REFUSED = {(PReq.API_KEY, v) for v in (0, 1, 2)}
CASES = [(c, v) for c in APIS for v in range(c.VALID_VERSIONS[0], c.VALID_VERSIONS[1] + 1)]


class Refused(Exception):
    """The version under test is not advertised and the broker refused it, as it must."""


def error_codes(obj):
    """Every error code anywhere in a decoded response."""
    if isinstance(obj, list):
        return [c for x in obj for c in error_codes(x)]
    if not isinstance(obj, Struct):
        return []
    return [c for s in obj.__slots__ for c in
            ([getattr(obj, s)] if s.endswith("error_code") else error_codes(getattr(obj, s)))]


class Case:
    def __init__(self, env, cls, version):
        self.env, self.cls, self.v = env, cls, version
        lo, hi = env["advertised"][cls.API_KEY]
        self.advertised = lo <= version <= hi and (cls.API_KEY, version) not in ADVERTISED_BUT_REFUSED
        self.sent = False

    def send(self, req):
        """The request under test, at the version under test."""
        assert type(req) is self.cls
        resp = wire.call(self.env["addr"], req, self.v)
        self.sent = True
        if not self.advertised:
            assert UNSUPPORTED_VERSION in error_codes(resp), resp
            raise Refused
        assert set(error_codes(resp)) <= {0}, resp
        return resp


# ---- helpers at fixed (newest) versions, to set up and to verify -----------------------------------

def call_ok(addr, req, version):
    resp = wire.call(addr, req, version)
    assert set(error_codes(resp)) <= {0}, resp
    return resp


def new_topic(addr, tag, partitions=1):
    name = f"ev-{tag}-{uuid.uuid4().hex[:6]}"
    resp = call_ok(addr, CTReq(topics=[CTReq.CreatableTopic(name=name, num_partitions=partitions,
                                                            replication_factor=1)]), 7)
    wait_partitions(addr, name, partitions)
    return name, resp.topics[0].topic_id


def metadata(addr, name):
    req = MReq(topics=[MReq.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False)
    return wire.call(addr, req, 12).topics[0]


def wait_partitions(addr, name, count):
    deadline = time.monotonic() + 10
    while True:
        t = metadata(addr, name)
        if t.error_code == 0 and len(t.partitions) == count and all(p.leader_id >= 0 for p in t.partitions):
            return t
        assert time.monotonic() < deadline, f"{name}: {t}"
        time.sleep(0.05)


def produce_req(name, recs=RECS, topic_id=ZERO_UUID):
    """Topic ``name``, or ``topic_id`` for v13+ (KIP-516; the name is not sent then)."""
    return PReq(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[PReq.TopicProduceData(
        name=name, topic_id=topic_id, partition_data=[PReq.PartitionProduceData(index=0, records=records.build_batch(recs))])])


def produce(addr, name, recs=RECS):
    return call_ok(addr, produce_req(name, recs), 11).responses[0].partition_responses[0]


def list_offsets_req(name, ts):  # one partition entry per request: a partition may appear only once
    return LOReq(replica_id=-1, isolation_level=0, topics=[LOReq.ListOffsetsTopic(name=name, partitions=[
        LOReq.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])


def list_offset(addr, name, ts):
    return call_ok(addr, list_offsets_req(name, ts), 8).topics[0].partitions[0]


def describe(addr, rtype, rname, keys):
    req = DCfgReq(resources=[DCfgReq.DescribeConfigsResource(resource_type=rtype, resource_name=rname,
                                                             configuration_keys=keys)], include_synonyms=True)
    return {c.name: c for c in call_ok(addr, req, 4).results[0].configs}


# ---- one check per API ------------------------------------------------------------------------------

def check_metadata(t, env):
    addr, node = env["addr"], env["node"]
    name, tid = new_topic(addr, f"md{t.v}", partitions=2)
    resp = t.send(MReq(topics=[MReq.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
    assert [(b.node_id, f"{b.host}:{b.port}") for b in resp.brokers] == [(node, addr)]
    if t.v >= 1:
        assert resp.controller_id == node
    if t.v >= 2:
        assert resp.cluster_id == env["cluster_id"]
    [topic] = resp.topics
    assert topic.name == name and not topic.is_internal
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == \
        [(0, node, [node], [node]), (1, node, [node], [node])]
    if t.v >= 7:
        assert all(p.leader_epoch >= 0 for p in topic.partitions)
    if t.v >= 10:
        assert topic.topic_id == tid != ZERO_UUID


def check_produce(t, env):
    addr = env["addr"]
    name, tid = new_topic(addr, f"pr{t.v}")
    for base in (0, 3):
        try:
            [tr] = t.send(produce_req(name, topic_id=tid)).responses
        except Refused:
            assert list_offset(addr, name, -1).offset == 0      # a refused produce appends nothing
            raise
        [pr] = tr.partition_responses
        assert (tr.name, tr.topic_id, pr.index, pr.base_offset) == \
            (("", tid) if t.v >= 13 else (name, ZERO_UUID)) + (0, base)   # ids from v13
        if t.v >= 5:
            assert pr.log_start_offset == 0
    assert list_offset(addr, name, -1).offset == 6


def check_fetch(t, env):
    addr = env["addr"]
    name, tid = new_topic(addr, f"fe{t.v}")
    sent = records.build_batch(RECS)
    assert produce(addr, name).base_offset == 0
    topic = FReq.FetchTopic(topic=name, topic_id=tid, partitions=[FReq.FetchPartition(
        partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20)])
    resp = t.send(FReq(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[topic]))
    [tr] = resp.responses
    assert (tr.topic, tr.topic_id) == (("", tid) if t.v >= 13 else (name, ZERO_UUID))  # ids from v13
    [p] = tr.partitions
    assert (p.partition_index, p.high_watermark, p.last_stable_offset) == (0, 3, 3)
    if t.v >= 5:
        assert p.log_start_offset == 0
    got = bytes(p.records)
    # byte-exact but for partitionLeaderEpoch (bytes 12..16), which the leader stamps
    assert len(got) == len(sent) and got[:12] == sent[:12] and got[16:] == sent[16:]
    assert [(r.offset, r.key, r.value) for r in records.iter_records(got)] == \
        [(i, k, v) for i, (_ts, k, v, _h) in enumerate(RECS)]


def check_list_offsets(t, env):
    addr = env["addr"]
    name, _ = new_topic(addr, f"lo{t.v}")
    produce(addr, name)
    expect = {-1: (3, -1), -2: (0, -1), 2500: (1, 3000), 5000: (-1, -1)}
    if t.v >= 7:
        expect[-3] = (1, 3000)          # KIP-734 max timestamp
    if t.v >= 8:
        expect[-4] = (0, -1)            # KIP-405 earliest local
    if t.v >= 11:
        expect[-6] = (-1, -1)           # KIP-1023 earliest pending upload: not tiered
    for ts, expected in expect.items():
        [tr] = t.send(list_offsets_req(name, ts)).topics
        [p] = tr.partitions
        assert (tr.name, p.partition_index, p.offset, p.timestamp) == (name, 0) + expected, ts


def check_create_topics(t, env):
    addr, name = env["addr"], f"ev-ct{t.v}-{uuid.uuid4().hex[:6]}"
    resp = t.send(CTReq(topics=[CTReq.CreatableTopic(name=name, num_partitions=2, replication_factor=1, configs=[
        CTReq.CreatableTopicConfig(name="cleanup.policy", value="compact")])], timeout_ms=10000))
    [r] = resp.topics
    assert r.name == name
    if t.v >= 5:
        assert (r.num_partitions, r.replication_factor) == (2, 1)
        assert {c.name: c.value for c in r.configs}["cleanup.policy"] == "compact"
    if t.v >= 7:
        assert r.topic_id != ZERO_UUID and r.topic_id == metadata(addr, name).topic_id
    wait_partitions(addr, name, 2)
    assert describe(addr, TOPIC, name, ["cleanup.policy"])["cleanup.policy"].value == "compact"


def check_delete_topics(t, env):
    addr = env["addr"]
    (a, _), (b, b_id) = new_topic(addr, f"dta{t.v}"), new_topic(addr, f"dtb{t.v}")
    if t.v >= 6:  # one by name, one by topic id
        req = DTReq(topics=[DTReq.DeleteTopicState(name=a), DTReq.DeleteTopicState(name=None, topic_id=b_id)])
    else:
        req = DTReq(topic_names=[a, b])
    req.timeout_ms = 10000
    resp = t.send(req)
    assert sorted(r.name for r in resp.responses) == sorted([a, b])
    if t.v >= 6:
        assert {r.name: r.topic_id for r in resp.responses}[b] == b_id
    deadline = time.monotonic() + 10
    while any(metadata(addr, n).error_code != UNKNOWN_TOPIC for n in (a, b)):
        assert time.monotonic() < deadline, "deleted topics still listed"
        time.sleep(0.05)


def check_create_partitions(t, env):
    addr = env["addr"]
    name, _ = new_topic(addr, f"cp{t.v}")
    resp = t.send(CPReq(topics=[CPReq.CreatePartitionsTopic(name=name, count=3, assignments=None)],
                        timeout_ms=10000, validate_only=False))
    assert [r.name for r in resp.results] == [name]
    assert [p.leader_id for p in wait_partitions(addr, name, 3).partitions] == [env["node"]] * 3


def check_describe_configs(t, env):
    addr, node = env["addr"], env["node"]
    name, _ = new_topic(addr, f"dc{t.v}")
    req = DCfgReq(include_synonyms=True, include_documentation=True, resources=[
        DCfgReq.DescribeConfigsResource(resource_type=TOPIC, resource_name=name, configuration_keys=None),
        DCfgReq.DescribeConfigsResource(resource_type=BROKER, resource_name=str(node),
                                        configuration_keys=["log.cleanup.policy", "num.partitions"])])
    topic_res, broker_res = t.send(req).results
    assert (topic_res.resource_type, topic_res.resource_name) == (TOPIC, name)
    assert (broker_res.resource_type, broker_res.resource_name) == (BROKER, str(node))
    tc, bc = {c.name: c for c in topic_res.configs}, {c.name: c for c in broker_res.configs}
    assert {"cleanup.policy", "retention.ms", "segment.bytes", "min.insync.replicas"} <= tc.keys()
    assert sorted(bc) == ["log.cleanup.policy", "num.partitions"]
    assert (tc["cleanup.policy"].value, tc["cleanup.policy"].config_source) == ("delete", DEFAULT)
    assert (tc["retention.ms"].value, bc["num.partitions"].value) == ("604800000", "1")
    assert "log.cleanup.policy" in [s.name for s in tc["cleanup.policy"].synonyms]
    if t.v >= 3:  # KIP-569: type and documentation
        assert (tc["cleanup.policy"].config_type, tc["retention.ms"].config_type) == (7, 5)
        assert tc["cleanup.policy"].documentation and bc["num.partitions"].documentation


def check_incremental_alter_configs(t, env):
    addr, node = env["addr"], env["node"]
    name, _ = new_topic(addr, f"iac{t.v}")
    res = IACReq.AlterConfigsResource
    op = IACReq.AlterableConfig
    t.send(IACReq(resources=[res(resource_type=TOPIC, resource_name=name, configs=[
        op(name="segment.ms", config_operation=SET, value=str(3600000 + t.v)),
        op(name="cleanup.policy", config_operation=APPEND, value="compact")])]))
    cfg = describe(addr, TOPIC, name, ["segment.ms", "cleanup.policy"])
    assert (cfg["segment.ms"].value, cfg["segment.ms"].config_source) == (str(3600000 + t.v), TOPIC_CONFIG)
    assert cfg["cleanup.policy"].value == "delete,compact"
    # a dynamic broker config (cluster-wide mode), per broker and as the cluster default, which the
    # topic (no retention.ms override) inherits; restored after
    for rname, source in ((str(node), DYN_BROKER), ("", DYN_DEFAULT)):
        value = str(86400000 * 30 + t.v)
        try:
            t.send(IACReq(resources=[res(resource_type=BROKER, resource_name=rname, configs=[
                op(name="log.retention.ms", config_operation=SET, value=value)])]))
            c = describe(addr, BROKER, rname, ["log.retention.ms"])["log.retention.ms"]
            assert (c.value, c.config_source) == (value, source)
            c = describe(addr, TOPIC, name, ["retention.ms"])["retention.ms"]
            assert (c.value, c.config_source) == (value, source)
        finally:
            call_ok(addr, IACReq(resources=[res(resource_type=BROKER, resource_name=rname, configs=[
                op(name="log.retention.ms", config_operation=DELETE, value=None)])]), 1)
        c = describe(addr, BROKER, str(node), ["log.retention.ms"])["log.retention.ms"]
        assert c.config_source not in (DYN_BROKER, DYN_DEFAULT), c
        assert describe(addr, TOPIC, name, ["retention.ms"])["retention.ms"].value == "604800000"


def check_delete_records(t, env):
    addr = env["addr"]
    name, _ = new_topic(addr, f"dr{t.v}")
    produce(addr, name, recs=RECS + RECS)
    resp = t.send(DRReq(timeout_ms=10000, topics=[DRReq.DeleteRecordsTopic(name=name, partitions=[
        DRReq.DeleteRecordsPartition(partition_index=0, offset=4)])]))
    [p] = resp.topics[0].partitions
    assert (resp.topics[0].name, p.partition_index, p.low_watermark) == (name, 0, 4)
    assert (list_offset(addr, name, -2).offset, list_offset(addr, name, -1).offset) == (4, 6)


def check_describe_cluster(t, env):
    resp = t.send(DCReq(include_cluster_authorized_operations=False, endpoint_type=1))
    assert (resp.cluster_id, resp.controller_id) == (env["cluster_id"], env["node"])
    assert [(b.broker_id, f"{b.host}:{b.port}") for b in resp.brokers] == [(env["node"], env["addr"])]
    if t.v >= 1:
        assert resp.endpoint_type == 1
    if t.v >= 2:
        assert [b.is_fenced for b in resp.brokers] == [False]     # KIP-1073


CHECKS = {MReq: check_metadata, PReq: check_produce, FReq: check_fetch, LOReq: check_list_offsets,
          CTReq: check_create_topics, DTReq: check_delete_topics, CPReq: check_create_partitions,
          DCfgReq: check_describe_configs, IACReq: check_incremental_alter_configs,
          DRReq: check_delete_records, DCReq: check_describe_cluster}


@pytest.fixture(scope="module")
def env(broker):
    md = wire.call(broker.bootstrap, MReq(topics=[]), 12)
    return {"addr": broker.bootstrap, "node": md.brokers[0].node_id, "cluster_id": md.cluster_id,
            "advertised": {k: (lo, hi) for k, lo, hi in wire.api_versions(broker.bootstrap)}}


def test_advertised_ranges_are_covered(env):
    for cls in APIS:
        lo, hi = env["advertised"][cls.API_KEY]
        assert cls.VALID_VERSIONS[0] <= lo <= hi <= cls.VALID_VERSIONS[1], cls.NAME


@pytest.mark.parametrize("cls,version", CASES, ids=[f"{c.NAME}-v{v}" for c, v in CASES])
def test_every_version(env, cls, version):
    case = Case(env, cls, version)
    try:
        CHECKS[cls](case, env)
    except Refused:
        return
    assert case.sent and case.advertised
