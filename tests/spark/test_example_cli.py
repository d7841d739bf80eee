"""``python3 -m spark_it``, the README's command, against a kcompat broker: it generates live page
views, runs the pipeline in its own Spark process and prints the aggregates it reads back."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.spark.support import consume_all, unique

ROOT = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z \.\. \d\d:\d\d:\d\d\.000Z  (/\S*) +views=(\d+) +users=(\d+)$")


def test_example_pipeline_command(bootstrap, tmp_path):
    in_topic, out_topic = unique("cli-views"), unique("cli-counts")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "spark_it", "--bootstrap", bootstrap, "--in-topic", in_topic, "--out-topic", out_topic,
         "--checkpoint", str(tmp_path / "cp"), "--seconds", "9", "--rate", "50",
         "--window-seconds", "4", "--watermark-seconds", "1", "--trigger-seconds", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [m.groups() for line in proc.stdout.splitlines() if (m := LINE.match(line))]
    assert printed, proc.stdout[-2000:]
    assert re.search(r"generator: wrote \d+ page views", proc.stdout)
    # what it printed is what the output topic holds
    out = consume_all(bootstrap, out_topic, [0], isolation="read_committed")
    assert len(out) == len(printed) and all(int(v) >= int(u) >= 1 for _, v, u in printed)
