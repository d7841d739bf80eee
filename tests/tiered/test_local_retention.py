"""Local retention of a tiered log (KIP-405): only segments already in remote storage go, the
log start offset stays, the local log start offset moves; reads below it are refused locally."""

from __future__ import annotations

import pytest

from kcompat.log import Log, LogConfig
from kcompat.log.errors import OffsetOutOfRangeError
from tests.log.helpers import NOW, append, offsets


def _tiered_log(tmp_path, **cfg) -> Log:
    config = LogConfig(segment_bytes=300, remote_storage_enable=True, **cfg)
    return Log.open(tmp_path / "t-0", config, clean_shutdown=True, now_ms=NOW)


def test_local_retention_waits_for_the_copy_and_keeps_the_log_start(tmp_path):
    log = _tiered_log(tmp_path, local_retention_bytes=0)
    for _ in range(20):
        append(log, 2, value_size=40)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 4
    assert log.apply_retention(NOW, high_watermark=log.log_end_offset) == 0   # nothing copied yet
    log.update_highest_offset_in_remote_storage(bases[3] - 1)                # the first 3 segments are
    assert log.apply_retention(NOW, high_watermark=log.log_end_offset) == 3
    assert log.log_start_offset == 0
    assert log.local_log_start_offset == bases[3]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20)
    assert offsets(log.read(bases[3], 1 << 20))[0] == bases[3]


def test_local_retention_ms_defaults_to_retention_ms(tmp_path):
    log = _tiered_log(tmp_path, retention_ms=1000)
    for _ in range(10):
        append(log, 2, value_size=40)
    first_next = log.segments[1].base_offset
    log.update_highest_offset_in_remote_storage(log.log_end_offset - 1)
    assert log.apply_retention(NOW + 10_000, high_watermark=log.log_end_offset) >= 1
    assert log.log_start_offset == 0 and log.local_log_start_offset >= first_next


def test_tiered_log_start_survives_a_restart(tmp_path):
    log = _tiered_log(tmp_path, local_retention_bytes=0)
    for _ in range(20):
        append(log, 2, value_size=40)
    log.update_highest_offset_in_remote_storage(log.segments[2].base_offset - 1)
    log.apply_retention(NOW, high_watermark=log.log_end_offset)
    local_start = log.local_log_start_offset
    log.close()
    again = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300, remote_storage_enable=True),
                     log_start_offset=0, clean_shutdown=True, now_ms=NOW)
    assert (again.log_start_offset, again.local_log_start_offset) == (0, local_start)
    again.close()


def test_a_log_that_is_not_tiered_ignores_the_remote_offset(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300, retention_bytes=0), clean_shutdown=True, now_ms=NOW)
    for _ in range(10):
        append(log, 2, value_size=40)
    log.update_highest_offset_in_remote_storage(5)
    assert log.highest_offset_in_remote_storage == -1
    log.apply_retention(NOW, high_watermark=log.log_end_offset)
    assert log.log_start_offset == log.local_log_start_offset == log.segments[0].base_offset
