"""Connection limits and request memory on broker listeners (Kafka's ``ConnectionQuotas``,
``SocketServer`` memory pool and idle-connection expiry; KIP-308, KIP-402).

- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count,...``): a
  connection from an address that already has that many is closed at once, with Kafka's log line.
- ``max.connections``: beyond it, a new connection is held unread (Kafka's acceptor waits for a
  slot) until another one closes; the inter-broker listener is exempt.
- ``queued.max.request.bytes`` (-1: no limit): when the requests read but not answered yet, on all
  connections, hold that many bytes, no connection reads more until some are answered.
- ``connections.max.idle.ms``: a connection with nothing in flight and no bytes read or written for
  that long is closed.

Controller listeners (the quorum's own traffic) are exempt from all of these. The connection
limits are read from the config each time, so dynamic changes (``kafka-configs.sh --entity-type
brokers``) apply to new connections; ``queued.max.request.bytes`` is read-only, read once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections import deque

log = logging.getLogger("kcompat.broker.connection_quotas")

HOLD_SLOT = "max.connections"
HOLD_MEMORY = "queued.max.request.bytes"


def parse_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` -> {ip address: limit}; host names are resolved."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, _, count = item.rpartition(":")
        host = host.strip("[]")
        try:
            ipaddress.ip_address(host)
            addresses = [host]
        except ValueError:
            try:
                addresses = sorted({ai[4][0] for ai in socket.getaddrinfo(host, None)})
            except OSError:
                log.warning("max.connections.per.ip.overrides: cannot resolve %s", host)
                continue
        for a in addresses:
            out[a] = int(count)
    return out


class ConnectionQuotas:
    """The broker's connection counts and queued request bytes. ``config_get``: config lookup;
    ``exempt_listeners``: names whose connections are not limited (controller listeners);
    ``inter_broker_listener``: exempt from ``max.connections`` only."""

    def __init__(self, config_get, exempt_listeners, inter_broker_listener: str | None) -> None:
        self._get = config_get
        self._exempt = frozenset(exempt_listeners)
        self._inter_broker = inter_broker_listener
        self._per_ip: dict[str, int] = {}
        self._counted: set = set()
        self._waiting: deque = deque()
        self._memory_waiters: set = set()
        self.queued_bytes = 0
        self._queued_limit = config_get("queued.max.request.bytes")   # read-only: read once
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}
        self._sweeper: asyncio.Task | None = None

    # -- connections -----------------------------------------------------------------------------

    def exempt(self, conn) -> bool:
        return conn.listener_name in self._exempt

    def on_open(self, conn, ip: str) -> str | None:
        """A new connection: the reason to close it (over its address's limit), else None; it is
        held unread while ``max.connections`` are open."""
        if self.exempt(conn):
            return None
        limit = self._ip_limit(ip)
        count = self._per_ip.get(ip, 0)
        if count >= limit:
            log.info("Rejected connection from /%s, address already has the configured maximum of %d connections.",
                     ip, limit)
            return f"max.connections.per.ip ({limit}) reached for {ip}"
        self._per_ip[ip] = count + 1
        conn.quota_ip = ip
        if conn.listener_name != self._inter_broker and len(self._counted) >= self._get("max.connections"):
            self._waiting.append(conn)
            conn.hold(HOLD_SLOT)
            return None
        self._counted.add(conn)
        return None

    def on_close(self, conn) -> None:
        """A connection closed: its address's count and slot are free, its queued bytes too."""
        ip = getattr(conn, "quota_ip", None)
        if ip is None:
            return
        conn.quota_ip = None
        n = self._per_ip.get(ip, 0) - 1
        if n > 0:
            self._per_ip[ip] = n
        else:
            self._per_ip.pop(ip, None)
        self._memory_waiters.discard(conn)
        if conn in self._counted:
            self._counted.discard(conn)
        else:
            try:
                self._waiting.remove(conn)
            except ValueError:
                pass
        limit = self._get("max.connections")
        while self._waiting and len(self._counted) < limit:
            nxt = self._waiting.popleft()
            self._counted.add(nxt)
            nxt.unhold(HOLD_SLOT)

    def _ip_limit(self, ip: str) -> int:
        text = self._get("max.connections.per.ip.overrides")
        if text != self._overrides_text:
            self._overrides_text, self._overrides = text, parse_overrides(text)
        return self._overrides.get(ip, self._get("max.connections.per.ip"))

    # -- queued request bytes --------------------------------------------------------------------

    def may_read(self, conn) -> bool:
        """Whether ``conn`` may take another request now (else it is held until bytes free up)."""
        limit = self._queued_limit
        if limit <= 0 or self.exempt(conn) or self.queued_bytes < limit:
            return True
        self._memory_waiters.add(conn)
        conn.hold(HOLD_MEMORY)
        return False

    def reserve(self, conn, n: int) -> int:
        """Count ``n`` bytes of a request read on ``conn``; returns what to :meth:`release` later."""
        if self.exempt(conn):
            return 0
        self.queued_bytes += n
        return n

    def release(self, n: int) -> None:
        """A request's bytes were answered (or its connection closed)."""
        if not n:
            return
        self.queued_bytes -= n
        if self._memory_waiters:
            limit = self._queued_limit
            if limit <= 0 or self.queued_bytes < limit:
                waiters, self._memory_waiters = self._memory_waiters, set()
                for conn in waiters:
                    conn.unhold(HOLD_MEMORY)

    # -- idle connections ------------------------------------------------------------------------

    def start_idle_expiry(self, connections) -> None:
        """Close connections idle for ``connections.max.idle.ms`` (``connections``: the live set)."""
        self._sweeper = asyncio.ensure_future(self._expire_idle(connections))

    async def _expire_idle(self, connections) -> None:
        while True:
            idle_ms = self._get("connections.max.idle.ms")
            await asyncio.sleep(min(1.0, max(0.05, idle_ms / 10000.0)) if idle_ms > 0 else 1.0)
            if idle_ms <= 0:
                continue
            deadline = time.monotonic() - idle_ms / 1000.0
            for conn in list(connections):
                if not self.exempt(conn) and conn.idle_since(deadline):
                    log.debug("closing idle connection from %s (connections.max.idle.ms=%d)", conn.peer, idle_ms)
                    conn.close()

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
