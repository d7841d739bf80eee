"""Zero-copy responses on plaintext connections: a response whose records include file ranges
(:class:`kcompat.log.FileRecords`, from fetches) is written by this module straight to the
socket, the encoded bytes with ``writev`` and each file range with ``os.sendfile``, in order, so
that record bytes go from the page cache to the socket without entering Python (Kafka's
``FileRecords.writeTo`` / ``transferTo``).

asyncio's ``loop.sendfile`` needs a selector-loop socket transport; uvloop's transports have no
sendfile, so the write is done here on a duplicate of the connection's socket fd:

- the connection hands over a response only when all earlier responses are written (responses
  leave in request order) and holds back later ones until this one is done;
- the transport's own write buffer is drained first (its bytes go before ours);
- a full socket buffer (EAGAIN) waits for the socket to become writable (``loop.add_writer`` on
  the duplicate fd), which is the back-pressure: nothing is read or buffered meanwhile;
- no ``TCP_CORK`` and no larger send buffer: on this project's 2-core machine both measured slower
  (bench/vs_kafka.py, 1 KiB consume);
- a range that ended early (its file was truncated without detaching it: never expected) raises
  :class:`RangeTruncated`, and the connection is closed, as Kafka does ("Size of FileRecords has
  been truncated during write"), since the response's sizes were already sent.

Closing the connection cancels the write and closes the duplicate fd.
"""

from __future__ import annotations

import asyncio
import os
import socket

from kcompat.log import FileRecords

IOV_MAX = 1024


class RangeTruncated(OSError):
    """A file range ended before all its bytes were sent."""


def has_file_ranges(buffers: list) -> bool:
    return any(type(b) is FileRecords for b in buffers)


def zero_copy_capable(transport) -> bool:
    """True for a plaintext TCP transport (TLS rewrites every byte: no sendfile)."""
    if transport is None or transport.get_extra_info("sslcontext") is not None:
        return False
    sock = transport.get_extra_info("socket")
    return sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6)


class SendfileWriter:
    """Writes the responses holding file ranges of one connection, on a duplicate of its socket
    fd made at the first such response and closed by :meth:`close` (the connection's end: until
    then the duplicate keeps the socket open)."""

    __slots__ = ("transport", "sock")

    def __init__(self, transport) -> None:
        self.transport = transport
        self.sock: socket.socket | None = None

    async def write(self, buffers: list) -> int:
        """Write ``buffers`` (bytes-like and FileRecords, in order) to the socket; returns the
        bytes sent by sendfile. Raises OSError (the peer went away, :class:`RangeTruncated`)."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        if sock is None:
            sock = self.sock = socket.socket(fileno=os.dup(self.transport.get_extra_info("socket").fileno()))
            sock.setblocking(False)   # as the transport's (the flag is shared by both fds)
        while self.transport.get_write_buffer_size():
            await _writable(loop, sock)
            await asyncio.sleep(0)   # the transport writes its buffer on the same wake-up
        zero_copied = 0
        pending: list = []
        for part in buffers:
            if type(part) is FileRecords:
                await _writev(loop, sock, pending)
                pending = []
                zero_copied += await _send_range(loop, sock, part)
            elif len(part):
                pending.append(part)
        await _writev(loop, sock, pending)
        return zero_copied

    def close(self) -> None:
        """Stop watching and close the duplicate fd (a write in progress is cancelled by the caller)."""
        if self.sock is not None:
            sock, self.sock = self.sock, None
            asyncio.get_running_loop().remove_writer(sock.fileno())
            sock.close()


async def _writable(loop, sock: socket.socket) -> None:
    fd = sock.fileno()
    ready = loop.create_future()

    def on_writable() -> None:
        loop.remove_writer(fd)
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, on_writable)
    try:
        await ready
    finally:
        if not ready.done() and sock.fileno() >= 0:   # cancelled, the socket still open
            loop.remove_writer(fd)


async def _writev(loop, sock: socket.socket, buffers: list) -> None:
    views = [memoryview(b).cast("B") for b in buffers]
    while views:
        try:
            n = sock.sendmsg(views[:IOV_MAX])
        except BlockingIOError:
            await _writable(loop, sock)
            continue
        while n:
            if n >= len(views[0]):
                n -= len(views.pop(0))
            else:
                views[0] = views[0][n:]
                n = 0


async def _send_range(loop, sock: socket.socket, records: FileRecords) -> int:
    """sendfile the range (or write its detached copy); returns the bytes sent by sendfile."""
    size = len(records)
    sent = 0
    out = sock.fileno()
    try:
        while sent < size:
            if records.data is not None:   # detached before a truncation: send the copy
                await _writev(loop, sock, [memoryview(records.data)[sent:]])
                return sent
            try:
                n = os.sendfile(out, records.fd, records.position + sent, size - sent)
            except BlockingIOError:
                await _writable(loop, sock)
                continue
            if n == 0:
                raise RangeTruncated(f"{records} ended after {sent} of {size} bytes")
            sent += n
        return sent
    finally:
        records.close()
