"""Network faults between kcompat nodes: one proxy per directed link, switched by the test.

:class:`LinkProxy` is a :class:`~tests.support.tcp_proxy.TcpProxy` (Kafka framing, counters,
random faults) with a *mode*:

- ``FORWARD``: pass everything (the default);
- ``REFUSE``: new connections are reset at once (accept + RST); open connections keep working;
- ``CUT``: close every open connection and reset new ones;
- ``BLACKHOLE``: accept new connections but never connect them upstream, and stop forwarding frames
  on open connections (both directions stall; the bytes wait in the proxy and the kernel buffers,
  as on a network that drops packets). Leaving the blackhole for ``FORWARD`` lets the stalled
  traffic through (TCP retransmission after a partition heals); for ``REFUSE``/``CUT`` the
  stalled new connections are reset.

:class:`LinkMesh` holds one LinkProxy per (source node, destination node, kind) and switches the
links of a node or a pair at once (``isolate(3)`` cuts node 3 off in both directions). The cluster
fixture :class:`tests.support.cluster.ProxiedCluster` puts one in front of every broker-to-broker
and controller-to-controller connection.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Iterable

from tests.support.tcp_proxy import TcpProxy

FORWARD, REFUSE, CUT, BLACKHOLE = "forward", "refuse", "cut", "blackhole"
MODES = (FORWARD, REFUSE, CUT, BLACKHOLE)


def _reset(writer) -> None:
    """Close with an RST (SO_LINGER 0), as a refused/dead peer looks to the client."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        writer.transport.abort()
    except Exception:
        pass


class LinkProxy(TcpProxy):
    """A TcpProxy with a switchable :data:`MODES` mode; ``refused`` counts reset connections."""

    def __init__(self, upstream: str | None = None, *, name: str = "", **kw) -> None:
        super().__init__(upstream, **kw)
        self.name = name
        self.mode = FORWARD
        self.refused = 0
        self._mode_changed: asyncio.Event | None = None  # created on the proxy loop
        self._stalled: set = set()  # writers of blackholed new connections

    def __repr__(self) -> str:
        return f"LinkProxy({self.name or self.upstream}, {self.mode}, port {self.port})"

    def set_mode(self, mode: str) -> None:
        """Switch the mode; returns once open connections are closed (CUT) or released (FORWARD)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        if self._loop is None:
            self.mode = mode
            return
        asyncio.run_coroutine_threadsafe(self._switch(mode), self._loop).result(10)

    async def _switch(self, mode: str) -> None:
        self.mode = mode
        if mode in (CUT, REFUSE):
            for w in list(self._stalled):
                _reset(w)
        if mode == CUT:
            await self._drop_all()
        ev, self._mode_changed = self._mode_changed, None
        if ev is not None:
            ev.set()  # wake every stalled frame and connection to look at the new mode

    async def _wait_mode_change(self) -> None:
        if self._mode_changed is None:
            self._mode_changed = asyncio.Event()
        await self._mode_changed.wait()

    async def _accept(self, creader, cwriter) -> None:
        if self.mode == BLACKHOLE:
            self._stalled.add(cwriter)
            try:
                while self.mode == BLACKHOLE:
                    await self._wait_mode_change()
            finally:
                self._stalled.discard(cwriter)
        if self.mode in (REFUSE, CUT):
            self.refused += 1
            _reset(cwriter)
            return
        await super()._accept(creader, cwriter)

    async def _delay(self) -> None:
        # called by TcpProxy before forwarding each frame, in both directions
        while self.mode == BLACKHOLE:
            await self._wait_mode_change()
        await super()._delay()


class LinkMesh:
    """Directed links ``(src, dst, kind) -> LinkProxy``; node ids are ints, kinds strings."""

    def __init__(self) -> None:
        self.links: dict[tuple[int, int, str], LinkProxy] = {}

    def add(self, src: int, dst: int, kind: str, upstream: str | None, port: int = 0) -> LinkProxy:
        """A proxy for the link; ``upstream`` may be set later (``proxy.upstream = "host:port"``)."""
        p = LinkProxy(upstream, port=port, name=f"{src}->{dst} {kind}")
        self.links[(src, dst, kind)] = p
        return p

    def start(self) -> "LinkMesh":
        for p in self.links.values():
            if p._loop is None:
                p.start()
        return self

    def stop(self) -> None:
        for p in self.links.values():
            p.stop()

    def select(self, src: int | None = None, dst: int | None = None,
               kinds: Iterable[str] | None = None) -> list[LinkProxy]:
        kinds = set(kinds) if kinds is not None else None
        return [p for (s, d, k), p in self.links.items()
                if (src is None or s == src) and (dst is None or d == dst) and (kinds is None or k in kinds)]

    def set(self, mode: str, src: int | None = None, dst: int | None = None,
            kinds: Iterable[str] | None = None) -> list[LinkProxy]:
        """Set ``mode`` on every selected link (None selects all); returns them."""
        chosen = self.select(src, dst, kinds)
        for p in chosen:
            p.set_mode(mode)
        return chosen

    def isolate(self, node: int, mode: str = CUT, kinds: Iterable[str] | None = None) -> None:
        """Every link from and to ``node`` in ``mode``: the node is cut off from the others."""
        self.set(mode, src=node, kinds=kinds)
        self.set(mode, dst=node, kinds=kinds)

    def partition(self, a: int, b: int, mode: str = CUT, kinds: Iterable[str] | None = None) -> None:
        """The links between ``a`` and ``b`` (both directions) in ``mode``."""
        self.set(mode, src=a, dst=b, kinds=kinds)
        self.set(mode, src=b, dst=a, kinds=kinds)

    def heal(self, node: int | None = None) -> None:
        """Back to FORWARD: the links of ``node``, or all."""
        if node is None:
            self.set(FORWARD)
        else:
            self.isolate(node, FORWARD)

    def requests(self, src: int | None = None, dst: int | None = None, kinds: Iterable[str] | None = None,
                 api_key: int | None = None) -> int:
        """Requests forwarded over the selected links (of ``api_key``, or all)."""
        total = 0
        for p in self.select(src, dst, kinds):
            total += p.stats.requests if api_key is None else p.stats.requests_by_api.get(api_key, 0)
        return total
