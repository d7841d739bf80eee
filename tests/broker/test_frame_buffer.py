"""kcompat.broker.frame_buffer.FrameBuffer against any stream of frames cut into any reads: the
frames come out whole, in order, as writable copies; oversized and negative sizes raise
FrameSizeError; a frame announced but not sent allocates at most ``upfront`` bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from kcompat.broker.frame_buffer import FrameBuffer, FrameSizeError


def feed(fb: FrameBuffer, data: bytes, reads: list[int], max_size: int = 1 << 30) -> list[bytes]:
    """Deliver ``data`` in reads of at most the sizes in ``reads`` (cycled), taking every frame
    as soon as it is complete; returns the frames."""
    out: list[bytes] = []
    pos = i = 0
    while pos < len(data):
        with fb.get_buffer() as buf:
            assert len(buf) > 0
            n = min(len(buf), reads[i % len(reads)], len(data) - pos)
            buf[:n] = data[pos:pos + n]
        pos += n
        i += 1
        fb.received(n)
        while (frame := fb.next_frame(max_size)) is not None:
            out.append(frame)
    return out


def framed(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 1, 3, 100, 4000, 9000, 16380, 16381, 20000, 70000]), max_size=12),
       reads=st.lists(st.integers(1, 40000), min_size=1, max_size=5),
       small=st.sampled_from([64, 1024, 16384]), upfront=st.sampled_from([1, 5000, 1 << 20]))
def test_frames_come_out_whole_and_in_order(sizes, reads, small, upfront):
    pattern = bytes(range(256)) * (70000 // 256 + 2)
    bodies = [pattern[i % 256:i % 256 + s] for i, s in enumerate(sizes)]   # each its own bytes
    fb = FrameBuffer(receive_buffer=small, upfront=upfront)
    got = feed(fb, framed(bodies), reads)
    assert got == bodies
    assert all(type(f) is bytearray for f in got)
    assert fb.unframed_size() == 0


def test_frames_waiting_to_be_taken_grow_the_buffer_then_it_shrinks():
    fb = FrameBuffer(receive_buffer=8192)
    data = framed([bytes([i % 256]) * 10 for i in range(2000)])   # 28 KB of whole frames, none taken
    pos = 0
    while pos < len(data):
        with fb.get_buffer() as buf:
            n = min(len(buf), len(data) - pos)
            buf[:n] = data[pos:pos + n]
        pos += n
        fb.received(n)
    assert fb.unframed_size() == len(data)
    assert [fb.next_frame(100) for _ in range(2000)] == [bytearray([i % 256]) * 10 for i in range(2000)]
    assert fb.next_frame(100) is None
    with fb.get_buffer() as buf:
        assert len(buf) == 8192                      # back to the receive buffer's size


@pytest.mark.parametrize("size", [-1, 101])
def test_sizes_out_of_range_raise(size):
    fb = FrameBuffer()
    with fb.get_buffer() as buf:
        buf[:4] = struct.pack(">i", size)
    fb.received(4)
    with pytest.raises(FrameSizeError) as e:
        fb.next_frame(100)
    assert e.value.size == size


def test_an_announced_frame_allocates_at_most_upfront():
    fb = FrameBuffer(receive_buffer=1024, upfront=4096)
    with fb.get_buffer() as buf:
        buf[:6] = struct.pack(">i", 10_000_000) + b"ab"
    fb.received(6)
    assert fb.next_frame(1 << 30) is None
    with fb.get_buffer() as buf:
        assert len(buf) == 4096 - 2                  # the rest of the first 4 KiB, not 10 MB


def test_a_receive_buffer_is_held_only_while_bytes_wait_to_be_framed():
    """An idle connection holds no receive buffer: it goes back to the pool once every byte is
    taken, and the next read (of any connection) takes it from there."""
    fb = FrameBuffer(receive_buffer=4096)
    assert not fb.holds_receive_buffer()
    data = framed([b"a" * 10, b"b" * 20])
    assert feed(fb, data[:-5], [1000]) == [b"a" * 10]
    assert fb.holds_receive_buffer()                 # the second frame is not whole yet
    assert feed(fb, data[-5:], [1000]) == [b"b" * 20]
    assert not fb.holds_receive_buffer()
    other = FrameBuffer(receive_buffer=4096)
    assert feed(other, framed([b"c" * 30]), [7]) == [b"c" * 30]
    assert not other.holds_receive_buffer()
