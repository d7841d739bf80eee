"""A self-contained HTML report (inline CSS, no scripts): the same sections as the Markdown report, with
colour-coded matrix cells whose tooltips carry the failure reasons, and collapsible details."""

from __future__ import annotations

import json
from html import escape

from conformance.report import compare as cmp

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;
padding:0 1rem;color:#1d2430}
h1{font-size:1.6rem}h2{margin-top:2.2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}h3{margin-top:1.4rem}
table{border-collapse:collapse;margin:.6rem 0 1rem}th,td{border:1px solid #d6dae2;padding:.25rem .5rem;
vertical-align:top}th{background:#f3f5f9;text-align:left}td.c{text-align:center;white-space:nowrap}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#f3f5f9;padding:0 .2rem;border-radius:3px}
.pass{background:#e3f6e8}.assertion{background:#fde4e1}.error{background:#fde4e1}.timeout{background:#fff0d6}
.prerequisite{background:#eceff4}.sub{color:#667;font-size:12px}.diff td{font-size:13px}
details{margin:.3rem 0 .8rem}summary{cursor:pointer}.legend span{margin-right:1rem}
.cell{display:inline-block;min-width:1.6rem;padding:0 .2rem;border-radius:3px}
"""


def _cls(result: dict | None) -> str:
    if result is None:
        return ""
    return "pass" if result["status"] == "pass" else result["kind"]


def _tip(result: dict | None, who: str) -> str:
    if result is None:
        return f"{who}: not run"
    if result["status"] == "pass":
        return f"{who}: pass ({result['duration_s']}s)"
    return f"{who}: {cmp.KIND_WORDS.get(result['kind'], result['kind'])}: {result['reason']}"


def _cell(result: dict | None, who: str) -> str:
    return (f'<span class="cell {_cls(result)}" title="{escape(_tip(result, who))}">'
            f"{cmp.icon(result)}</span>")


def _val(v) -> str:
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
    return escape(s if len(s) <= 400 else s[:400] + "…")


def render(doc: dict) -> str:
    primary, ref = cmp.targets(doc)
    label = primary["target"]["label"]
    ref_label = ref["target"]["label"] if ref else None
    suite = doc["suite"]
    h: list[str] = []
    w = h.append
    w("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>")
    w(f"<title>Kafka conformance: {escape(label)}</title><style>{CSS}</style></head><body>")
    w(f"<h1>Kafka conformance report: {escape(label)}</h1>")
    w(f"<p class=sub>Generated {escape(suite['finished_at'])} by <code>{escape(suite['command'])}</code> — "
      f"conformance suite {escape(suite['version'])}; Java tools and reference from Apache Kafka "
      f"{escape(suite['kafka_version'])}.</p><ul>")
    t = primary["target"]
    w(f"<li><b>Broker under test:</b> {escape(label)} at <code>{escape(str(t.get('bootstrap')))}</code> "
      f"({escape(str(t.get('kind')))}{', revision <code>' + escape(t['revision']) + '</code>' if t.get('revision') else ''})</li>")
    if ref:
        w(f"<li><b>Reference:</b> {escape(ref_label)} ({escape(str(ref['target'].get('mode', 'KRaft')))}) at "
          f"<code>{escape(str(ref['target'].get('bootstrap')))}</code>, started by the suite on the same machine</li>")
    w("<li><b>Clients:</b> " + "; ".join(f"{escape(k)}: {escape(v)}" for k, v in doc["clients"].items()) + "</li>")
    w(f"<li><b>Machine:</b> {escape(cmp.machine_line(doc))}</li></ul>")

    w("<h2>Summary</h2><table><tr><th></th>" + f"<th>{escape(label)}</th>" +
      (f"<th>{escape(ref_label)}</th>" if ref else "") + "</tr>")
    sums = [cmp.summary(primary)] + ([cmp.summary(ref)] if ref else [])
    for key, name in (("pass", "passed"), ("assertion", "failed: behaves differently"),
                      ("prerequisite", "failed: prerequisite missing"), ("error", "failed: client error"),
                      ("timeout", "failed: timed out"), ("total", "cases")):
        w(f"<tr><td>{name}</td>" + "".join(f"<td class=c>{s.get(key, 0)}</td>" for s in sums) + "</tr>")
    w("</table>")
    for tg, lab in ((primary, label), (ref, ref_label)):
        if tg and tg.get("error"):
            w(f"<p><b>{escape(lab)} could not be used:</b> {escape(tg['error'])}</p>")

    w("<h2>Matrix</h2><p class=legend><span>✅ pass</span><span>❌ behaves differently</span>"
      "<span>⛔ prerequisite missing</span><span>💥 client error</span><span>⏱ timeout</span></p>")
    if ref:
        w(f"<p class=sub>Each cell: {escape(label)} / {escape(ref_label)}. Hover a cell for the reason.</p>")
    clients, areas = cmp.matrix(doc)
    mine, theirs = cmp.by_case(primary), (cmp.by_case(ref) if ref else {})
    for area, scenarios in areas.items():
        w(f"<h3>{escape(area)}</h3><table><tr><th>scenario</th>" + "".join(f"<th>{escape(c)}</th>" for c in clients)
          + "</tr>")
        for scenario, case_ids in scenarios.items():
            info = doc["scenarios"].get(scenario, {})
            w(f"<tr><td><code>{escape(scenario)}</code><br><span class=sub>{escape(info.get('title', ''))}</span></td>")
            for c in clients:
                cid = f"{scenario}[{c}]"
                if cid not in case_ids:
                    w("<td></td>")
                    continue
                cell = _cell(mine.get(cid), label)
                if ref:
                    cell += " / " + _cell(theirs.get(cid), ref_label)
                w(f"<td class=c>{cell}</td>")
            w("</tr>")
        w("</table>")

    if ref:
        diffs = cmp.differences(doc)
        w(f"<h2>Differences from {escape(ref_label)}</h2>")
        if not diffs:
            w("<p>None: every case has the same outcome and the same observed values.</p>")
        for d in diffs:
            a, b = d["broker"], d["reference"]
            w(f"<details open><summary><code>{escape(d['case_id'])}</code> — {escape(label)}: "
              f"<span class='cell {_cls(a)}'>{a['status']}</span>, {escape(ref_label)}: "
              f"<span class='cell {_cls(b)}'>{b['status']}</span></summary>")
            for r, lab in ((a, label), (b, ref_label)):
                if r["status"] != "pass":
                    w(f"<p><b>{escape(lab)}:</b> {escape(r['reason'])}</p>")
            if d["keys"]:
                w(f"<table class=diff><tr><th>observed</th><th>{escape(label)}</th><th>{escape(ref_label)}</th></tr>")
                for k in d["keys"]:
                    w(f"<tr><td>{escape(k)}</td><td>{_val(a['observed'].get(k, '—'))}</td>"
                      f"<td>{_val(b['observed'].get(k, '—'))}</td></tr>")
                w("</table>")
            w("</details>")

    w(f"<h2>Failures of {escape(label)}</h2>")
    groups = cmp.failure_groups(primary)
    if not groups:
        w("<p>None.</p>")
    reasons = cmp.prerequisite_reasons(primary)
    if reasons:
        w("<h3>Prerequisites missing</h3><ul>")
        for reason, ids in reasons.items():
            w(f"<li><b>{escape(reason)}</b> — {len(ids)} cases: " + ", ".join(f"<code>{escape(i)}</code>" for i in ids)
              + "</li>")
        w("</ul>")
    for kind in ("assertion", "error", "timeout"):
        if kind in groups:
            w(f"<h3>{escape(cmp.KIND_HEADINGS[kind])}</h3><ul>")
            for r in groups[kind]:
                extra = ""
                if r["details"]:
                    extra = (f"<details><summary class=sub>details</summary><pre>"
                             f"{escape(json.dumps(r['details'], indent=1, ensure_ascii=False)[:4000])}</pre></details>")
                w(f"<li><code>{escape(r['case_id'])}</code> — {escape(r['reason'])}{extra}</li>")
            w("</ul>")

    rows = cmp.perf_rows(doc)
    if rows:
        w("<h2>Performance</h2><p class=sub>Same machine, one run, one after the other. MB = 2^20 bytes as the "
          f"Kafka tools print it. Ratio = {escape(label)} / {escape(ref_label or 'reference')}. "
          f"{escape(cmp.PERF_NOTES)}</p>")
        w(f"<table><tr><th>case</th><th>metric</th><th>{escape(label)}</th>" +
          (f"<th>{escape(ref_label)}</th><th>ratio</th>" if ref else "") + "</tr>")
        for row in rows:
            status = row["broker_status"]
            shown = False
            for key, name, _ in cmp.PERF_METRICS:
                if key not in row["broker"] and key not in row["reference"]:
                    continue
                shown = True
                a = cmp.fmt_value(row["broker"][key]) if key in row["broker"] else (
                    "FAIL" if status["status"] != "pass" else "—")
                w(f"<tr><td><code>{escape(row['case_id'])}</code></td><td>{name}</td><td class=c>{a}</td>")
                if ref:
                    b = cmp.fmt_value(row["reference"][key]) if key in row["reference"] else "—"
                    ratio = f"{row['ratio'][key]:.2f}" if key in row["ratio"] else "—"
                    w(f"<td class=c>{b}</td><td class=c>{ratio}</td>")
                w("</tr>")
            if not shown:
                w(f"<tr><td><code>{escape(row['case_id'])}</code></td><td colspan=4>FAIL: "
                  f"{escape(status['reason'][:300])}</td></tr>")
        w("</table>")

    timings = cmp.timing_rows(doc)
    if timings:
        w(f"<h2>Timings</h2><p class=sub>{escape(cmp.TIMINGS_NOTE)}</p>")
        w(f"<table><tr><th>case</th><th>timing</th><th>{escape(label)}</th>" +
          (f"<th>{escape(ref_label)}</th>" if ref else "") + "</tr>")
        for case_id, key, a, b in timings:
            w(f"<tr><td><code>{escape(case_id)}</code></td><td>{escape(key)}</td><td class=c>{'—' if a is None else a}</td>"
              + (f"<td class=c>{'—' if b is None else b}</td>" if ref else "") + "</tr>")
        w("</table>")

    w("<h2>Advertised API versions</h2><table><tr><th>API</th>" + f"<th>{escape(label)}</th>" +
      (f"<th>{escape(ref_label)}</th>" if ref else "") + "</tr>")
    for api, a, b in cmp.api_table(doc):
        w(f"<tr><td>{escape(api)}</td><td class=c>{a}</td>" + (f"<td class=c>{b}</td>" if ref else "") + "</tr>")
    w("</table>")
    events = [(label, e) for e in primary.get("events", [])] + ([(ref_label, e) for e in ref.get("events", [])]
                                                                   if ref else [])
    if events:
        w("<h2>Events</h2><ul>" + "".join(f"<li>{escape(who)}: {escape(e)}</li>" for who, e in events) + "</ul>")
    w("</body></html>")
    return "\n".join(h)
