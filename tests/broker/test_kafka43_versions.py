"""The request versions Kafka 4.3.1's clients prefer, on the wire against a real broker: Metadata
v13 (top-level ErrorCode, KIP-1102), Fetch v17/v18 (ReplicaDirectoryId, KIP-853; HighWatermark,
KIP-1166), Produce v12/v13 (KIP-890 part 2: partitions added by the broker; topic ids, KIP-516), ListOffsets v10/v11 (TimeoutMs,
KIP-1075; EARLIEST_PENDING_UPLOAD, KIP-1023), OffsetCommit/OffsetFetch v10 (topic ids, KIP-848),
DescribeGroups v6 (GROUP_ID_NOT_FOUND, KIP-1043), DescribeCluster v2 (fenced brokers, KIP-1073),
with their error cases (unknown topic ids, unknown groups, ...)."""

from __future__ import annotations

import time
import uuid

import pytest

from kcompat.broker.handlers import metadata as metadata_handler
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol import records
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CTReq
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest as DTReq
from kcompat.protocol.messages.describe_cluster import DescribeClusterRequest as DCReq
from kcompat.protocol.messages.describe_groups import DescribeGroupsRequest as DGReq
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsRequest as DTQ
from kcompat.protocol.messages.fetch import FetchRequest as FReq
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest as FCReq
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest as IPReq
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as OCReq
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest as OFReq
from kcompat.protocol.messages.produce import ProduceRequest as PReq
from kcompat.protocol.messages.metadata import MetadataRequest as MReq, MetadataResponse as MResp
from kcompat.protocol.primitives import ZERO_UUID
from kcompat.testing import wire
from tests.support.wire_helpers import produce_batch

RECS = [(1000, b"k0", b"v0", ()), (2000, b"k1", b"v1", ())]


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


# ---- Fetch v17 / v18 --------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [16, 17, 18])
def test_fetch_v17_v18_take_the_raft_fields_and_answer_as_v16(broker, version):
    """ReplicaDirectoryId (v17) and HighWatermark (v18) are raft-only in Kafka: a consumer's fetch
    carrying any values reads the same records, and an unknown topic id is still UNKNOWN_TOPIC_ID."""
    name, tid = new_topic(broker.bootstrap)
    assert produce_batch(broker.bootstrap, name, 0, records.build_batch(RECS)) == 0
    unknown = uuid.uuid4()
    part = dict(partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1 << 20)
    if version >= 17:
        part["replica_directory_id"] = uuid.uuid4()
    if version >= 18:
        part["high_watermark"] = 0            # behind the leader's: no meaning on a broker
    req = FReq(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[
        FReq.FetchTopic(topic_id=tid, partitions=[FReq.FetchPartition(**part)]),
        FReq.FetchTopic(topic_id=unknown, partitions=[FReq.FetchPartition(**part)])])
    resp = wire.call(broker.bootstrap, req, version)
    assert resp.error_code == 0
    by_id = {t.topic_id: t.partitions for t in resp.responses}
    [p] = by_id[tid]
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (0, 2, 0)
    assert [(r.offset, r.value) for r in records.iter_records(bytes(p.records))] == [(0, b"v0"), (1, b"v1")]
    assert [q.error_code for q in by_id[unknown]] == [ErrorCode.UNKNOWN_TOPIC_ID]


# ---- Produce v12 / v13 ------------------------------------------------------------------------------

def produce_req(topics, acks=-1, transactional_id=None):
    """``topics``: [(name, topic id, partition, batch)]."""
    return PReq(transactional_id=transactional_id, acks=acks, timeout_ms=10000, topic_data=[
        PReq.TopicProduceData(name=name, topic_id=tid, partition_data=[PReq.PartitionProduceData(index=p, records=b)])
        for name, tid, p, b in topics])


def log_end(addr, tid):
    req = FReq(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[FReq.FetchTopic(
        topic_id=tid, partitions=[FReq.FetchPartition(partition=0, fetch_offset=0, log_start_offset=-1,
                                                      partition_max_bytes=1)])])
    return wire.call(addr, req, 18).responses[0].partitions[0].high_watermark


def test_produce_v13_names_topics_by_id_and_answers_unknown_ids_per_partition(broker):
    addr = broker.bootstrap
    (a, a_id), (b, b_id) = new_topic(addr), new_topic(addr, partitions=2)
    unknown = uuid.uuid4()
    batch = records.build_batch(RECS)
    resp = wire.call(addr, produce_req([(None, a_id, 0, batch), ("ignored", unknown, 0, batch),
                                        ("", b_id, 1, batch), ("", unknown, 3, batch)]), 13)
    got = {(t.topic_id, p.index): (p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses}
    assert got == {(a_id, 0): (0, 0), (b_id, 1): (0, 0), (unknown, 0): (ErrorCode.UNKNOWN_TOPIC_ID, -1),
                   (unknown, 3): (ErrorCode.UNKNOWN_TOPIC_ID, -1)}
    assert all(t.name == "" for t in resp.responses)            # v13 carries no names
    # the records went to the topics the ids name; an unknown partition of a known id is as before
    assert (log_end(addr, a_id), log_end(addr, b_id)) == (2, 0)
    resp = wire.call(addr, produce_req([("", a_id, 7, batch)]), 13)
    assert [(t.topic_id, [p.error_code for p in t.partition_responses]) for t in resp.responses] == \
        [(a_id, [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])]
    # only unknown ids: nothing appended, each answered
    resp = wire.call(addr, produce_req([("", unknown, 0, batch)]), 13)
    assert [(t.topic_id, [p.error_code for p in t.partition_responses]) for t in resp.responses] == \
        [(unknown, [ErrorCode.UNKNOWN_TOPIC_ID])]


def test_produce_v13_acks_0_with_an_unknown_id_closes_the_connection(broker):
    """As for any failed acks=0 produce: no response, the connection closes so the producer notices."""
    name, tid = new_topic(broker.bootstrap)
    with wire.connect(broker.bootstrap) as sock:
        wire.send_request(sock, produce_req([("", tid, 0, records.build_batch(RECS)),
                                             ("", uuid.uuid4(), 0, records.build_batch(RECS))], acks=0), 13)
        with pytest.raises(ConnectionError):
            wire.read_response(sock, PReq.API_KEY, 13)
    assert log_end(broker.bootstrap, tid) == 2          # the known topic's batch was appended


def test_produce_v12_is_v11_by_name(broker):
    name, tid = new_topic(broker.bootstrap)
    resp = wire.call(broker.bootstrap, produce_req([(name, ZERO_UUID, 0, records.build_batch(RECS))]), 12)
    [t] = resp.responses
    assert (t.name, t.topic_id, [(p.error_code, p.base_offset) for p in t.partition_responses]) == \
        (name, ZERO_UUID, [(0, 0)])


def test_produce_v12_adds_the_partition_to_the_transaction_v11_does_not(broker):
    """KIP-890 part 2, decided by the request version as Kafka 4.3.1 does (a probe of a 4.3.1 node
    answered the same): a v12 transactional batch for a partition the client never added has the
    broker add it to the transaction and is appended; a v11 one fails verification."""
    name, tid = new_topic(broker.bootstrap)
    answers = {}
    for version in (11, 12):
        txn = f"k43-txn-{uuid.uuid4().hex[:6]}"
        init = init_producer_id(broker.bootstrap, txn)
        batch = records.build_batch(RECS, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                    base_sequence=0, transactional=True)
        resp = wire.call(broker.bootstrap, produce_req([(name, ZERO_UUID, 0, batch)], transactional_id=txn), version)
        answers[version] = [p.error_code for t in resp.responses for p in t.partition_responses]
        state = wire.call(broker.bootstrap, DTQ(transactional_ids=[txn]), 0).transaction_states[0]
        answers[version] += [state.transaction_state, [(t.topic, list(t.partitions)) for t in state.topics]]
    assert answers[12] == [0, "Ongoing", [(name, [0])]]
    assert answers[11][0] != 0 and answers[11][1:] == ["Empty", []]
    assert log_end(broker.bootstrap, tid) == len(RECS)   # only the v12 batch


def init_producer_id(addr, txn):
    """InitProducerId for ``txn`` once the transaction coordinator is loaded (the first
    FindCoordinator creates ``__transaction_state``: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
    until then)."""
    deadline = time.monotonic() + 30
    while True:
        wire.call(addr, FCReq(key_type=1, coordinator_keys=[txn]), 4)
        init = wire.call(addr, IPReq(transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1,
                                     producer_epoch=-1), 4)
        if init.error_code == 0:
            return init
        assert init.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                   ErrorCode.COORDINATOR_NOT_AVAILABLE) and time.monotonic() < deadline, init
        time.sleep(0.1)


def new_topic_id(addr, name):
    return metadata(addr, [MReq.MetadataRequestTopic(name=name)]).topics[0].topic_id


# ---- OffsetCommit v10 / OffsetFetch v10 --------------------------------------------------------------

def commit(addr, group, topics, version=10):
    """``topics``: [(name, topic id, {partition: offset})] committed outside any generation."""
    req = OCReq(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OCReq.OffsetCommitRequestTopic(name=name, topic_id=tid, partitions=[
            OCReq.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="m%d" % o)
            for p, o in offsets.items()]) for name, tid, offsets in topics])
    deadline = time.monotonic() + 30
    while True:   # the first group request creates __consumer_offsets
        resp = wire.call(addr, req, version)
        codes = {p.error_code for t in resp.topics for p in t.partitions}
        if not codes & {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE} or time.monotonic() > deadline:
            return resp
        wire.call(addr, FCReq(key_type=0, coordinator_keys=[group]), 4)
        time.sleep(0.1)


def fetch_offsets(addr, group, topics, version=10):
    """``topics``: None (all) or [(name, topic id, [partitions])]; the one group's response."""
    asked = None if topics is None else [OFReq.OffsetFetchRequestTopics(name=n, topic_id=tid, partition_indexes=ps)
                                         for n, tid, ps in topics]
    resp = wire.call(addr, OFReq(groups=[OFReq.OffsetFetchRequestGroup(group_id=group, topics=asked)]), version)
    [g] = resp.groups
    assert g.error_code == 0, g
    return g


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker):
    addr = broker.bootstrap
    (a, a_id), (b, b_id) = new_topic(addr, partitions=2), new_topic(addr)
    group, unknown = f"k43-g-{uuid.uuid4().hex[:6]}", uuid.uuid4()
    resp = commit(addr, group, [("", a_id, {0: 5, 1: 7}), ("", unknown, {0: 1}), ("", b_id, {0: 3})])
    assert {(t.topic_id, p.partition_index): p.error_code for t in resp.topics for p in t.partitions} == \
        {(a_id, 0): 0, (a_id, 1): 0, (b_id, 0): 0, (unknown, 0): ErrorCode.UNKNOWN_TOPIC_ID}
    # stored by name: an OffsetFetch v9 by name sees them
    g9 = fetch_offsets(addr, group, [(a, ZERO_UUID, [0, 1]), (b, ZERO_UUID, [0])], version=9)
    assert {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in g9.topics for p in t.partitions} == \
        {(a, 0): (5, "m5"), (a, 1): (7, "m7"), (b, 0): (3, "m3")}
    # v10 by id, with an unknown id
    g = fetch_offsets(addr, group, [("", a_id, [0, 1]), ("", unknown, [2]), ("", b_id, [0])])
    assert {(t.topic_id, p.partition_index): (p.error_code, p.committed_offset) for t in g.topics
            for p in t.partitions} == {(a_id, 0): (0, 5), (a_id, 1): (0, 7), (b_id, 0): (0, 3),
                                       (unknown, 2): (ErrorCode.UNKNOWN_TOPIC_ID, -1)}
    # v10, all topics: each with its id
    g = fetch_offsets(addr, group, None)
    assert {(t.topic_id, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions} == \
        {(a_id, 0): 5, (a_id, 1): 7, (b_id, 0): 3}


def test_offset_fetch_v10_all_topics_leaves_out_deleted_topics(broker):
    """Kafka 4.3.1's ``fetchAllOffsetsForGroup`` keeps only the topics that have an id."""
    addr = broker.bootstrap
    (a, a_id), (b, b_id) = new_topic(addr), new_topic(addr)
    group = f"k43-g-{uuid.uuid4().hex[:6]}"
    commit(addr, group, [(a, ZERO_UUID, {0: 4}), (b, ZERO_UUID, {0: 2})], version=9)
    resp = wire.call(addr, DTReq(topic_names=[b], timeout_ms=10000), 5)
    assert [r.error_code for r in resp.responses] == [0]
    g9 = fetch_offsets(addr, group, None, version=9)
    g10 = fetch_offsets(addr, group, None)
    assert [t.topic_id for t in g10.topics] == [a_id]
    assert [(t.name, t.topic_id) for t in g9.topics if t.name == a] == [(a, ZERO_UUID)]


# ---- DescribeGroups v6 / DescribeCluster v2 ----------------------------------------------------------

def test_describe_groups_v6_answers_group_id_not_found_for_an_unknown_group(broker):
    """KIP-1043 (Kafka 4.3.1's ``GroupMetadataManager.describeGroups``): v6 says GROUP_ID_NOT_FOUND
    with the exception's message where v5 describes a Dead group without error."""
    addr = broker.bootstrap
    name, tid = new_topic(addr)
    known, unknown = f"k43-dg-{uuid.uuid4().hex[:6]}", f"k43-dg-{uuid.uuid4().hex[:6]}"
    commit(addr, known, [(name, ZERO_UUID, {0: 1})], version=9)         # an Empty classic group
    req = DGReq(groups=[known, unknown], include_authorized_operations=True)
    v5 = {g.group_id: (g.error_code, g.group_state) for g in wire.call(addr, req, 5).groups}
    assert v5 == {known: (0, "Empty"), unknown: (0, "Dead")}
    v6 = {g.group_id: g for g in wire.call(addr, req, 6).groups}
    assert (v6[known].error_code, v6[known].group_state, v6[known].error_message) == (0, "Empty", None)
    g = v6[unknown]
    assert (g.error_code, g.group_state, g.error_message, g.authorized_operations) == \
        (ErrorCode.GROUP_ID_NOT_FOUND, "Dead", f"Group {unknown} not found.", -2147483648)


def test_describe_cluster_v2_says_each_broker_is_not_fenced(broker):
    """KIP-1073: ``is_fenced`` per broker; with ``include_fenced_brokers`` the fenced ones too
    (none on a single live node: tests/cluster/test_describe_cluster_fenced.py has a fenced one)."""
    for include in (False, True):
        resp = wire.call(broker.bootstrap, DCReq(endpoint_type=1, include_fenced_brokers=include), 2)
        assert resp.error_code == 0
        assert [(b.broker_id, f"{b.host}:{b.port}", b.is_fenced) for b in resp.brokers] == \
            [(resp.controller_id, broker.bootstrap, False)]


def test_advertised_versions(broker):
    advertised = {k: (lo, hi) for k, lo, hi in wire.api_versions(broker.bootstrap)}
    assert [advertised[k] for k in (3, 1, 0, 2, 8, 9, 15, 60)] == \
        [(0, 13), (4, 18), (0, 13), (1, 11), (0, 10), (0, 10), (0, 6), (0, 2)]
