"""Idempotent producers through a faulty network: no loss, no duplicates, order kept.

Real clients (kafka-python with its default settings: idempotence on, acks=all; confluent-kafka
with ``enable.idempotence=true``) produce N sequential values to a multi-partition topic through
a TCP proxy that at random drops connections before a request reaches the broker and swallows
responses after the broker executed the request (then closes), so the producers retry batches the
broker already wrote. The broker must recognise those retries (KIP-98 producer state) and answer
with the original offsets instead of writing them twice.

Afterwards the partitions are read with plain Fetch requests straight from the broker (not through
the proxy): every acknowledged value is there exactly once, at the offset its acknowledgement
named, and values increase within each partition.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import pytest

from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from tests.robustness.util import batch, create_topic, produce_request, read_records
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess
from tests.support.tcp_proxy import Faults, TcpProxy

N = 3000
PARTITIONS = 4
PRODUCE_KEY = 0

FAULTS = Faults(drop_request=0.01, swallow_response=0.06, max_faults=80)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """(broker, proxy): the broker advertises the proxy, so clients only ever talk through it."""
    proxy = TcpProxy(seed=20240611).start()
    data = tmp_path_factory.mktemp("idem") / "data"
    broker = BrokerProcess(data, overrides={
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
        "num.partitions": str(PARTITIONS),
    })
    try:
        broker.start()
        proxy.upstream = broker.bootstrap
        yield broker, proxy
    finally:
        proxy.stop()
        if broker.proc is not None:
            try:
                broker.stop()
            except Exception:
                broker.kill9()


def value(i: int) -> bytes:
    return b"v%07d" % i


def check_partitions(broker, topic: str, acked: dict[bytes, tuple[int, int]]) -> None:
    """Every acked value stored exactly once, at its acked offset, increasing per partition."""
    assert len(acked) == N, f"only {len(acked)} of {N} records were acknowledged"
    seen: dict[bytes, tuple[int, int]] = {}
    for p in range(PARTITIONS):
        recs = read_records(broker.bootstrap, topic, p)
        values = [v for _off, _k, v in recs]
        dups = sorted({v for v in values if values.count(v) > 1}) if len(set(values)) != len(values) else []
        assert not dups, f"partition {p} holds duplicates: {dups[:10]}"
        assert values == sorted(values), f"partition {p} is out of order"
        offsets = [off for off, _k, _v in recs]
        assert offsets == list(range(len(offsets))), f"partition {p} has offset gaps"
        for off, _k, v in recs:
            assert v not in seen, f"{v!r} stored in partitions {seen[v][0]} and {p}"
            seen[v] = (p, off)
    assert set(seen) == set(acked), (
        f"missing: {sorted(set(acked) - set(seen))[:10]}, unexpected: {sorted(set(seen) - set(acked))[:10]}")
    wrong = [(v, acked[v], seen[v]) for v in acked if acked[v] != seen[v]]
    assert not wrong, f"acknowledged (partition, offset) differs from where the value is stored: {wrong[:10]}"


def assert_faults_hit_produce(proxy: TcpProxy, before: int) -> None:
    swallowed = proxy.stats.swallowed_by_api.get(PRODUCE_KEY, 0) - before
    assert swallowed >= 3, (f"only {swallowed} produce responses were swallowed; the test did not exercise "
                            f"retries of written batches ({proxy.stats})")


def test_kafka_python_default_idempotent_producer_through_faults(proxied):
    from kafka import KafkaProducer

    broker, proxy = proxied
    topic = "idem-kafka-python"
    swallowed_before = proxy.stats.swallowed_by_api.get(PRODUCE_KEY, 0)
    proxy.set_faults(replace(FAULTS, max_faults=proxy.stats.faults + FAULTS.max_faults))
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="idem-kp",
                             # retries are infinite by default; keep reconnects quick and the
                             # delivery timeout far above what the faults cost
                             reconnect_backoff_ms=20, reconnect_backoff_max_ms=300, retry_backoff_ms=20,
                             delivery_timeout_ms=170000, request_timeout_ms=15000, max_block_ms=60000,
                             # small batches: hundreds of produce requests for the faults to hit
                             batch_size=128)
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list = []
    lock = threading.Lock()
    try:
        assert producer.config["enable_idempotence"] is True and producer.config["acks"] in (-1, "all")

        def ok(v):
            def cb(md):
                with lock:
                    acked[v] = (md.partition, md.offset)
            return cb

        def err(v):
            return lambda e: errors.append((v, e))

        for i in range(N):
            v = value(i)
            producer.send(topic, value=v, partition=i % PARTITIONS).add_callback(ok(v)).add_errback(err(v))
        producer.flush(timeout=150)
    finally:
        proxy.clear_faults()
        producer.close(timeout=10)
    assert not errors, f"{len(errors)} records failed: {errors[:5]}"
    assert_faults_hit_produce(proxy, swallowed_before)
    check_partitions(broker, topic, acked)


def test_confluent_kafka_idempotent_producer_through_faults(proxied):
    from confluent_kafka import Producer

    broker, proxy = proxied
    topic = "idem-confluent"
    swallowed_before = proxy.stats.swallowed_by_api.get(PRODUCE_KEY, 0)
    proxy.set_faults(replace(FAULTS, max_faults=proxy.stats.faults + FAULTS.max_faults))
    quiet = logging.getLogger("test.rdkafka")
    quiet.setLevel(logging.CRITICAL)
    producer = Producer({
        "bootstrap.servers": proxy.bootstrap,
        "client.id": "idem-ck",
        "enable.idempotence": True,
        "message.timeout.ms": 170000,
        "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 200,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 300,
        "linger.ms": 2,
        "batch.num.messages": 4,  # hundreds of produce requests for the faults to hit
        "topic.metadata.refresh.interval.ms": 1000,
    }, logger=quiet)
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list = []

    def report(err, msg):
        if err is not None:
            errors.append((msg.value(), err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    try:
        for i in range(N):
            while True:
                try:
                    producer.produce(topic, value=value(i), partition=i % PARTITIONS, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        deadline = time.monotonic() + 150
        while len(producer) and time.monotonic() < deadline:
            producer.flush(1)
        assert len(producer) == 0, f"{len(producer)} records still queued after 150 s"
    finally:
        proxy.clear_faults()
        producer.purge()
        producer.close()
    assert not errors, f"{len(errors)} records failed: {errors[:5]}"
    assert_faults_hit_produce(proxy, swallowed_before)
    check_partitions(broker, topic, acked)


def _closed_without_response(sock) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def test_proxy_faults_do_what_they_say(proxied):
    """The proxy itself: forwarding, swallowing a response after the broker executed the request,
    dropping a request before the broker sees it, dropping connections on command, delays."""
    broker, proxy = proxied
    proxy.clear_faults()
    assert wire.api_versions(proxy.bootstrap)

    create_topic(broker.bootstrap, "proxy-selftest")
    proxy.swallow_next_response(api_key=PRODUCE_KEY)
    with wire.connect(proxy.bootstrap) as sock:
        wire.send_request(sock, produce_request("proxy-selftest", 0, batch([b"written"])), 9)
        assert _closed_without_response(sock)
    assert [v for _o, _k, v in read_records(broker.bootstrap, "proxy-selftest", 0)] == [b"written"]

    proxy.set_faults(Faults(drop_request=1.0, api_keys=frozenset({PRODUCE_KEY})))
    with wire.connect(proxy.bootstrap) as sock:
        wire.send_request(sock, ApiVersionsRequest(), 0, correlation_id=5)  # not a produce: forwarded
        assert wire.read_response(sock, 18, 0)[0] == 5
        wire.send_request(sock, produce_request("proxy-selftest", 0, batch([b"dropped"])), 9)
        assert _closed_without_response(sock)
    proxy.clear_faults()
    assert [v for _o, _k, v in read_records(broker.bootstrap, "proxy-selftest", 0)] == [b"written"]

    with wire.connect(proxy.bootstrap) as sock:
        wire.send_request(sock, ApiVersionsRequest(), 0, correlation_id=6)
        assert wire.read_response(sock, 18, 0)[0] == 6
        assert proxy.drop_connections() >= 1
        assert _closed_without_response(sock)

    proxy.set_faults(Faults(delay_ms=(250, 250)))
    start = time.monotonic()
    assert wire.api_versions(proxy.bootstrap)
    assert time.monotonic() - start >= 0.45  # request and response each held back 250 ms
    proxy.clear_faults()
