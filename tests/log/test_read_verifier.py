"""kcompat.log.verify.ReadVerifier: the ranges it reports as checked are exactly the batches it
checked, whatever the order of the reads (hypothesis against a plain set of checked batches)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.log.verify import ReadVerifier
from kcompat.protocol.records import build_batch


def segment(n: int, bad: set[int]) -> tuple[bytes, list[int]]:
    """``n`` batches back to back (those in ``bad`` with a flipped byte); their start positions."""
    out, starts = bytearray(), []
    for i in range(n):
        b = bytearray(build_batch([(1, b"k", b"v" * (10 + 7 * i), ())], base_offset=i))
        if i in bad:
            b[-1] ^= 1
        starts.append(len(out))
        out += b
    return bytes(out), starts


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 12), bad=st.sets(st.integers(0, 11), max_size=3),
       reads=st.lists(st.tuples(st.integers(0, 11), st.integers(1, 12)), min_size=1, max_size=12),
       trusted_from=st.integers(0, 12))
def test_reads_in_any_order(n, bad, reads, trusted_from):
    data, starts = segment(n, bad)
    ends = starts[1:] + [len(data)]
    u = starts[trusted_from] if trusted_from < n else len(data)   # bytes from u on are trusted
    v = ReadVerifier(u)
    checked: set[int] = set()
    for first, count in reads:
        first = min(first, n - 1)
        last = min(n, first + count) - 1
        pos, end = starts[first], ends[last]
        if not v.needs_check(pos, end):
            assert all(i in checked or starts[i] >= u for i in range(first, last + 1))
            continue
        good, problem = v.check(data[pos:end], pos)
        stop = next((i for i in range(first, last + 1) if i in bad and starts[i] < u), None)
        if stop is None:
            assert problem is None and good == end - pos
            checked.update(i for i in range(first, last + 1) if starts[i] < u)
        else:
            assert problem is not None and good == starts[stop] - pos
            checked.update(range(first, stop))
        for i in range(n):     # the verifier's idea of "checked" never covers a bad batch
            if starts[i] < u and not v.needs_check(starts[i], ends[i]):
                assert i not in bad or starts[i] >= u
