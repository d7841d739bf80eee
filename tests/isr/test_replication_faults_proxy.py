"""The link proxy the replication fault tests cut brokers off with (tests/support/link_proxy.py):
each mode against a framed echo server, and LinkMesh's link selection."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from tests.support.link_proxy import BLACKHOLE, CUT, FORWARD, REFUSE, LinkMesh, LinkProxy


class EchoServer:
    """Answers every Kafka-framed request with the same frame."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn) -> None:
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                conn.sendall(data)

    def close(self) -> None:
        self.sock.close()


def frame(corr: int) -> bytes:
    body = struct.pack(">hhi", 18, 0, corr) + b"payload"
    return struct.pack(">i", len(body)) + body


def request(sock: socket.socket, corr: int, timeout: float = 2.0) -> bytes | None:
    """Send one frame; the echoed frame, or None if nothing came back within ``timeout``."""
    sock.sendall(frame(corr))
    return receive(sock, len(frame(corr)), timeout)


def receive(sock: socket.socket, n: int, timeout: float) -> bytes | None:
    sock.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionResetError("closed")
            buf += chunk
    except socket.timeout:
        return None
    return buf


def is_reset(sock: socket.socket) -> bool:
    """The proxy closed this connection (RST or FIN) rather than answering."""
    try:
        sock.sendall(frame(99))
        sock.settimeout(2.0)
        return sock.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def new_connection_reset(p: LinkProxy) -> bool:
    """A new connection through ``p`` is reset (possibly already while connecting)."""
    try:
        sock = connect(p)
    except (ConnectionResetError, ConnectionRefusedError):
        return True
    with sock:
        return is_reset(sock)


@pytest.fixture
def proxy():
    echo = EchoServer()
    p = LinkProxy(echo.address, name="test").start()
    yield p
    p.stop()
    echo.close()


def connect(p: LinkProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", p.port), timeout=2)


def test_forward_refuse_and_cut(proxy):
    old = connect(proxy)
    assert request(old, 1) == frame(1)
    proxy.set_mode(REFUSE)
    assert request(old, 2) == frame(2)          # open connections keep working
    assert new_connection_reset(proxy)           # new ones are reset
    proxy.set_mode(CUT)
    assert is_reset(old)                         # open connections are closed
    assert new_connection_reset(proxy)
    assert proxy.refused == 2
    proxy.set_mode(FORWARD)
    fresh = connect(proxy)
    assert request(fresh, 3) == frame(3)
    assert proxy.stats.requests_by_api[18] >= 3


def test_blackhole_stalls_both_open_and_new_connections_until_healed(proxy):
    old = connect(proxy)
    assert request(old, 1) == frame(1)
    proxy.set_mode(BLACKHOLE)
    assert request(old, 2, timeout=0.3) is None  # stalls, stays open
    new = connect(proxy)                         # accepted ...
    assert request(new, 3, timeout=0.3) is None  # ... but goes nowhere
    proxy.set_mode(FORWARD)                      # the stalled frames go through
    assert receive(old, len(frame(2)), 2) == frame(2)
    assert receive(new, len(frame(3)), 2) == frame(3)


def test_blackhole_then_cut_resets_the_stalled_connections(proxy):
    old = connect(proxy)
    assert request(old, 1) == frame(1)
    proxy.set_mode(BLACKHOLE)
    new = connect(proxy)
    assert request(new, 2, timeout=0.3) is None
    proxy.set_mode(CUT)
    assert is_reset(old)
    assert is_reset(new)


def test_mesh_isolate_and_heal_select_the_links_of_a_node():
    echo = EchoServer()
    mesh = LinkMesh()
    for s in (1, 2, 3):
        for d in (1, 2, 3):
            if s != d:
                for kind in ("controller", "replication"):
                    mesh.add(s, d, kind, echo.address)
    mesh.start()
    try:
        mesh.isolate(3)
        cut = {k for k, p in mesh.links.items() if p.mode == CUT}
        assert cut == {(s, d, k) for (s, d, k) in mesh.links if 3 in (s, d)}
        mesh.partition(1, 2, BLACKHOLE, kinds=["replication"])
        assert mesh.links[(1, 2, "replication")].mode == BLACKHOLE
        assert mesh.links[(1, 2, "controller")].mode == FORWARD
        mesh.heal(3)
        assert all(p.mode == FORWARD for (s, d, _k), p in mesh.links.items() if 3 in (s, d))
        assert mesh.links[(2, 1, "replication")].mode == BLACKHOLE
        mesh.heal()
        assert all(p.mode == FORWARD for p in mesh.links.values())
        with socket.create_connection(("127.0.0.1", mesh.links[(1, 2, "controller")].port), timeout=2) as s:
            assert request(s, 7) == frame(7)
        assert mesh.requests(src=1, dst=2) == 1
    finally:
        mesh.stop()
        echo.close()
