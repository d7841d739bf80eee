"""Property tests (hypothesis): random appends, rolls, reads, truncations and reopenings."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.log import Log, LogConfig, OffsetOutOfRangeError
from kcompat.protocol.records import iter_batches

from .helpers import NOW, make_batch

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 6), st.integers(0, 300)),
        st.tuples(st.just("read"), st.integers(0, 200), st.integers(0, 3000),
                  st.booleans(), st.one_of(st.none(), st.integers(0, 200))),
        st.tuples(st.just("truncate"), st.integers(0, 200)),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("delete_before"), st.integers(0, 200)),
    ),
    min_size=1, max_size=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, segment_bytes=st.integers(200, 3000), interval=st.integers(0, 600))
def test_random_appends_and_reads(ops, segment_bytes, interval):
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    root = Path(tempfile.mkdtemp())
    try:
        log = Log.open(root / "p-0", cfg, clean_shutdown=True, now_ms=NOW)
        model: list[bytes] = []          # batches in the log, in order
        start = 0
        for op in ops:
            if op[0] == "append":
                _, n, size = op
                b = make_batch(log.log_end_offset, n, value_size=size)
                log.append(b, last_offset=log.log_end_offset + n - 1, max_timestamp=NOW,
                           offset_of_max_timestamp=log.log_end_offset, now_ms=NOW)
                model.append(b)
            elif op[0] == "read":
                _, offset, max_bytes, min_one, max_offset = op
                leo = log.log_end_offset
                if offset < start or offset > leo:
                    try:
                        log.read(offset, max_bytes)
                    except OffsetOutOfRangeError:
                        continue
                    raise AssertionError("expected OffsetOutOfRangeError")
                data = log.read(offset, max_bytes, min_one_batch=min_one, max_offset=max_offset)
                hs = [h for _p, h in iter_batches(data)]
                assert sum(h.size for h in hs) == len(data)          # whole batches only
                if offset == leo:
                    assert data == b""
                    continue
                # the batch that contains (or first follows) offset
                first = next(i for i, b in enumerate(model)
                             if _hdr(b).last_offset >= offset)
                if hs:
                    assert data == b"".join(model[first:first + len(hs)])
                    assert hs[0].base_offset <= offset or hs[0].base_offset == _hdr(model[first]).base_offset
                    assert len(data) <= max_bytes or (min_one and len(hs) == 1)
                    if max_offset is not None:
                        assert all(h.base_offset < max_offset for h in hs)
                else:
                    blocked = max_offset is not None and _hdr(model[first]).base_offset >= max_offset
                    assert blocked or (not min_one and len(model[first]) > max_bytes)
            elif op[0] == "truncate":
                target = op[1]
                if log.truncate_to(target):
                    model = [b for b in model if _hdr(b).last_offset < target]
                    leo = _hdr(model[-1]).next_offset if model else None
                    if leo is None or leo < log.log_end_offset:
                        pass
                    start = min(start, log.log_end_offset)
                    if not model:
                        start = min(start, log.log_end_offset)
            elif op[0] == "delete_before":
                target = min(op[1], log.log_end_offset)
                start = log.delete_records_before(target)
                assert start == max(target, start)
            else:
                clean = op[1]
                lso, leo = log.log_start_offset, log.log_end_offset
                if clean:
                    log.close()
                else:
                    log.flush()
                    log.close_without_flush()
                log = Log.open(root / "p-0", cfg, clean_shutdown=clean, now_ms=NOW,
                               log_start_offset=lso, recovery_point=0)
                assert log.log_end_offset == leo
            assert log.size_in_bytes == sum(s.size for s in log.segments)
            assert log.log_start_offset == start
            # the model's bytes are exactly the files' bytes
            disk = b"".join(s.log_path.read_bytes() for s in log.segments)
            kept = b"".join(b for b in model if _hdr(b).base_offset >= log.segments[0].base_offset)
            assert disk == kept
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _hdr(b: bytes):
    return next(iter_batches(b))[1]
