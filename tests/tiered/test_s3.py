"""Tiered storage on an S3-compatible store (moto_server, started here on 127.0.0.1): segments
are copied to the bucket, consumers read every record from offset 0; while the store is
unreachable produce and local fetch go on, the copier backs off, a remote fetch answers Kafka's
error (UNKNOWN_SERVER_ERROR), and everything catches up once the store is back."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import boto3
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from tests.support.broker_process import BrokerProcess, wait_for
from tests.tiered.helpers import (
    TIERED_BROKER, RawProxy, complete_segments_have_companions, consume_from_zero, local_log_bytes,
)

BUCKET = "kcompat-tiered"
VALUE = 4000
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": str(1024 * 1024),
                "local.retention.bytes": str(2 * 1024 * 1024), "file.delete.delay.ms": "0"}


def _value(i: int) -> bytes:
    return (b"%08d" % i) * (VALUE // 8)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    port = free_ports(1)[0]
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            urllib.request.urlopen(endpoint + "/", timeout=1)
            return True
        except OSError:
            return False
    try:
        wait_for(up, timeout=60, what="moto_server")
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                              region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        proxy = RawProxy(("127.0.0.1", port))
        yield client, proxy
        proxy.stop()
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def _objects(client, suffix: str) -> list[str]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith("." + suffix if suffix else "")]
    return keys


def _produce(bootstrap: str, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + n):
        p.produce("s3t", value=_value(i))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def _consume_all(bootstrap: str, n: int) -> None:
    consume_from_zero(bootstrap, "s3t", n, _value)


def _fetch_at(bootstrap: str, offset: int):
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="s3t", partitions=[
                           FetchRequest.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                                       log_start_offset=-1, partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    return wire.call(bootstrap, req, 12).responses[0].partitions[0]


def test_s3_backend_copies_serves_and_survives_an_outage(s3, tmp_path):
    client, proxy = s3
    overrides = {**TIERED_BROKER, "remote.log.storage.manager.class.name": "s3",
                 "rsm.config.s3.bucket": BUCKET, "rsm.config.s3.endpoint.url": f"http://127.0.0.1:{proxy.port}",
                 "rsm.config.s3.access.key.id": "test", "rsm.config.s3.secret.access.key": "test",
                 "remote.fetch.max.wait.ms": "10000"}
    broker = BrokerProcess(tmp_path / "data", overrides).start()
    local_dir = tmp_path / "data" / "s3t-0"
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("s3t", 1, 1, config=TOPIC_CONFIG)])["s3t"].result(30)
        _produce(broker.bootstrap, 0, 3000)                     # ~12 MB, ~12 segments
        wait_for(lambda: len(_objects(client, "log")) >= 8 and local_log_bytes(local_dir) < 3 * 1024 * 1024, timeout=90)
        assert min(int(f.name[:20]) for f in local_dir.glob("*.log")) > 0
        logs = _objects(client, "log")
        assert len({k.rsplit("/", 1)[1].split("-")[0] for k in logs}) == len(logs)   # each segment once
        assert complete_segments_have_companions(_objects(client, ""))
        _consume_all(broker.bootstrap, 3000)

        # the store goes away: local produce and fetch are unaffected, remote fetches fail
        mark = len(broker.log_text())   # only failures from here on are the outage's
        proxy.refuse()
        copied = len(logs)
        _produce(broker.bootstrap, 3000, 1000)
        last = _fetch_at(broker.bootstrap, 3999)
        assert last.error_code == ErrorCode.NONE and last.records
        assert _fetch_at(broker.bootstrap, 0).error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        wait_for(lambda: "remote log task failed (attempt 2" in broker.log_text()[mark:], timeout=60)
        # the store is back: the copier catches up and old offsets are readable again
        proxy.forward()
        wait_for(lambda: len(_objects(client, "log")) > copied + 2, timeout=60)
        first = _fetch_at(broker.bootstrap, 0)
        assert first.error_code == ErrorCode.NONE and first.records
        _consume_all(broker.bootstrap, 4000)
    finally:
        broker.stop()
