"""Kafka protocol client for node-to-node traffic: Raft RPCs between controllers, broker
registration and heartbeats, forwarded admin requests, and (with replication) follower fetches.

One :class:`NodeConnection` is one TCP connection with many requests in flight (responses are
matched by correlation id, as the protocol allows). Request headers follow the same rules the
server applies: v2 for flexible request versions, v1 otherwise; response header v1 for flexible
versions except ApiVersions. :class:`NodeClients` keeps one connection per destination node and
reconnects lazily after a failure.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Callable

from kcompat.broker.frame_buffer import FrameBuffer, FrameSizeError
from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.headers import RequestHeader, ResponseHeader

log = logging.getLogger("kcompat.broker.node_client")

_I32 = struct.Struct(">i")
MAX_RESPONSE_BYTES = 200 * 1024 * 1024
# a response's buffer is allocated whole up to this size (a fetch response of
# replica.fetch.response.max.bytes, 10 MiB, fits): the peer is a node this one asked
RESPONSE_UPFRONT = 16 * 1024 * 1024


class NodeConnectionError(ConnectionError):
    """The connection failed or closed before the response arrived."""


class _ClientProtocol(asyncio.BufferedProtocol):
    """Responses are read with a :class:`FrameBuffer`: a large one (a follower's fetch response)
    goes from the socket into the buffer it is decoded from, with no copy in Python."""

    def __init__(self, owner: "NodeConnection") -> None:
        self.owner = owner
        self.frames = FrameBuffer(upfront=RESPONSE_UPFRONT)

    def connection_lost(self, exc) -> None:
        self.owner._lost(exc)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        frames = self.frames
        frames.received(nbytes)
        while not self.owner.closed:
            try:
                frame = frames.next_frame(MAX_RESPONSE_BYTES)
            except FrameSizeError as e:
                self.owner.close(f"response frame of {e.size} bytes")
                return
            if frame is None:
                return
            self.owner._on_frame(frame)


class NodeConnection:
    """A client connection to ``host:port``. :meth:`send` returns the decoded response."""

    def __init__(self, host: str, port: int, client_id: str, *, ssl_context=None, sasl=None) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        # TLS: an ssl.SSLContext for an SSL/SASL_SSL listener (kcompat.broker.tls), None = plain TCP
        self.ssl_context = ssl_context
        # SASL: a kcompat.security.sasl_client.ClientSasl for a SASL listener, run after connecting;
        # reauth_at (loop time) is when to replace the connection before its session expires (KIP-368)
        self.sasl = sasl
        self.reauth_at: float | None = None
        self._retiring = False
        self._transport = None
        self._pending: dict[int, tuple[asyncio.Future, type, int, bool]] = {}
        self._next_correlation = 1
        self.closed = False

    async def connect(self, timeout_s: float = 5.0) -> None:
        loop = asyncio.get_running_loop()
        tls = {} if self.ssl_context is None else {"ssl": self.ssl_context, "server_hostname": self.host}
        self._transport, _ = await asyncio.wait_for(
            loop.create_connection(lambda: _ClientProtocol(self), self.host, self.port, **tls), timeout_s)
        if self.sasl is not None:
            try:
                lifetime_ms = await asyncio.wait_for(self.sasl.exchange(self.send), timeout_s)
            except BaseException as e:
                # the peer going away mid-handshake (a node restarting) is not a refusal: named as
                # Kafka's NetworkClient does ("terminated during authentication")
                if isinstance(e, NodeConnectionError):
                    self.close(f"connection terminated during SASL authentication: {e}")
                else:
                    self.close(f"SASL authentication failed: {e}" if isinstance(e, ConnectionError) else None)
                raise
            if lifetime_ms:
                self.reauth_at = loop.time() + lifetime_ms * 0.85 / 1000.0

    def retire(self) -> None:
        """Take no new requests (the caller opens a new connection); close once the requests in
        flight are answered. Used before a SASL session expires."""
        self._retiring = True
        if not self._pending:
            self.close()

    def send_nowait(self, request, version: int) -> asyncio.Future:
        """Write the request now; the future resolves to the response (or NodeConnectionError)."""
        if self.closed or self._transport is None:
            raise NodeConnectionError(f"not connected to {self.host}:{self.port}")
        req_cls = type(request)
        _, resp_cls = api_classes(req_cls.API_KEY)
        flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
        correlation = self._next_correlation
        self._next_correlation = (correlation + 1) & 0x7FFFFFFF
        out = bytearray(b"\0\0\0\0")
        RequestHeader(request_api_key=req_cls.API_KEY, request_api_version=version, correlation_id=correlation,
                      client_id=self.client_id).write(out, 2 if flexible else 1)
        request.write(out, version)
        _I32.pack_into(out, 0, len(out) - 4)
        fut = asyncio.get_running_loop().create_future()
        response_flexible = flexible and req_cls.API_KEY != 18
        self._pending[correlation] = (fut, resp_cls, version, response_flexible)
        self._transport.write(out)
        return fut

    async def send(self, request, version: int, timeout_s: float = 30.0):
        return await asyncio.wait_for(self.send_nowait(request, version), timeout_s)

    def _on_frame(self, frame: bytearray) -> None:
        view = memoryview(frame)
        correlation = _I32.unpack_from(frame, 0)[0]
        entry = self._pending.pop(correlation, None)
        if entry is None:
            self.close(f"response with unknown correlation id {correlation}")
            return
        fut, resp_cls, version, flexible = entry
        try:
            _header, off = ResponseHeader.read(view, 0, 1 if flexible else 0)
            response, _ = resp_cls.read(view, off, version)
        except Exception as e:  # a peer sending garbage: fail this request and the connection
            if not fut.done():
                fut.set_exception(NodeConnectionError(f"malformed {resp_cls.NAME}: {e}"))
            self.close(f"malformed response: {e}")
            return
        if not fut.done():
            fut.set_result(response)
        if self._retiring and not self._pending:
            self.close()

    def _lost(self, exc) -> None:
        self.closed = True
        pending, self._pending = self._pending, {}
        for fut, *_ in pending.values():
            if not fut.done():
                fut.set_exception(NodeConnectionError(f"connection to {self.host}:{self.port} lost: {exc}"))

    def close(self, reason: str | None = None) -> None:
        if reason:
            log.warning("closing connection to %s:%d: %s", self.host, self.port, reason)
        self.closed = True
        if self._transport is not None:
            self._transport.close()
        self._lost(reason)


class NodeClients:
    """One connection per destination node id; ``endpoint_of(node_id) -> (host, port) | None``;
    ``ssl_context``: TLS for every connection (the destination listener is SSL/SASL_SSL), or None."""

    def __init__(self, endpoint_of: Callable[[int], tuple[str, int] | None], client_id: str, *,
                 ssl_context=None, sasl=None) -> None:
        self._endpoint_of = endpoint_of
        self._client_id = client_id
        self.ssl_context = ssl_context
        self.sasl = sasl   # kcompat.security.sasl_client.ClientSasl for SASL listeners, or None
        self._conns: dict[int, NodeConnection] = {}
        self._connecting: dict[int, asyncio.Task] = {}

    async def get(self, node_id: int) -> NodeConnection:
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            if conn.reauth_at is None or asyncio.get_running_loop().time() < conn.reauth_at:
                return conn
            del self._conns[node_id]   # its SASL session ends soon: a fresh, authenticated one
            conn.retire()
        task = self._connecting.get(node_id)
        if task is None:
            task = self._connecting[node_id] = asyncio.ensure_future(self._connect(node_id))
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._connecting.pop(node_id, None)

    async def _connect(self, node_id: int) -> NodeConnection:
        endpoint = self._endpoint_of(node_id)
        if endpoint is None:
            raise NodeConnectionError(f"no endpoint known for node {node_id}")
        conn = NodeConnection(endpoint[0], endpoint[1], self._client_id, ssl_context=self.ssl_context,
                              sasl=self.sasl)
        try:
            await conn.connect()
        except (OSError, asyncio.TimeoutError) as e:
            raise NodeConnectionError(f"cannot connect to node {node_id} at {endpoint[0]}:{endpoint[1]}: {e}") from e
        self._conns[node_id] = conn
        return conn

    async def send(self, node_id: int, request, version: int, timeout_s: float = 30.0):
        conn = await self.get(node_id)
        return await conn.send(request, version, timeout_s)

    def close_node(self, node_id: int) -> None:
        """Drop the connection to ``node_id`` (after an error); the next send reconnects."""
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        for task in self._connecting.values():
            task.cancel()
        self._connecting.clear()
