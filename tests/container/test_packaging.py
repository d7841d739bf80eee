"""``pip install .`` (what the image's Dockerfile runs) builds kcompat without a deprecation warning
from setuptools: the ``project.license`` table warned in every container build (issue 24)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.container.images import ROOT


def test_building_the_project_prints_no_setuptools_deprecation_warning(tmp_path):
    src = tmp_path / "src"      # what the Dockerfile copies: the build leaves the checkout untouched
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, src / name)
    shutil.copytree(ROOT / "kcompat", src / "kcompat", ignore=shutil.ignore_patterns("__pycache__"))
    # -v: pip shows the build backend's output (setuptools' warnings) only when verbose
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--disable-pip-version-check",
                             "-w", str(tmp_path / "wheel"), str(src)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Building wheel for kcompat" in output                     # the backend's output is there
    deprecations = [line for line in output.splitlines() if "deprecat" in line.lower()]
    assert not deprecations, "\n".join(deprecations)
    assert [p.name.split("-")[0] for p in (tmp_path / "wheel").glob("*.whl")] == ["kcompat"]
