"""Project-level checks: layering contracts, generated code vs. specs, README vs. ApiVersions, CI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT.parent / "shared" / "kafka-specs"


def test_import_layering_contracts_hold():
    """DESIGN.md section 2: protocol imports nothing else; log only records/compression; no
    asyncio/socket in protocol and log; state machines never import the broker."""
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(linter)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower() or "0 broken" in result.stdout.lower()


def test_generated_protocol_matches_specs_or_is_complete():
    """With ../shared/kafka-specs present, the committed generated code must match it exactly;
    without it (a clone outside the workspace), every generated package must at least import."""
    if (SPECS / "message").is_dir():
        result = subprocess.run([sys.executable, "tools/gen_protocol.py", "--check", "--specs", str(SPECS)],
                                cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
    from kcompat.protocol.messages import API_TABLE, api_classes
    for key in API_TABLE:
        req, resp = api_classes(key)
        assert req.API_KEY == key and resp.API_KEY == key


def _readme_table() -> list[tuple[str, int, int, int]]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Supported APIs", 1)[1]
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)(?:-(\d+))? \|$", section, re.M)
    return [(name, int(k), int(lo), int(hi or lo)) for name, k, lo, hi in rows]


def test_readme_api_table_matches_live_api_versions(broker):
    """The README table is what a real ApiVersions v3 request to a running broker returns."""
    from kcompat.testing.wire import api_versions
    live = api_versions(broker.bootstrap)
    from kcompat.protocol.messages import API_NAMES
    expected = [(API_NAMES[k], k, lo, hi) for k, lo, hi in sorted(live)]
    assert _readme_table() == expected


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = ("sh tools/install_kcat.sh && sh tools/install_docker.sh && sh tools/install_chromium.sh && "
               "python3 -m pip install -e '.[test]' && python3 -m pytest")
    assert command in readme and command in ci
