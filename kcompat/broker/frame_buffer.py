"""The receive side of Kafka's framing (an int32 size, then that many bytes) for an
``asyncio.BufferedProtocol``: the transport reads into the buffers :meth:`FrameBuffer.get_buffer`
gives, and complete frames come out as writable ``bytearray`` objects of exactly their size.

- Small frames are read into a receive buffer of ``receive_buffer`` bytes and copied out of it.
  A connection holds that buffer only while it has bytes not framed yet: once every received
  byte is taken, the buffer goes back to a pool that the next read of any connection takes it
  from. An idle connection holds none (as Kafka's ``NetworkReceive``, which holds only the 4
  bytes of the next size), and a busy one does not allocate per read.
- A frame that does not fit is read straight into a buffer of its own, so its bytes go from the
  socket to the buffer it is decoded from with no copy in Python (a produced 1 MB batch on the
  broker, a follower's fetch response). That buffer is allocated whole up to ``upfront`` bytes
  and above that grown (doubled, one copy) as the bytes come, so that a peer announcing a large
  frame and sending nothing makes the receiver allocate at most ``upfront`` (Kafka's
  ``NetworkReceive`` allocates the announced size, up to its limit).
- A buffer the transport may still hold a view of is never resized: buffers are replaced.

Before this, the transport's chunks (uvloop reads up to 256 KiB at a time) were copied into each
large frame, which was 16% of the broker's CPU when producing 100 B records.
"""

from __future__ import annotations

import struct

_I32 = struct.Struct(">i")

RECEIVE_BUFFER = 16 * 1024
MIN_READ = 4096          # less free space than this at the end: move what is left to the front
FRAME_UPFRONT = 2 * 1024 * 1024
POOL_MAX = 64            # empty receive buffers kept for reuse, per size

# size -> empty receive buffers of that size. A buffer is in the pool or held by one FrameBuffer,
# never both; list.append and list.pop are atomic, so event loops in several threads may share it.
_pool: dict[int, list[bytearray]] = {}


def _take(size: int) -> bytearray:
    try:
        return _pool[size].pop()
    except (KeyError, IndexError):
        return bytearray(size)


def _give_back(buf: bytearray) -> None:
    free = _pool.setdefault(len(buf), [])
    if len(free) < POOL_MAX:
        free.append(buf)


class FrameSizeError(ValueError):
    """A frame size below 0 or above the limit; ``size`` is what the peer announced."""

    def __init__(self, size: int) -> None:
        super().__init__(f"frame of {size} bytes")
        self.size = size


class FrameBuffer:
    """Received bytes not yet framed are ``_rbuf[_start:_end]`` (``_rbuf`` is None while there
    are none); a frame too large for ``_rbuf`` is received into ``_frame`` (``_frame_size``
    bytes, ``_filled`` so far) and, once complete, waits in ``_ready`` for :meth:`next_frame`,
    ahead of the bytes received after it."""

    __slots__ = ("_receive_buffer", "_upfront", "_rbuf", "_start", "_end", "_frame", "_frame_size", "_filled",
                 "_ready")

    def __init__(self, receive_buffer: int = RECEIVE_BUFFER, upfront: int = FRAME_UPFRONT) -> None:
        self._receive_buffer = receive_buffer
        self._upfront = upfront
        self._rbuf: bytearray | None = None
        self._start = self._end = 0
        self._frame: bytearray | None = None
        self._frame_size = self._filled = 0
        self._ready: bytearray | None = None

    def get_buffer(self) -> memoryview:
        """Where the transport reads next: the rest of a large frame's own buffer, else the free
        end of the receive buffer (never empty)."""
        frame = self._frame
        if frame is not None:
            return memoryview(frame)[self._filled:]
        buf = self._rbuf
        if buf is None:
            buf = self._rbuf = _take(self._receive_buffer)
        elif len(buf) - self._end < MIN_READ:
            # move the unframed bytes to the front; into a buffer twice as large if they fill more
            # than half of it (whole frames the caller has not taken yet; back to receive_buffer
            # once they are). Either frees half a buffer at least: each byte is moved about once.
            unframed = self._end - self._start
            if unframed > len(buf) // 2:
                self._rbuf = bytearray(2 * len(buf))
            self._rbuf[:unframed] = buf[self._start:self._end]
            buf = self._rbuf
            self._start, self._end = 0, unframed
        return memoryview(buf)[self._end:]

    def received(self, nbytes: int) -> None:
        """``nbytes`` were read into the last :meth:`get_buffer`; take the frames they complete
        with :meth:`next_frame`."""
        if self._frame is None:
            self._end += nbytes
            return
        self._filled += nbytes
        if self._filled == self._frame_size:
            self._ready, self._frame = self._frame, None
        elif self._filled == len(self._frame):   # above ``upfront``: grow as it comes
            grown = bytearray(min(self._frame_size, 2 * self._filled))
            grown[:self._filled] = self._frame
            self._frame = grown

    def next_frame(self, max_size: int) -> bytearray | None:
        """The next complete frame (without its size; a small one is a copy), or None until one
        is complete. Raises :class:`FrameSizeError` for a size below 0 or above ``max_size``
        (bytes)."""
        ready = self._ready
        if ready is not None:
            self._ready = None
            return ready
        if self._frame is not None:
            return None
        buf = self._rbuf
        pos, end = self._start, self._end
        if buf is None or end - pos < 4:
            return None
        size = _I32.unpack_from(buf, pos)[0]
        if size < 0 or size > max_size:
            raise FrameSizeError(size)
        if end - pos - 4 < size:
            if size + 4 > len(buf):   # it cannot fit: receive the rest into its own buffer
                n = end - pos - 4
                frame = bytearray(size if size <= self._upfront else min(size, max(self._upfront, 2 * n)))
                frame[:n] = memoryview(buf)[pos + 4:end]
                self._frame, self._frame_size, self._filled = frame, size, n
                self._emptied()
            return None
        frame = buf[pos + 4:pos + 4 + size]
        pos += 4 + size
        if pos == end:
            self._emptied()
        else:
            self._start = pos
        return frame

    def unframed_size(self) -> int:
        """Bytes received and not taken yet, whole frames possibly among them (0: nothing to take)."""
        return self._end - self._start + (len(self._ready) if self._ready is not None else 0)

    def unframed(self) -> bytes:
        """A copy of the received bytes not framed yet (for checks and tests)."""
        return bytes(self._rbuf[self._start:self._end]) if self._rbuf is not None else b""

    def holds_receive_buffer(self) -> bool:
        """True while a receive buffer is held (bytes not framed yet, or a read under way)."""
        return self._rbuf is not None

    def _emptied(self) -> None:
        """Every received byte is taken: the receive buffer goes back to the pool (one that grew
        for frames that are taken now is dropped)."""
        self._start = self._end = 0
        buf, self._rbuf = self._rbuf, None
        if buf is not None and len(buf) == self._receive_buffer:
            _give_back(buf)
