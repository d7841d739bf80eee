"""A fault-injecting TCP proxy for Kafka connections, controlled by the test (DESIGN.md section 10).

The proxy listens on ``127.0.0.1:<port>`` and forwards every accepted connection to ``upstream``
(the broker). It understands Kafka framing (int32 size + payload) in both directions, so faults
hit whole requests and responses:

- ``drop_connections()``: close every proxied connection now (both sides);
- ``swallow_next_response(n, api_key=None)``: the next ``n`` responses (of that API) coming from
  the broker are not delivered; the connection is closed instead, so the client must retry a
  request the broker already executed;
- ``recorded``: set to a list to keep every request frame forwarded (client captures);
- random faults (:class:`Faults`): per forwarded request ``drop_request`` (close before the
  broker sees it), per response ``swallow_response`` (broker executed it, client never hears),
  ``delay_ms`` added before forwarding each frame, optionally limited to some API keys and to a
  total of ``max_faults``.

Counters in :attr:`TcpProxy.stats`. The proxy runs an asyncio loop in one daemon thread;
:meth:`TcpProxy.stop` closes everything and joins the thread (no leftover sockets or threads).

Clients learn broker addresses from Metadata, so the broker behind the proxy must advertise the
proxy's address (``advertised.listeners=PLAINTEXT://127.0.0.1:<proxy.port>``): bind the proxy
first (``TcpProxy().start()``), start the broker, then set :attr:`TcpProxy.upstream`.
"""

from __future__ import annotations

import asyncio
import random
import struct
import threading
from dataclasses import dataclass, field

_I32 = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id


@dataclass
class Faults:
    """Random fault probabilities (0..1), applied per frame."""

    drop_request: float = 0.0       # close the connection instead of forwarding a request
    swallow_response: float = 0.0   # drop a response and close the connection
    delay_ms: tuple[int, int] = (0, 0)  # uniform extra delay before forwarding each frame
    api_keys: frozenset[int] | None = None  # only requests/responses of these APIs get faults
    max_faults: int | None = None   # stop injecting after this many drops + swallows


@dataclass
class ProxyStats:
    connections: int = 0
    requests: int = 0
    responses: int = 0
    dropped_requests: int = 0
    swallowed_responses: int = 0
    forced_closes: int = 0
    requests_by_api: dict[int, int] = field(default_factory=dict)
    swallowed_by_api: dict[int, int] = field(default_factory=dict)

    @property
    def faults(self) -> int:
        return self.dropped_requests + self.swallowed_responses


class _Link:
    """One proxied client connection and its upstream connection."""

    def __init__(self, proxy: "TcpProxy", creader, cwriter) -> None:
        self.proxy = proxy
        self.creader = creader
        self.cwriter = cwriter
        self.uwriter = None
        self.in_flight: dict[int, int] = {}  # correlation id -> api key
        self.closed = False
        self.tasks: list[asyncio.Task] = []

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in (self.cwriter, self.uwriter):
            if w is not None:
                try:
                    w.transport.abort()
                except Exception:
                    pass
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.proxy._links.discard(self)


MAX_FRAME = 1 << 28


async def _read_frame(reader) -> tuple[bytes | None, bool]:
    """(frame, framed). A size we do not parse (negative or huge) gives (the 4 size bytes, False):
    the caller forwards it and passes the rest of the stream through unframed. A peer that closes
    mid-frame gives (the partial bytes, False) so they are still forwarded."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        return (e.partial or None), False
    except ConnectionError:
        return None, False
    (size,) = _I32.unpack(head)
    if size < 0 or size > MAX_FRAME:
        return head, False
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError as e:
        return head + e.partial, False
    except ConnectionError:
        return None, False
    return head + body, True


async def _pipe(reader, writer) -> None:
    """Raw passthrough until EOF."""
    while True:
        data = await reader.read(65536)
        if not data:
            return
        writer.write(data)
        await writer.drain()


class TcpProxy:
    """Kafka-aware TCP proxy on 127.0.0.1. Use as a context manager or call start()/stop()."""

    def __init__(self, upstream: str | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 faults: Faults | None = None, seed: int | None = None) -> None:
        self.upstream = upstream
        self.host = host
        self.port = port
        self.faults = faults or Faults()
        self.stats = ProxyStats()
        self._rng = random.Random(seed)
        self._swallow_next: list[tuple[int, int | None]] = []  # [remaining, api key filter]
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # a list to record every request frame (int32 size + payload) forwarded, or None
        self.recorded: list[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> "TcpProxy":
        ready = threading.Event()
        error: list[BaseException] = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._accept, self.host, self.port))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as e:  # pragma: no cover - bind failure
                error.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._thread = threading.Thread(target=run, name=f"tcp-proxy-{id(self):x}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or error:
            raise RuntimeError(f"proxy did not start: {error}")
        return self

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for link in list(self._links):
            link.close()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("proxy thread did not stop")
        self._thread = None
        self._loop = None

    def __enter__(self) -> "TcpProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- commands (thread-safe) ------------------------------------------------------------------

    def set_faults(self, faults: Faults) -> None:
        with self._lock:
            self.faults = faults

    def clear_faults(self) -> None:
        self.set_faults(Faults())

    def swallow_next_response(self, n: int = 1, api_key: int | None = None) -> None:
        """The next ``n`` responses (of ``api_key``, or any) are dropped and their connection closed."""
        with self._lock:
            self._swallow_next.append([n, api_key])

    def drop_connections(self) -> int:
        """Close every proxied connection now; returns how many were open."""
        if self._loop is None:
            return 0
        fut = asyncio.run_coroutine_threadsafe(self._drop_all(), self._loop)
        return fut.result(10)

    async def _drop_all(self) -> int:
        links = list(self._links)
        for link in links:
            link.close()
        self.stats.forced_closes += len(links)
        return len(links)

    def open_connections(self) -> int:
        return len(self._links)

    # -- forwarding ------------------------------------------------------------------------------

    async def _accept(self, creader, cwriter) -> None:
        link = _Link(self, creader, cwriter)
        self._links.add(link)
        self.stats.connections += 1
        if self.upstream is None:
            link.close()
            return
        host, port = self.upstream.rsplit(":", 1)
        try:
            ureader, uwriter = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 10)
        except (OSError, asyncio.TimeoutError):
            link.close()
            return
        link.uwriter = uwriter
        if link.closed:
            uwriter.transport.abort()
            return
        t1 = asyncio.ensure_future(self._client_to_broker(link, creader, uwriter))
        t2 = asyncio.ensure_future(self._broker_to_client(link, ureader, cwriter))
        link.tasks += [t1, t2]
        try:
            await asyncio.gather(t1, t2, return_exceptions=True)
        finally:
            link.close()

    def _eligible(self, api_key: int | None) -> bool:
        f = self.faults
        if f.max_faults is not None and self.stats.faults >= f.max_faults:
            return False
        return f.api_keys is None or api_key in f.api_keys

    async def _delay(self) -> None:
        lo, hi = self.faults.delay_ms
        if hi > 0:
            await asyncio.sleep(self._rng.uniform(lo, hi) / 1000.0)

    async def _client_to_broker(self, link: _Link, reader, writer) -> None:
        try:
            while not link.closed:
                frame, framed = await _read_frame(reader)
                if frame is None:
                    break
                if not framed:
                    writer.write(frame)
                    await writer.drain()
                    await _pipe(reader, writer)
                    break
                api_key = None
                if len(frame) >= 12:
                    api_key, _version, corr = _REQ_HEAD.unpack_from(frame, 4)
                    link.in_flight[corr] = api_key
                    self.stats.requests += 1
                    self.stats.requests_by_api[api_key] = self.stats.requests_by_api.get(api_key, 0) + 1
                with self._lock:
                    drop = (self.faults.drop_request > 0 and self._eligible(api_key)
                            and self._rng.random() < self.faults.drop_request)
                if drop:
                    self.stats.dropped_requests += 1
                    break
                await self._delay()
                if self.recorded is not None:
                    self.recorded.append(bytes(frame))
                writer.write(frame)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            link.close()

    async def _broker_to_client(self, link: _Link, reader, writer) -> None:
        try:
            while not link.closed:
                frame, framed = await _read_frame(reader)
                if frame is None:
                    break
                if not framed:
                    writer.write(frame)
                    await writer.drain()
                    await _pipe(reader, writer)
                    break
                api_key = None
                if len(frame) >= 8:
                    (corr,) = _I32.unpack_from(frame, 4)
                    api_key = link.in_flight.pop(corr, None)
                    self.stats.responses += 1
                if self._should_swallow(api_key):
                    self.stats.swallowed_responses += 1
                    self.stats.swallowed_by_api[api_key] = self.stats.swallowed_by_api.get(api_key, 0) + 1
                    break
                await self._delay()
                writer.write(frame)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            link.close()

    def _should_swallow(self, api_key: int | None) -> bool:
        with self._lock:
            for entry in self._swallow_next:
                if entry[0] > 0 and (entry[1] is None or entry[1] == api_key):
                    entry[0] -= 1
                    if entry[0] == 0:
                        self._swallow_next.remove(entry)
                    return True
            f = self.faults
            return (f.swallow_response > 0 and self._eligible(api_key)
                    and self._rng.random() < f.swallow_response)
