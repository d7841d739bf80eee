"""Report writers: ``report.json`` (machine-readable run document), ``report.md`` and ``report.html``.

:func:`write_reports` writes all three into a directory; :func:`load` reads a ``report.json`` back
(``python -m conformance --rerender DIR`` re-renders the Markdown and HTML from it).
"""

from __future__ import annotations

import json
from pathlib import Path

from conformance.report import html, markdown


def write_reports(doc: dict, out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "report.json", "markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    paths["json"].write_text(json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n")
    paths["markdown"].write_text(markdown.render(doc))
    paths["html"].write_text(html.render(doc))
    return paths


def load(out_dir: Path) -> dict:
    return json.loads((Path(out_dir) / "report.json").read_text())
