"""Acknowledged appends survive ``kill -9`` of the process (data is in the page cache when
``append`` returns), and the unclean reopen recovers to exactly a batch boundary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from kcompat.log import Log, LogConfig

from .helpers import NOW, headers

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kcompat.log import Log, LogConfig
    from kcompat.protocol.records import build_batch
    log = Log.open(Path(sys.argv[1]), LogConfig(segment_bytes=20000, index_interval_bytes=500),
                   clean_shutdown=True, now_ms=1)
    i = 0
    while True:
        base = log.log_end_offset
        b = build_batch([(1000 + i, None, b"v" * (50 + i % 300), ())] * 3, base_offset=base)
        log.append(b, last_offset=base + 2, max_timestamp=1000 + i, offset_of_max_timestamp=base,
                   now_ms=1000 + i)
        if i % 50 == 0:
            log.maybe_flush(1000 + i)
        sys.stdout.write(f"{log.log_end_offset}\\n")
        sys.stdout.flush()
        i += 1
""")


def test_kill9_keeps_acknowledged_appends(tmp_path):
    d = tmp_path / "t-0"
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], stdout=subprocess.PIPE,
                            env=env, text=True)
    acked = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked = int(line)
            if acked >= 3000:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert acked >= 3000
    log = Log.open(d, LogConfig(segment_bytes=20000, index_interval_bytes=500), recovery_point=0,
                   clean_shutdown=False, now_ms=NOW)
    assert log.log_end_offset >= acked
    assert len(log.segments) > 5
    offset = 0
    while offset < log.log_end_offset:
        hs = headers(log.read(offset, 100_000))
        assert hs[0].base_offset == offset
        offset = hs[-1].next_offset
    assert offset == log.log_end_offset
