"""One client connection: Kafka framing, request headers, dispatch, responses in request order.

Framing: every request is an int32 size followed by that many bytes (request header + body). A
size above ``socket.request.max.bytes`` (or negative) closes the connection with a log line, as
Kafka's SocketServer does (KAFKA-14063: never allocate what the peer announces before checking).
The connection is an ``asyncio.BufferedProtocol`` reading into a
:class:`kcompat.broker.frame_buffer.FrameBuffer`: a large frame, such as a produced batch, goes
from the socket into the buffer it is decoded from and appended with no copy in Python.

Many requests may be in flight on one connection; their responses are written strictly in request
order (a long-polling fetch holds back later responses on the same connection, as in Kafka). At
most ``queued.max.requests`` requests are in flight per connection; beyond that, reading pauses
until responses drain. Reading also pauses while the transport's write buffer is above its high
water mark (``pause_writing``/``resume_writing``), while the channel is muted after a throttled
response (client quotas, KIP-219: :mod:`kcompat.broker.quota.throttle`), and while the broker's
connection limits hold it (:mod:`kcompat.broker.quota.connections`: ``max.connections``,
``queued.max.request.bytes``; ``max.connections.per.ip`` closes, ``connections.max.idle.ms``
expires idle connections).

On plaintext TCP connections (``zero_copy``) fetch responses may carry file ranges of segment
files; such a response is written with sendfile by :mod:`kcompat.broker.sendfile_writer`, in its
turn, while later responses wait.

Headers (DESIGN.md section 3): request header v2 for flexible request versions, v1 otherwise;
response header v1 for flexible versions except ApiVersions, which always uses response header v0.
An ApiVersions request at a version we do not know gets the KIP-511 answer: a v0 body with
UNSUPPORTED_VERSION and our version range for ApiVersions.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from time import monotonic, perf_counter
from typing import TYPE_CHECKING

from kcompat.broker import apis, sendfile_writer
from kcompat.broker.frame_buffer import FrameBuffer, FrameSizeError
from kcompat.broker.context import NO_RESPONSE, RequestContext
from kcompat.broker.quota.throttle import request_quota_exempt, request_throttle_ms
from kcompat.broker.request_stats import RequestStats
from kcompat.isr.completion import Completion
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.api_versions import ApiVersionsResponse
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.primitives import DecodeError, Out

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.listeners import ConnectionServices

log = logging.getLogger("kcompat.broker.connection")

_I32 = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")
API_VERSIONS_KEY = 18
# Fairness under pipelining: one connection's buffered requests are taken a few at a time, the
# rest on a later turn of the event loop, so a client that pipelines many requests does not keep
# the others waiting; while more than BACKLOG_BYTES wait unframed, the connection is not read.
FRAMES_PER_TURN = 8
BACKLOG_BYTES = 1024 * 1024
BACKLOG_HOLD = "backlog"

# The decoders raise DecodeError and nothing else for bytes that do not decode (tools/gen_protocol.py;
# tools/fuzz_protocol.py checks it over every API and version): close the connection. Anything else
# is a decoder bug: still closed, with the traceback logged.
MALFORMED = DecodeError


_EXEMPT = object()
THROTTLE_HOLD = "throttle"


class _Slot:
    """A request awaiting its response; responses leave in slot order."""

    __slots__ = ("correlation_id", "api_key", "version", "flexible_header", "buffers", "done", "task",
                 "completion", "received", "handled", "completed", "request_bytes", "response_bytes", "response",
                 "reserved", "quota_client")

    def __init__(self, correlation_id: int, api_key: int, version: int, flexible_header: bool) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.flexible_header = flexible_header
        self.buffers = None
        self.done = False
        self.task = None
        self.completion = None      # a delayed fetch's Completion, cancelled if the connection closes
        # request metrics (perf_counter seconds): read, handler returned, response encoded
        self.received = self.handled = self.completed = 0.0
        self.request_bytes = self.response_bytes = 0
        self.response = None
        self.reserved = 0           # bytes counted against queued.max.request.bytes until answered
        self.quota_client = _EXEMPT  # client id the request_percentage quota records, if any


class KafkaConnection(asyncio.BufferedProtocol):
    """asyncio/uvloop protocol for one client connection to a kcompat listener.

    ``services``: what every connection of the node shares (the handlers' services, the config,
    request metrics, connection limits, the set of open connections, the listeners' SASL
    settings: :class:`kcompat.broker.listeners.ConnectionServices`); ``listener_name``: the
    listener it arrived on.
    """

    def __init__(self, services: ConnectionServices, listener_name: str) -> None:
        self.services = services
        config = services.config
        self.listener_name = listener_name
        self.is_controller_listener = listener_name in config.controller_listener_names
        self.handlers = apis.handlers_for(self.is_controller_listener)
        self.transport = None
        self.peer = "?"
        self._frames = FrameBuffer()
        self._pending: deque[_Slot] = deque()
        self._max_request_bytes = config.get("socket.request.max.bytes")
        self._max_in_flight = max(1, config.get("queued.max.requests"))
        self._reading_paused = False
        self._write_paused = False
        self._closing = False
        self._stats: RequestStats = services.request_stats
        # reasons reading is held besides the two above: a quota mute, a connection limit
        self._holds: set[str] = set()
        self._turn_scheduled = False
        self._unmute = None
        self._limits = services.connection_quotas
        self.quota_ip = None
        self.last_active = monotonic()
        # plaintext TCP: fetch responses may carry file ranges, written by sendfile_writer
        self.zero_copy = False
        self._sending: asyncio.Task | None = None   # a response being written by sendfile_writer
        self._sendfile: sendfile_writer.SendfileWriter | None = None
        # SASL listeners: the authentication state machine (kcompat.security.sasl_server); frames
        # are limited to sasl.server.max.receive.size until the client has authenticated
        self.sasl = services.sasl.session_for(listener_name)
        self._frame_limit_name = "socket.request.max.bytes"
        if self.sasl is not None:
            self._max_request_bytes = min(self._max_request_bytes, self.sasl.settings.max_receive_size)
            self._frame_limit_name = "sasl.server.max.receive.size before authentication"

    # -- asyncio callbacks -----------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.zero_copy = sendfile_writer.zero_copy_capable(transport)
        self.services.connections.add(self)
        self._stats.connections_created += 1
        refused = self._limits.on_open(self, peer[0] if peer else "?")
        if refused is not None:
            self.close(refused)

    def connection_lost(self, exc) -> None:
        self._closing = True
        self.services.connections.discard(self)
        share = self.services.api_services.share
        if share is not None:   # its share sessions go with it (KIP-932)
            share.connection_closed(self)
        self._stats.connections_closed += 1
        self._cancel_send()
        self._drop_pending()
        self._limits.on_close(self)
        if self._unmute is not None:
            self._unmute.cancel()
            self._unmute = None

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the transport reads next (``asyncio.BufferedProtocol``)."""
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were read into the buffer :meth:`get_buffer` gave."""
        self.last_active = monotonic()
        self._frames.received(nbytes)
        self._process_buffer()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        self._process_buffer()

    # -- framing ---------------------------------------------------------------------------------

    def _process_buffer(self) -> None:
        frames = self._frames
        taken = 0
        while not self._closing and frames.unframed_size() and len(self._pending) < self._max_in_flight \
                and not self._holds and self._limits.may_read(self):
            if taken == FRAMES_PER_TURN:
                self._next_turn(frames.unframed_size())
                break
            try:
                frame = frames.next_frame(self._max_request_bytes)  # writable: produce rewrites offsets in place
            except FrameSizeError as e:
                self.close(f"request frame of {e.size} bytes exceeds {self._frame_limit_name} "
                           f"({self._max_request_bytes})")
                return
            if frame is None:
                break
            taken += 1
            self._handle_frame(frame)
        self._update_reading()

    def _next_turn(self, backlog: int) -> None:
        """More frames are buffered than one turn takes: take them on a later turn, and stop
        reading meanwhile if they are many."""
        if backlog > BACKLOG_BYTES:
            self._holds.add(BACKLOG_HOLD)
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        self._turn_scheduled = False
        self._holds.discard(BACKLOG_HOLD)
        self._process_buffer()

    def _update_reading(self) -> None:
        if self._closing or self.transport is None:
            return
        should_pause = self._write_paused or len(self._pending) >= self._max_in_flight or bool(self._holds)
        if should_pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    # -- requests --------------------------------------------------------------------------------

    def _handle_frame(self, frame: bytearray) -> None:
        if len(frame) < 8:
            self.close(f"request frame of {len(frame)} bytes is too short for a request header")
            return
        if self.sasl is not None and self.sasl.intercept(self, frame):
            return   # closed, or a raw SASL token (v0 handshake) handled there
        api_key, version, correlation_id = _HEADER_START.unpack_from(frame, 0)
        api = self.handlers.get(api_key)
        if api_key == API_VERSIONS_KEY and version > api.MAX_VERSION:
            self._kip511_response(correlation_id, version)
            return
        try:
            req_cls, _resp_cls = api_classes(api_key)
        except KeyError:
            self.close(f"unknown API key {api_key}")
            return
        spec_lo, spec_hi = req_cls.VALID_VERSIONS
        if not spec_lo <= version <= spec_hi:
            self.close(f"{req_cls.NAME} version {version} is outside the protocol's range {spec_lo}-{spec_hi}")
            return
        flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
        view = memoryview(frame)
        try:
            header, off = RequestHeader.read(view, 0, 2 if flexible else 1)
        except MALFORMED as e:
            self.close(f"malformed request header: {e}")
            return
        except Exception:
            log.exception("decoder bug: a request header from %s", self.peer)
            self.close("request header decoding failed")
            return
        if api is None:
            self.close(f"{req_cls.NAME} (API key {api_key}) is not supported by kcompat")
            return
        try:
            request, _end = req_cls.read(view, off, version)
        except MALFORMED as e:
            self.close(f"malformed {req_cls.NAME} v{version} (correlation id {correlation_id}): {e}")
            return
        except Exception:
            log.exception("decoder bug: %s v%d from %s", req_cls.NAME, version, self.peer)
            self.close(f"{req_cls.NAME} v{version} decoding failed")
            return
        slot = _Slot(correlation_id, api_key, version, flexible and api_key != API_VERSIONS_KEY)
        slot.received = perf_counter()
        slot.request_bytes = len(frame) + 4
        slot.reserved = self._limits.reserve(self, slot.request_bytes)
        if not self.is_controller_listener and not request_quota_exempt(api_key, request):
            slot.quota_client = header.client_id
        self._pending.append(slot)
        if not api.MIN_VERSION <= version <= api.MAX_VERSION:
            self._respond_error(slot, api, request, ErrorCode.UNSUPPORTED_VERSION)
            return
        if self.sasl is not None and self.sasl.reject_reason is not None:
            # a request other than SaslAuthenticate during SASL authentication: Kafka answers it
            # with ILLEGAL_SASL_STATE, then closes (SaslServerAuthenticator.handleSaslToken)
            self._respond_error(slot, api, request, ErrorCode.ILLEGAL_SASL_STATE)
            asyncio.get_running_loop().call_soon(self.close, self.sasl.reject_reason)
            return
        ctx = RequestContext(self.services.api_services, self, header, version, self.listener_name, slot.request_bytes)
        try:
            result = api.handle(ctx, request)
            slot.handled = perf_counter()
        except Exception:
            log.exception("unexpected error handling %s v%d from %s (client id %r)",
                          req_cls.NAME, version, self.peer, header.client_id)
            self._respond_error(slot, api, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            return
        if result is NO_RESPONSE:
            slot.done = True
            self._flush()
        elif isinstance(result, Completion):
            # answered from inside whatever completes it (kcompat.isr.completion)
            slot.completion = result
            result.add_callback(lambda value, exc, s=slot, a=api, r=request: self._finished(s, a, r, value, exc))
        elif hasattr(type(result), "__await__"):   # a coroutine, task or future
            slot.task = asyncio.ensure_future(result)
            slot.task.add_done_callback(lambda t, s=slot, a=api, r=request: self._task_done(s, a, r, t))
        else:
            self._complete(slot, result)

    def _task_done(self, slot: _Slot, api, request, task) -> None:
        if task.cancelled() or self._closing:
            return
        exc = task.exception()
        self._finished(slot, api, request, None if exc is not None else task.result(), exc)

    def _finished(self, slot: _Slot, api, request, result, exc: BaseException | None) -> None:
        """A handler's later result (a task's or a Completion's): the response, or an error."""
        if self._closing:
            return
        if exc is not None:
            log.error("unexpected error handling API key %d v%d from %s", slot.api_key, slot.version,
                      self.peer, exc_info=exc)
            self._respond_error(slot, api, request, ErrorCode.UNKNOWN_SERVER_ERROR)
            return
        if result is NO_RESPONSE:
            slot.done = True
            self._flush()
        else:
            self._complete(slot, result)

    def _respond_error(self, slot: _Slot, api, request, code: ErrorCode) -> None:
        builder = getattr(api, "error_response", None)
        if builder is None:
            self.close(f"cannot answer API key {slot.api_key} v{slot.version} with {code.name}")
            return
        self._complete(slot, builder(request, slot.version, code))

    def _complete(self, slot: _Slot, response) -> None:
        if self._closing:
            return
        self._throttle(slot, response)
        out = Out()
        out += b"\0\0\0\0"
        out += _I32.pack(slot.correlation_id)
        if slot.flexible_header:
            out.append(0)  # response header v1: empty tagged fields
        try:
            response.write(out, slot.version)
        except Exception:
            log.exception("could not encode the response to API key %d v%d", slot.api_key, slot.version)
            self.close("response encoding failed")
            return
        slot.response_bytes = out.total_size()
        _I32.pack_into(out, 0, slot.response_bytes - 4)
        slot.buffers = out.buffers()
        slot.done = True
        slot.completed = perf_counter()
        slot.response = response
        self._flush()

    def _flush(self) -> None:
        pending = self._pending
        transport = self.transport
        while pending and pending[0].done and self._sending is None:
            slot = pending.popleft()
            self._limits.release(slot.reserved)
            slot.reserved = 0
            if slot.buffers is not None and not self._closing:
                if sendfile_writer.has_file_ranges(slot.buffers):
                    if self._send_file_ranges(slot):
                        continue
                    break
                transport.writelines(slot.buffers)
                self.last_active = monotonic()
                self._record(slot)
        self._update_reading()
        if self._frames.unframed_size() and not self._reading_paused:
            # frames left in the buffer while we were at the in-flight limit
            asyncio.get_running_loop().call_soon(self._process_buffer)

    def _send_file_ranges(self, slot: _Slot) -> bool:
        """Write a response holding file ranges with sendfile (:mod:`kcompat.broker.sendfile_writer`;
        only zero-copy connections get such responses): at once as far as the socket takes it,
        the rest by a task while later responses wait. True if it was all written at once."""
        writer = self._sendfile
        if writer is None:
            writer = self._sendfile = sendfile_writer.SendfileWriter(self.transport)
        try:
            done = writer.start(slot.buffers)
        except OSError as e:
            self._send_failed(e)
            return False
        if done:
            self._file_ranges_written(slot, writer.zero_copied)
            return True
        self._sending = asyncio.ensure_future(writer.finish())
        self._sending.add_done_callback(lambda task, s=slot: self._file_ranges_sent(s, task))
        return False

    def _file_ranges_sent(self, slot: _Slot, task: asyncio.Task) -> None:
        """The task writing the rest of a response with file ranges ended."""
        self._sending = None
        if task.cancelled() or self._closing:
            return
        exc = task.exception()
        if exc is not None:
            self._send_failed(exc)
            return
        self._file_ranges_written(slot, task.result())
        self._flush()

    def _file_ranges_written(self, slot: _Slot, zero_copied: int) -> None:
        slot.buffers = None
        self._stats.zero_copy_responses += 1
        self._stats.zero_copy_bytes += zero_copied
        self.last_active = monotonic()
        self._record(slot)

    def _send_failed(self, exc: BaseException) -> None:
        self.close(f"sending a response with sendfile failed: {exc}")

    def _cancel_send(self) -> None:
        if self._sending is not None:
            self._sending.cancel()
            self._sending = None
        if self._sendfile is not None:
            self._sendfile.close()
            self._sendfile = None

    def _record(self, slot: _Slot) -> None:
        """Request metrics of a response handed to the socket (see :mod:`kcompat.broker.request_stats`)."""
        if not slot.received:
            return
        sent = perf_counter()
        handled = slot.handled or slot.completed
        self._stats.record(slot.api_key, slot.version, slot.request_bytes, slot.response_bytes,
                           slot.response, (handled - slot.received) * 1000.0,
                           max(0.0, slot.completed - handled) * 1000.0, max(0.0, sent - slot.completed) * 1000.0)
        slot.response = None

    def _kip511_response(self, correlation_id: int, version: int) -> None:
        """KIP-511: ApiVersions at an unknown version -> v0 body, UNSUPPORTED_VERSION, our range."""
        api = self.handlers[API_VERSIONS_KEY]
        resp = ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS_KEY, min_version=api.MIN_VERSION,
                                                     max_version=api.MAX_VERSION)])
        slot = _Slot(correlation_id, API_VERSIONS_KEY, 0, False)
        self._pending.append(slot)
        log.info("ApiVersions v%d from %s is newer than ours; answered with KIP-511 downgrade", version,
                 self.peer)
        self._complete(slot, resp)

    # -- SASL (kcompat.security.sasl_server) ----------------------------------------------------

    def authenticated(self, principal) -> None:
        """SASL authentication completed as ``principal``: requests run as it, frames up to
        ``socket.request.max.bytes``."""
        self.principal = principal
        self._max_request_bytes = self.services.config.get("socket.request.max.bytes")
        self._frame_limit_name = "socket.request.max.bytes"

    def send_raw(self, token: bytes) -> None:
        """Send a SASL token framed by its size only (after a v0 SaslHandshake), in order."""
        slot = _Slot(-1, -1, 0, False)
        slot.buffers = [_I32.pack(len(token)), bytes(token)]
        slot.done = True
        self._pending.append(slot)
        self._flush()

    # -- closing ---------------------------------------------------------------------------------

    def close(self, reason: str | None = None) -> None:
        """Close the connection (after logging why); pending responses are dropped."""
        if self._closing:
            return
        self._closing = True
        if reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._cancel_send()
        self._drop_pending()
        self._limits.on_close(self)   # its slot is free before the peer sees the close
        if self.transport is not None:
            self.transport.close()

    def _drop_pending(self) -> None:
        for slot in self._pending:
            self._limits.release(slot.reserved)
            slot.reserved = 0
            if slot.task is not None and not slot.task.done():
                slot.task.cancel()
            if slot.completion is not None:
                slot.completion.cancel()
        self._pending.clear()

    # -- quotas and connection limits (kcompat.broker.quota) --------------------------------------

    def _throttle(self, slot: _Slot, response) -> None:
        """The response's throttle time: what the handler set (byte-rate and mutation quotas)
        and the request_percentage quota for this request's handler time; the channel is muted
        for it (KIP-219)."""
        throttle = getattr(response, "throttle_time_ms", 0) or 0
        if slot.quota_client is not _EXEMPT and slot.received:
            handled = slot.handled or perf_counter()
            request_ms = request_throttle_ms(self.services.api_services, self, slot.quota_client,
                                             handled - slot.received)
            if request_ms > throttle:
                throttle = request_ms
                if hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = throttle
        if throttle > 0:
            self.mute_for(throttle)

    def mute_for(self, throttle_ms: int) -> None:
        """Read no more requests for ``throttle_ms`` (a client over its quota, Kafka's
        ``ThrottledChannel``); responses already due are still sent."""
        if throttle_ms <= 0 or self._closing or self.transport is None:
            return
        loop = asyncio.get_running_loop()
        end = loop.time() + throttle_ms / 1000.0
        if self._unmute is not None:
            if self._unmute.when() >= end:
                return
            self._unmute.cancel()
        self._unmute = loop.call_at(end, self._end_mute)
        self.hold(THROTTLE_HOLD)

    def _end_mute(self) -> None:
        self._unmute = None
        self.unhold(THROTTLE_HOLD)

    def hold(self, reason: str) -> None:
        """Stop reading requests until :meth:`unhold` of ``reason``."""
        self._holds.add(reason)
        self._update_reading()

    def unhold(self, reason: str) -> None:
        """``reason`` no longer holds reading; frames already buffered are processed."""
        if reason not in self._holds:
            return
        self._holds.discard(reason)
        self._update_reading()
        if not self._holds and self._frames.unframed_size() and not self._closing:
            asyncio.get_running_loop().call_soon(self._process_buffer)

    def idle_since(self, deadline: float) -> bool:
        """Nothing in flight, not held, no bytes read or written since ``deadline`` (monotonic s)."""
        return not self._pending and not self._holds and self.last_active < deadline

    def in_flight(self) -> int:
        """Number of requests received whose responses have not been written yet."""
        return len(self._pending) + (self._sending is not None)

    def stop_reading(self) -> None:
        """Graceful shutdown: take no new requests; in-flight ones still get their responses."""
        if self.transport is not None and not self._closing:
            self._max_in_flight = 0
            if not self._reading_paused:
                self.transport.pause_reading()
                self._reading_paused = True
