"""A Kafka-aware TCP proxy that injects connection faults and works with any broker unchanged.

Clients learn broker addresses from Metadata (and FindCoordinator) responses, so a plain proxy is
bypassed after the first request. This proxy rewrites the broker addresses in those responses to
proxy listeners of its own — one listener per upstream broker, created on first sight — so every
connection a client makes goes through it, without reconfiguring the broker (``advertised.listeners``)
under test. Metadata v0-v12 and FindCoordinator v0-v6 are rewritten; other responses pass untouched.

Faults, applied per forwarded frame of the chosen API keys: ``swallow_response`` (the broker executed
the request but the client never hears back: the connection is closed instead — the client must
retry something already done), ``drop_request`` (closed before the broker sees it), both with a
probability and a total cap (``max_faults``). :meth:`FaultProxy.drop_connections` closes every proxied
connection at once.

Runs an asyncio loop in a daemon thread; :meth:`FaultProxy.stop` closes everything.
"""

from __future__ import annotations

import asyncio
import random
import struct
import threading
from dataclasses import dataclass, field

from conformance.wire import Reader, Writer

METADATA, FIND_COORDINATOR = 3, 10


@dataclass
class Faults:
    swallow_response: float = 0.0
    drop_request: float = 0.0
    api_keys: frozenset[int] | None = None  # None: every API
    max_faults: int | None = None
    skip_first: int = 0  # let this many eligible frames through before injecting anything


@dataclass
class Stats:
    connections: int = 0
    requests: int = 0
    swallowed: int = 0
    dropped: int = 0
    forced_closes: int = 0
    rewritten: int = 0
    by_api: dict[int, int] = field(default_factory=dict)

    @property
    def faults(self) -> int:
        return self.swallowed + self.dropped


def _read_broker(r: Reader, version: int, flexible: bool) -> tuple[int, str, int, str | None]:
    node = r.i32()
    host = r.compact_string() if flexible else r.string()
    port = r.i32()
    rack = None
    if version >= 1:
        rack = r.compact_string() if flexible else r.string()
    if flexible:
        r.skip_tags()
    return node, host, port, rack


def rewrite_metadata(body: bytes, version: int, mapper) -> bytes:
    """``body`` is a Metadata response after the correlation id; brokers' (host, port) -> mapper(...)."""
    flexible = version >= 9
    r = Reader(body)
    w = Writer()
    if flexible:
        start = r.off
        r.skip_tags()
        w.raw(body[start:r.off])
    if version >= 3:
        w.i32(r.i32())
    n = r.uvarint() - 1 if flexible else r.i32()
    w.uvarint(n + 1) if flexible else w.i32(n)
    for _ in range(max(n, 0)):
        node, host, port, rack = _read_broker(r, version, flexible)
        host, port = mapper(host, port)
        w.i32(node)
        w.compact_string(host) if flexible else w.string(host)
        w.i32(port)
        if version >= 1:
            w.compact_string(rack) if flexible else w.string(rack)
        if flexible:
            w.tags()
    return w.getvalue() + body[r.off:]


def rewrite_find_coordinator(body: bytes, version: int, mapper) -> bytes:
    flexible = version >= 3
    r = Reader(body)
    w = Writer()
    if flexible:
        start = r.off
        r.skip_tags()
        w.raw(body[start:r.off])
    if version >= 1:
        w.i32(r.i32())  # throttle
    if version <= 3:
        w.i16(r.i16())  # error
        if version >= 1:
            msg = r.compact_string() if flexible else r.string()
            w.compact_string(msg) if flexible else w.string(msg)
        node = r.i32()
        host = r.compact_string() if flexible else r.string()
        port = r.i32()
        if host:
            host, port = mapper(host, port)
        w.i32(node)
        w.compact_string(host) if flexible else w.string(host)
        w.i32(port)
        return w.getvalue() + body[r.off:]
    n = r.uvarint() - 1
    w.uvarint(n + 1)
    for _ in range(max(n, 0)):
        key = r.compact_string()
        node = r.i32()
        host = r.compact_string()
        port = r.i32()
        err = r.i16()
        msg = r.compact_string()
        r.skip_tags()
        if host:
            host, port = mapper(host, port)
        w.compact_string(key).i32(node).compact_string(host).i32(port).i16(err).compact_string(msg).tags()
    return w.getvalue() + body[r.off:]


class FaultProxy:
    """See the module docstring. ``bootstrap`` is the proxy address clients should use."""

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", faults: Faults | None = None,
                 seed: int = 1) -> None:
        self.upstream = upstream
        self.host = host
        self.faults = faults or Faults()
        self.stats = Stats()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, int], int] = {}  # upstream (host, port) -> local port
        self._servers: list = []
        self._links: set = set()
        self._eligible_seen = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.bootstrap = ""

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> "FaultProxy":
        ready = threading.Event()
        errors: list[BaseException] = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                host, port = self.upstream.rsplit(":", 1)
                local = loop.run_until_complete(self._listen(host, int(port)))
                self.bootstrap = f"{self.host}:{local}"
            except BaseException as e:
                errors.append(e)
                ready.set()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                for s in self._servers:
                    s.close()
                for link in list(self._links):
                    link.abort()
                pending = [t for t in asyncio.all_tasks(loop)]
                for t in pending:
                    t.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10) or errors:
            raise RuntimeError(f"fault proxy did not start: {errors}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = self._loop = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def set_faults(self, faults: Faults) -> None:
        with self._lock:
            self.faults = faults
            self._eligible_seen = 0

    def drop_connections(self) -> int:
        if self._loop is None:
            return 0

        async def drop():
            links = list(self._links)
            for link in links:
                link.abort()
            self.stats.forced_closes += len(links)
            return len(links)

        return asyncio.run_coroutine_threadsafe(drop(), self._loop).result(10)

    # -- internals ----------------------------------------------------------------------------------------

    async def _listen(self, host: str, port: int) -> int:
        key = (host, port)
        if key in self._listeners:
            return self._listeners[key]
        server = await asyncio.start_server(lambda r, w: self._accept(r, w, host, port), self.host, 0)
        self._servers.append(server)
        local = server.sockets[0].getsockname()[1]
        self._listeners[key] = local
        return local

    def _map(self, host: str, port: int) -> tuple[str, int]:
        local = self._listeners.get((host, port))
        if local is None:  # called from the loop thread: create the listener synchronously
            raise KeyError((host, port))
        return self.host, local

    async def _ensure_mapped(self, addresses: list[tuple[str, int]]) -> None:
        for host, port in addresses:
            await self._listen(host, port)

    def _inject(self, api_key: int | None, kind: str) -> bool:
        with self._lock:
            f = self.faults
            p = f.swallow_response if kind == "swallow" else f.drop_request
            if p <= 0 or (f.api_keys is not None and api_key not in f.api_keys):
                return False
            if f.max_faults is not None and self.stats.faults >= f.max_faults:
                return False
            self._eligible_seen += 1
            if self._eligible_seen <= f.skip_first:
                return False
            return self._rng.random() < p

    async def _accept(self, creader, cwriter, up_host: str, up_port: int) -> None:
        self.stats.connections += 1
        try:
            ureader, uwriter = await asyncio.wait_for(asyncio.open_connection(up_host, up_port), 10)
        except (OSError, asyncio.TimeoutError):
            cwriter.transport.abort()
            return
        link = _Link(cwriter, uwriter)
        self._links.add(link)
        in_flight: dict[int, tuple[int, int]] = {}
        try:
            await asyncio.gather(self._c2b(link, creader, uwriter, in_flight),
                                 self._b2c(link, ureader, cwriter, in_flight), return_exceptions=True)
        finally:
            link.abort()
            self._links.discard(link)

    async def _c2b(self, link, reader, writer, in_flight) -> None:
        while not link.closed:
            frame = await _read_frame(reader)
            if frame is None:
                break
            if len(frame) >= 12:
                api_key, version, corr = struct.unpack_from(">hhi", frame, 4)
                in_flight[corr] = (api_key, version)
                self.stats.requests += 1
                self.stats.by_api[api_key] = self.stats.by_api.get(api_key, 0) + 1
                if self._inject(api_key, "drop"):
                    self.stats.dropped += 1
                    break
            writer.write(frame)
            await writer.drain()
        link.abort()

    async def _b2c(self, link, reader, writer, in_flight) -> None:
        while not link.closed:
            frame = await _read_frame(reader)
            if frame is None:
                break
            if len(frame) >= 8:
                (corr,) = struct.unpack_from(">i", frame, 4)
                api_key, version = in_flight.pop(corr, (None, None))
                if self._inject(api_key, "swallow"):
                    self.stats.swallowed += 1
                    break
                if api_key in (METADATA, FIND_COORDINATOR):
                    frame = await self._rewrite(frame, api_key, version)
            writer.write(frame)
            await writer.drain()
        link.abort()

    async def _rewrite(self, frame: bytes, api_key: int, version: int) -> bytes:
        body = frame[8:]
        seen: list[tuple[str, int]] = []

        def collect(host, port):
            seen.append((host, port))
            return host, port

        fn = rewrite_metadata if api_key == METADATA else rewrite_find_coordinator
        try:
            fn(body, version, collect)
            await self._ensure_mapped(seen)
            new_body = fn(body, version, self._map)
        except Exception:  # unknown layout: pass through unchanged
            return frame
        self.stats.rewritten += 1
        payload = frame[4:8] + new_body
        return struct.pack(">i", len(payload)) + payload


class _Link:
    def __init__(self, cwriter, uwriter) -> None:
        self.cwriter = cwriter
        self.uwriter = uwriter
        self.closed = False

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            for w in (self.cwriter, self.uwriter):
                try:
                    w.transport.abort()
                except Exception:
                    pass


async def _read_frame(reader) -> bytes | None:
    try:
        head = await reader.readexactly(4)
        (size,) = struct.unpack(">i", head)
        if size < 0 or size > 1 << 28:
            return None
        return head + await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return None
