"""Zero-copy responses on plaintext connections: a response whose records include file ranges
(:class:`kcompat.log.FileRecords`, from fetches) is written by this module straight to the
socket, the encoded bytes with ``writev`` and each file range with ``os.sendfile``, in order, so
that record bytes go from the page cache to the socket without entering Python (Kafka's
``FileRecords.writeTo`` / ``transferTo``).

asyncio's ``loop.sendfile`` needs a selector-loop socket transport; uvloop's transports have no
sendfile, so the write is done here on a duplicate of the connection's socket fd:

- the connection hands over a response only when all earlier responses are written (responses
  leave in request order) and holds back later ones until this one is done;
- :meth:`SendfileWriter.start` writes at once, in the caller's turn of the event loop, as much as
  the socket takes (usually the whole response: no task, no later turn); :meth:`SendfileWriter.finish`
  writes the rest, waiting as needed;
- the transport's own write buffer is drained first (its bytes go before ours);
- a full socket buffer (EAGAIN) waits for the socket to become writable (``loop.add_writer`` on
  the duplicate fd), which is the back-pressure: nothing is read or buffered meanwhile;
- no ``TCP_CORK``, no ``MSG_MORE`` on the bytes before a range and no larger send buffer: on this
  project's 2-core machine each measured slower (consuming 1 KiB records from one broker;
  ``MSG_MORE``, which sends the response header with the range's first bytes instead of in a
  packet of its own: 9% more broker CPU per GB and 4% fewer MB/s, medians of 20 alternating pairs
  of passes);
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
    """Writes the responses holding file ranges of one connection, one at a time, on a duplicate
    of its socket fd made at the first such response and closed by :meth:`close` (the
    connection's end: until then the duplicate keeps the socket open).

    A response is ``buffers``: bytes-like parts and :class:`FileRecords`, in order. :meth:`start`
    takes it and writes what the socket takes now; if that was not all of it, :meth:`finish`
    writes the rest. :attr:`zero_copied` is then the bytes of the response sent by sendfile."""

    __slots__ = ("transport", "sock", "zero_copied", "_parts", "_next", "_sent")

    def __init__(self, transport) -> None:
        self.transport = transport
        self.sock: socket.socket | None = None
        self.zero_copied = 0
        self._parts: list = []     # the response's non-empty parts
        self._next = 0             # index of the first part not wholly sent
        self._sent = 0             # bytes of that part sent

    def start(self, buffers: list) -> bool:
        """Take a response (the previous one must be done) and write as much of it as the socket
        takes without waiting. True if all of it was written; else call :meth:`finish`. Raises
        OSError (the peer went away, :class:`RangeTruncated`)."""
        if self.sock is None:
            self.sock = socket.socket(fileno=os.dup(self.transport.get_extra_info("socket").fileno()))
            self.sock.setblocking(False)   # as the transport's (the flag is shared by both fds)
        self._parts = [part for part in buffers if type(part) is FileRecords or len(part)]
        self._next = self._sent = self.zero_copied = 0
        if self.transport.get_write_buffer_size():
            return False   # the transport's own bytes go first (finish)
        return self._advance()

    async def finish(self) -> int:
        """Write the rest of the response :meth:`start` took, waiting for the socket as needed;
        returns :attr:`zero_copied`. Raises OSError as :meth:`start`."""
        loop = asyncio.get_running_loop()
        while self.transport.get_write_buffer_size():
            await _writable(loop, self.sock)
            await asyncio.sleep(0)   # the transport writes its buffer on the same wake-up
        while not self._advance():   # after a full socket in start(), one more EAGAIN first
            await _writable(loop, self.sock)
        return self.zero_copied

    def close(self) -> None:
        """Stop watching, close the duplicate fd and the ranges not sent (a write in progress is
        cancelled by the caller)."""
        self._release()
        if self.sock is not None:
            sock, self.sock = self.sock, None
            asyncio.get_running_loop().remove_writer(sock.fileno())
            sock.close()

    def _advance(self) -> bool:
        """Write parts from ``_next`` on until done (True) or the socket is full (False)."""
        parts = self._parts
        try:
            while self._next < len(parts):
                part = parts[self._next]
                sent = self._send_range(part) if type(part) is FileRecords else self._send_buffers()
                if not sent:
                    return False
        except BaseException:
            self._release()
            raise
        self._parts = []
        return True

    def _send_buffers(self) -> bool:
        """Send the run of bytes-like parts at ``_next`` in one ``sendmsg``; False if the
        socket took none of it."""
        parts = self._parts
        end = self._next
        while end < len(parts) and type(parts[end]) is not FileRecords and end - self._next < IOV_MAX:
            end += 1
        views = [memoryview(part).cast("B") for part in parts[self._next:end]]
        views[0] = views[0][self._sent:]
        try:
            n = self.sock.sendmsg(views)
        except BlockingIOError:
            return False
        for view in views:
            if n < len(view):
                self._sent += n
                return True
            n -= len(view)
            self._next += 1
            self._sent = 0
        return True

    def _send_range(self, records: FileRecords) -> bool:
        """sendfile the range at ``_next`` (or send its detached copy), closing it once sent;
        False if the socket is full before its end."""
        size = len(records)
        out = self.sock.fileno()
        while self._sent < size:
            try:
                if records.data is not None:   # detached before a truncation: send the copy
                    n = self.sock.sendmsg([memoryview(records.data)[self._sent:]])
                else:
                    n = os.sendfile(out, records.fd, records.position + self._sent, size - self._sent)
                    if n == 0:
                        raise RangeTruncated(f"{records} ended after {self._sent} of {size} bytes")
                    self.zero_copied += n
            except BlockingIOError:
                return False
            self._sent += n
        records.close()
        self._next += 1
        self._sent = 0
        return True

    def _release(self) -> None:
        """Close the ranges of the response not sent yet (a failed or abandoned write)."""
        for part in self._parts[self._next:]:
            if type(part) is FileRecords:
                part.close()
        self._parts = []


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
