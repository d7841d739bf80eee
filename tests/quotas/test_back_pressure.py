"""Connection limits and back-pressure on a real kcompat process (Kafka's ``ConnectionQuotas``,
``connections.max.idle.ms``, bounded request queues): connections over ``max.connections.per.ip``
(or its override for an address) are closed, idle connections are closed while busy ones stay,
a client pipelining requests without reading the answers neither grows the broker's memory
without bound nor keeps other clients from being answered, and ``queued.max.request.bytes`` holds
every connection's next request while that many bytes of requests wait.

Clients connect from distinct loopback source addresses (127.0.0.x), so each test counts only its
own connections."""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CQ
from kcompat.protocol.messages.fetch import FetchRequest as FQ
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

IDLE_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("back-pressure") / "data",
                       {"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.3:3",
                        "connections.max.idle.ms": str(IDLE_MS)}) as b:
        yield b


def _connect(broker, source: str) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
    return sock


def _answered(sock: socket.socket) -> bool:
    """Whether an ApiVersions request on ``sock`` is answered (False: the broker closed it)."""
    try:
        wire.send_request(sock, ApiVersionsRequest(), 0)
        return wire.read_response(sock, 18, 0)[1].error_code == 0
    except (ConnectionError, OSError):
        return False


def _wait_read_by_broker(sock: socket.socket) -> None:
    """Until the broker's end of ``sock`` has nothing unread in its receive queue (/proc/net/tcp)."""
    ip, port = sock.getsockname()
    peer_ip, peer_port = sock.getpeername()

    def hex_addr(a: str, p: int) -> str:
        return "".join(f"{int(x):02X}" for x in reversed(a.split("."))) + f":{p:04X}"
    local, remote = hex_addr(peer_ip, peer_port), hex_addr(ip, port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if f[1] == local and f[2] == remote and int(f[4].split(":")[1], 16) == 0:
                return
        time.sleep(0.01)
    raise AssertionError("the broker did not read the request")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_connections_over_the_per_ip_limit_are_closed_and_idle_ones_expire(broker):
    first = [_connect(broker, "127.0.0.2") for _ in range(2)]
    assert all(_answered(s) for s in first)
    with _connect(broker, "127.0.0.2") as third:
        assert not _answered(third)   # max.connections.per.ip = 2
    overridden = [_connect(broker, "127.0.0.3") for _ in range(3)]
    assert all(_answered(s) for s in overridden)
    with _connect(broker, "127.0.0.3") as fourth:
        assert not _answered(fourth)  # the override for 127.0.0.3 is 3
    assert "Rejected connection from /127.0.0.2, address already has the configured maximum of 2 connections." \
        in broker.log_text()

    # connections.max.idle.ms: the first two go quiet and are closed; one of the others stays busy
    busy = overridden[0]
    closed = threading.Event()

    def wait_closed():
        first[0].settimeout(30)
        try:
            eof = first[0].recv(1) == b""
        except OSError:   # reset
            eof = True
        if eof:
            closed.set()

    watcher = threading.Thread(target=wait_closed, daemon=True)
    watcher.start()
    answers = 0
    while not closed.is_set() and answers < 200:   # ~60 s at most
        assert _answered(busy)
        answers += 1
        time.sleep(IDLE_MS / 5000)
    watcher.join(1)
    assert closed.is_set() and answers >= 3   # closed after being idle, while the busy one was answered
    assert _answered(busy)
    for s in first + overridden:
        s.close()
    with _connect(broker, "127.0.0.2") as again:
        assert _answered(again)   # the closed connections freed their address's slots


def test_a_pipelining_client_that_never_reads_is_held_back_and_others_are_answered(broker):
    rss_before = _rss_kb(broker.proc.pid)
    frame = bytearray()
    body = bytearray()
    RequestHeader(request_api_key=3, request_api_version=12, correlation_id=7, client_id="flood").write(body, 2)
    MetadataRequest(topics=None, allow_auto_topic_creation=False).write(body, 12)
    for _ in range(10000):
        frame += struct.pack(">i", len(body)) + body
    flood = _connect(broker, "127.0.0.4")
    flood.settimeout(3)
    sent = 0
    limit = 2_000 * len(frame)    # ~600 MB of requests, ~ten times as much in answers
    try:
        while sent < limit:
            flood.sendall(frame)
            sent += len(frame)
    except socket.timeout:
        pass   # the broker stopped reading: back-pressure
    assert sent < limit
    with _connect(broker, "127.0.0.5") as other:
        assert _answered(other)
        wire.send_request(other, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12, correlation_id=2)
        assert wire.read_response(other, 3, 12)[0] == 2
    grown_mb = (_rss_kb(broker.proc.pid) - rss_before) / 1024
    assert grown_mb < 100, grown_mb
    flood.close()
    with _connect(broker, "127.0.0.4") as after:
        assert _answered(after)


def test_queued_request_bytes_bound_what_is_read_across_connections(tmp_path):
    """``queued.max.request.bytes`` = 1: while one request waits (a long-polling fetch), no
    connection's next request is taken; it is answered once the fetch is."""
    with BrokerProcess(tmp_path / "data", {"queued.max.request.bytes": "1"}) as b:
        created = wire.call(b.bootstrap, CQ(topics=[CQ.CreatableTopic(name="idle", num_partitions=1,
                                                                      replication_factor=1)], timeout_ms=30000), 7)
        assert created.topics[0].error_code == 0
        fetch = FQ(replica_id=-1, max_wait_ms=2000, min_bytes=1, max_bytes=1 << 20, session_epoch=-1, topics=[
            FQ.FetchTopic(topic="idle", partitions=[FQ.FetchPartition(partition=0, fetch_offset=0,
                                                                      partition_max_bytes=1 << 20)])])
        with _connect(b, "127.0.0.6") as waiting, _connect(b, "127.0.0.7") as other:
            wire.send_request(waiting, fetch, 12)
            _wait_read_by_broker(waiting)   # the fetch is taken and waits for data
            wire.send_request(other, ApiVersionsRequest(), 0)
            wire.read_response(other, 18, 0)
            # The fetch's answer was written before the other request was taken, so it is already
            # in this end's receive queue (loopback). Asked here rather than by two reader
            # threads, whose order of noting their answers was itself a race.
            # poll, not select: a pytest worker late in the full run holds descriptors >= 1024
            poller = select.poll()
            poller.register(waiting, select.POLLIN)
            fetch_answered_first = bool(poller.poll(0))
            wire.read_response(waiting, 1, 12)
        assert fetch_answered_first
