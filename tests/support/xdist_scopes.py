"""How pytest-xdist splits the suite between its workers (``-n 2``, pyproject.toml).

A unit of work is a test file, so that a file's module-scoped broker starts once; all Spark tests
are one unit, since they share one session-scoped SparkSession and broker, and two JVMs resolving
the connector into one Ivy cache at once would race. Built on xdist's LoadScopeScheduling rather
than ``--dist loadgroup`` markers: that scheduler learns groups by rewriting node ids, which
pytest 9.2's structured node ids ignore (pytest-xdist issue 1386), so every test went its own way.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

SPARK = "tests/spark/"


class FileScopeScheduling(LoadScopeScheduling):
    """LoadScopeScheduling by test file, with every test under ``tests/spark/`` in one unit."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return SPARK if path.startswith(SPARK) else path
