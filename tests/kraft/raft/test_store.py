"""The quorum-state file in Kafka's format (FileQuorumStateStore)."""

from __future__ import annotations

import json
import random

from kcompat.kraft.raft import ElectionState, FileQuorumStateStore, MemoryRaftLog, RaftClient, RaftConfig, Role
from kcompat.kraft.raft.store import decode_json, encode_json

VOTERS = frozenset({1, 2, 3})


def test_version_0_json_is_kafkas():
    line = encode_json(ElectionState(epoch=2, leader_id=1, voted_id=-1, voters=VOTERS), version=0)
    assert line == ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
                    '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')
    assert decode_json(line) == ElectionState(2, 1, -1, VOTERS)


def test_reads_kafka_written_files_of_both_versions():
    v0 = ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
          '"currentVoters":[],"data_version":0}')
    assert decode_json(v0) == ElectionState(2, 1, -1, frozenset())
    v1 = '{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'
    assert decode_json(v1) == ElectionState(2, -1, 1, frozenset())
    assert json.loads(encode_json(ElectionState(2, -1, 1), version=1))["votedDirectoryId"] == "AAAAAAAAAAAAAAAAAAAAAA"


def test_file_store_round_trip_is_atomic(tmp_path):
    store = FileQuorumStateStore(tmp_path / "quorum-state")
    assert store.read() is None
    store.write(ElectionState(5, -1, 2, VOTERS))
    store.write(ElectionState(6, 3, -1, VOTERS))
    assert store.read() == ElectionState(6, 3, -1, VOTERS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]
    assert (tmp_path / "quorum-state").read_text().endswith('"data_version":0}')


def test_core_restarts_from_the_file(tmp_path):
    store = FileQuorumStateStore(tmp_path / "quorum-state")
    store.write(ElectionState(7, 1, 1, VOTERS))            # it led epoch 7
    cfg = RaftConfig(node_id=1, voters=VOTERS, cluster_id="c")
    c = RaftClient(cfg, MemoryRaftLog(), store, random.Random(0), 0)
    assert c.role is Role.RESIGNED and c.epoch == 7
