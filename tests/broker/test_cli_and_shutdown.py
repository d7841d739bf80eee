"""The command line and process lifecycle: config errors, SIGTERM, restart semantics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kcompat.protocol import records as rb
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.produce import ProduceRequest
from tests.support.broker_process import ROOT, BrokerProcess
from kcompat.testing import wire


def _run_cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kcompat", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(ROOT))


def test_unknown_config_key_exits_2_naming_the_key(tmp_path):
    r = _run_cli("serve", "--override", "log.dirs=" + str(tmp_path), "--override", "no.such.key=1")
    assert r.returncode == 2
    assert "no.such.key" in r.stderr


def test_invalid_config_value_exits_2_naming_the_key(tmp_path):
    r = _run_cli("serve", "--override", "log.dirs=" + str(tmp_path), "--override", "num.partitions=zero")
    assert r.returncode == 2
    assert "num.partitions" in r.stderr


def test_config_file_and_override(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a Kafka-style file\nnum.partitions=3\nlog.dirs=%s\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                     % (tmp_path / "data"))
    b = BrokerProcess(tmp_path / "data")
    b.args = lambda: [sys.executable, "-m", "kcompat", "serve", "--config", str(props),
                      "--override", "num.partitions=2"]
    with b:
        md = wire.call(b.bootstrap, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                                                    allow_auto_topic_creation=True), 12)
        assert [t.name for t in md.topics] == ["auto"]
        assert len(md.topics[0].partitions) == 2  # the override beats the file


def _produce(bootstrap: str, topic: str, batch: bytes, acks: int = -1):
    req = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    resp = wire.call(bootstrap, req, 9)
    return resp.responses[0].partition_responses[0]


def test_sigterm_answers_in_flight_long_poll_and_shuts_down_cleanly(fresh_broker):
    b = fresh_broker
    first = _produce(b.bootstrap, "shutdown-topic", rb.build_batch([(1000, b"k", b"v", ())]))
    assert first.error_code == 0
    result = {}

    def long_poll():
        req = FetchRequest(max_wait_ms=20000, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                           session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="shutdown-topic", partitions=[
                               FetchRequest.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20,
                                                           log_start_offset=-1, current_leader_epoch=-1)])])
        with wire.connect(b.bootstrap, timeout=30) as sock:
            wire.send_request(sock, req, 11)
            t0 = time.time()
            result["resp"] = wire.read_response(sock, 1, 11)[1]
            result["elapsed"] = time.time() - t0

    t = threading.Thread(target=long_poll)
    t.start()
    time.sleep(1.0)  # the fetch is now parked waiting for data
    rc = b.stop()
    t.join(30)
    assert rc == 0
    assert "resp" in result, "the in-flight fetch got no response before shutdown"
    assert result["elapsed"] < 15  # answered at shutdown, not at max_wait_ms
    assert result["resp"].responses[0].partitions[0].error_code == 0
    assert (b.data_dir / ".kafka_cleanshutdown").exists()
    assert "shutdown complete" in b.log_text()
    snapshots = list((b.data_dir / "shutdown-topic-0").glob("*.snapshot"))
    assert snapshots, "clean shutdown writes a producer snapshot"


def test_idempotent_retry_after_restart_is_deduplicated(fresh_broker):
    """Producer state is rebuilt after a restart (snapshot + log), so a retry of the last batch
    still gets its original offset instead of being written twice — after a clean restart and
    after kill -9."""
    b = fresh_broker
    pid_resp = wire.call(b.bootstrap, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                            producer_id=-1, producer_epoch=-1), 4)
    pid = pid_resp.producer_id
    now = int(time.time() * 1000)  # producer ids expire by their batches' timestamps, as in Kafka
    batches = [rb.build_batch([(now + i, None, b"v%d" % i, ())], producer_id=pid, producer_epoch=0,
                              base_sequence=i) for i in range(3)]
    offsets = [_produce(b.bootstrap, "dedup", x).base_offset for x in batches]
    assert offsets == [0, 1, 2]
    for restart in (b.restart, lambda: (b.kill9(), b.start())):
        restart()
        again = _produce(b.bootstrap, "dedup", batches[2])
        assert again.error_code == 0
        assert again.base_offset == 2
    nxt = rb.build_batch([(now + 3, None, b"v3", ())], producer_id=pid, producer_epoch=0, base_sequence=3)
    assert _produce(b.bootstrap, "dedup", nxt).base_offset == 3
    gap = rb.build_batch([(now + 9, None, b"v9", ())], producer_id=pid, producer_epoch=0, base_sequence=9)
    assert _produce(b.bootstrap, "dedup", gap).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    # new producer ids are never reused across restarts
    later = wire.call(b.bootstrap, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                         producer_id=-1, producer_epoch=-1), 4).producer_id
    assert later > pid


def test_start_up_lines_tell_new_clean_and_crashed_data_dirs_apart(tmp_path):
    """A new data dir is not an unclean shutdown; after SIGTERM the metadata log is trusted like
    every partition (no recovery); after kill -9 it is recovered."""
    b = BrokerProcess(tmp_path / "data")
    metadata_recovery = "__cluster_metadata-0: unclean shutdown; recovering"
    b.start()
    first = b.log_text()
    assert "log dir" in first and "new, formatted for cluster" in first
    assert "unclean" not in first
    b.stop()
    seen = len(b.log_text())
    b.start()
    second = b.log_text()[seen:]
    assert "clean shutdown, 0 partition(s)" in second and "unclean" not in second
    b.kill9()
    seen = len(b.log_text())
    b.start()
    third = b.log_text()[seen:]
    assert "unclean shutdown" in third and metadata_recovery in third
    b.stop()
