"""Tiered storage end to end on one kcompat process with the local filesystem backend (KIP-405):
closed segments are copied once each, local disk shrinks to the tail, every record stays
readable from offset 0 by real clients."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.tiered.metadata import SegmentState
from tests.support.broker_process import BrokerProcess, wait_for
from tests.tiered.helpers import TIERED_BROKER, TIERED_TOPIC, local_log_bytes, remote_objects

RECORDS = 20_000
VALUE = 1000     # ~20 MB


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiered")
    remote = root / "remote"
    broker = BrokerProcess(root / "data", {**TIERED_BROKER, "rsm.config.dir": str(remote)}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("tiered", 1, 1, config=TIERED_TOPIC)])["tiered"].result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 64 * 1024})
        for i in range(RECORDS):
            p.produce("tiered", key=b"%d" % i, value=(b"%08d" % i) * (VALUE // 8))
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        yield broker, root / "data" / "tiered-0", remote
    finally:
        broker.stop()


def test_segments_are_copied_once_and_local_disk_shrinks(tiered):
    broker, local_dir, remote = tiered
    # every closed segment but the last few ends up remote; the local log keeps only its tail
    wait_for(lambda: local_log_bytes(local_dir) < 3 * 1024 * 1024 and remote_objects(remote, "log"), timeout=90)
    logs = remote_objects(remote, "log")
    starts = sorted(int(p.name.split("-")[0]) for p in logs)
    assert starts[0] == 0
    assert len(starts) == len(set(starts)), "a segment was copied twice"
    for suffix in ("index", "timeindex", "snapshot", "leader-epoch-checkpoint"):
        assert len(remote_objects(remote, suffix)) == len(logs)
    assert not list(remote.rglob("*.tmp"))
    local_bases = sorted(int(f.name[:20]) for f in local_dir.glob("*.log"))
    assert local_bases[0] > 0 and local_bases[0] <= starts[-1] + 1 or local_bases[0] in starts
