"""What the core builds survives the generated codecs at every version a peer may pick."""

from __future__ import annotations

import pytest

from kcompat.kraft.raft import messages as m
from kcompat.kraft.raft.leader import LeaderState
from kcompat.protocol.messages.describe_quorum import DescribeQuorumResponse
from tests.kraft.raft.harness import batch

P = m.Partition("__cluster_metadata")


def round_trip(msg, version):
    out = bytearray()
    msg.write(out, version)
    decoded, end = type(msg).read(memoryview(bytes(out)), 0, version)
    assert end == len(out)
    return decoded


def versions(msg):
    lo, hi = type(msg).VALID_VERSIONS
    return range(lo, hi + 1)


BUILT = [
    m.vote_request(P, "c", 3, 2, 1, 2, 10, pre_vote=False),
    m.vote_request(P, "c", 3, 2, 1, 2, 10, pre_vote=True),
    m.vote_response(P, 0, 2, 3, granted=True),
    m.begin_quorum_epoch_request(P, "c", 2, 3, 1),
    m.begin_quorum_epoch_response(P, 0, 2, 3),
    m.end_quorum_epoch_request(P, "c", 2, 3, [3, 1]),
    m.end_quorum_epoch_response(P, 0, 2, 3),
    m.fetch_snapshot_request(P, "c", 1, 3, (100, 2), 7, 4096),
    m.fetch_snapshot_response(P, 0, 2, 3, (100, 2), 40, 7, b"chunk"),
]


@pytest.mark.parametrize("msg", BUILT, ids=lambda x: type(x).__name__)
def test_round_trip_all_versions(msg):
    if type(msg).__name__ != "EndQuorumEpochRequest":  # its v0-only successor list is not in v1
        assert round_trip(msg, type(msg).VALID_VERSIONS[1]) == msg
    name_attr, index_attr = ("name", "index") if "Snapshot" in type(msg).__name__ else ("topic_name", "partition_index")
    if type(msg).__name__ == "FetchSnapshotRequest":
        index_attr = "partition"
    original = P.single(msg.topics, name_attr, index_attr)
    for v in versions(msg):
        got = P.single(round_trip(msg, v).topics, name_attr, index_attr)
        assert got is not None
        # every field the core reads is in every version
        for field in original.__slots__:
            if field not in ("unknown_tagged_fields", "candidate_directory_id", "voter_directory_id",
                             "replica_directory_id", "preferred_candidates", "preferred_successors"):
                assert getattr(got, field) == getattr(original, field), (v, field)


def test_pre_vote_flag_survives_the_wire():
    req = m.vote_request(P, "c", 3, 2, 1, 2, 10, pre_vote=True)
    for v in versions(req):
        assert m.is_pre_vote(round_trip(req, v).topics[0].partitions[0])
    assert not m.is_pre_vote(round_trip(m.vote_request(P, "c", 3, 2, 1, 2, 10, False), 1)
                             .topics[0].partitions[0])


def test_end_quorum_epoch_successors_in_both_versions():
    req = m.end_quorum_epoch_request(P, "c", 2, 3, [3, 1])
    for v in versions(req):
        assert m.preferred_successors(round_trip(req, v).topics[0].partitions[0]) == [3, 1]


def test_fetch_carries_topic_name_or_id_and_replica_id_by_version():
    req = m.fetch_request(P, "c", 4, 3, 17, 2, 500, 1 << 20)
    for v in (4, 12, 13, 15, 17):
        got = round_trip(req, v)
        part = P.fetch_partition(got.topics)
        assert part is not None and part.fetch_offset == 17
        assert m.fetch_replica_id(got) == 4
        if v >= 12:
            assert part.last_fetched_epoch == 2 and part.current_leader_epoch == 3


def test_fetch_response_fields_by_version():
    records = batch(b"a")
    resp = m.fetch_response(P, 0, 2, 3, high_watermark=9, log_start_offset=4, records=records,
                            diverging=(7, 1))
    for v in (12, 13, 16, 17):
        p = P.fetch_response_partition(round_trip(resp, v).responses)
        assert (p.high_watermark, p.log_start_offset, bytes(p.records)) == (9, 4, records)
        assert (p.diverging_epoch.end_offset, p.diverging_epoch.epoch) == (7, 1)
        assert p.snapshot_id.epoch == -1
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 3)
    snap = m.fetch_response(P, 0, 2, 3, snapshot_id=(50, 2))
    p = P.fetch_response_partition(round_trip(snap, 17).responses)
    assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == (50, 2) and p.diverging_epoch.epoch == -1


def test_describe_quorum_response_all_versions():
    s = LeaderState(1, 4, 0, frozenset({1, 2, 3}), {1, 2}, 2000, 0)
    s.update_local(5)
    s.update_replica(2, 100, 5)
    s.update_replica(7, 100, 3)                     # an observer
    resp = DescribeQuorumResponse(topics=[DescribeQuorumResponse.TopicData(
        topic_name=P.topic, partitions=[s.describe(0, 200)])])
    for v in versions(resp):
        p = round_trip(resp, v).topics[0].partitions[0]
        assert (p.leader_id, p.leader_epoch, p.high_watermark) == (1, 4, 5)
        assert [(r.replica_id, r.log_end_offset) for r in p.current_voters] == [(1, 5), (2, 5), (3, -1)]
        assert [r.replica_id for r in p.observers] == [7]
        if v >= 1:
            assert p.current_voters[1].last_fetch_timestamp == 100
            assert p.current_voters[0].last_caught_up_timestamp == 200
