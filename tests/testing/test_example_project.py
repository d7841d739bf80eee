"""examples/pytest-kafka: an application's test suite that uses the kcompat pytest plugin runs as
its README says (``python3 -m pytest`` in its directory) and passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pytest-kafka"


def test_example_project_passes_with_the_plugin():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KCOMPAT_"))}
    # this checkout's kcompat, whatever checkout an editable install points at (the entry point
    # comes from the installed distribution)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA"],
                            cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    for test in ("kafka_python", "confluent_kafka", "aiokafka", "survives_the_leaders_crash"):
        assert any(line.startswith("PASSED") and test in line for line in result.stdout.splitlines()), \
            result.stdout[-4000:]
    assert "4 passed" in result.stdout
