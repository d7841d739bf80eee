"""The Markdown report: summary, scenario x client matrix, differences from Kafka, failures, perf, APIs."""

from __future__ import annotations

import json

from conformance.report import compare as cmp


def _esc(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _short(value, limit: int = 160) -> str:
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return s if len(s) <= limit else s[:limit] + "…"


def render(doc: dict) -> str:
    primary, ref = cmp.targets(doc)
    label = primary["target"]["label"]
    ref_label = ref["target"]["label"] if ref else None
    out: list[str] = []
    w = out.append
    w(f"# Kafka conformance report: {label}\n")
    suite = doc["suite"]
    w(f"Generated {suite['finished_at']} by `{suite['command']}` (conformance suite {suite['version']}, "
      f"Java tools and reference from Apache Kafka {suite['kafka_version']}).\n")
    t = primary["target"]
    w(f"- **Broker under test:** {label} at `{t.get('bootstrap')}` ({t.get('kind')}"
      + (f", revision `{t['revision']}`" if t.get("revision") else "") + ")")
    if ref:
        w(f"- **Reference:** {ref_label} ({ref['target'].get('mode', 'KRaft')}) at `{ref['target'].get('bootstrap')}`, "
          "started by the suite on the same machine")
    w("- **Clients:** " + "; ".join(f"{k}: {v}" for k, v in doc["clients"].items()))
    w(f"- **Machine:** {cmp.machine_line(doc)}")
    w("")
    w("## Summary\n")
    cols = [label] + ([ref_label] if ref else [])
    sums = [cmp.summary(primary)] + ([cmp.summary(ref)] if ref else [])
    w("| | " + " | ".join(cols) + " |")
    w("|---|" + "---|" * len(cols))
    for key, name in (("pass", "passed"), ("assertion", "failed: behaves differently"),
                      ("prerequisite", "failed: prerequisite missing"), ("error", "failed: client error"),
                      ("timeout", "failed: timed out"), ("total", "cases")):
        w(f"| {name} | " + " | ".join(str(s.get(key, 0)) for s in sums) + " |")
    w("")
    if primary.get("error"):
        w(f"> **{label} could not be used:** {primary['error']}\n")
    if ref and ref.get("error"):
        w(f"> **{ref_label} could not be used:** {ref['error']}\n")

    w("## Matrix\n")
    legend = ("✅ pass · ❌ behaves differently · ⛔ prerequisite missing (e.g. an API the broker does not "
              "advertise) · 💥 client error · ⏱ timeout · `·` not run.")
    if ref:
        legend += f" Each cell: **{label}** / {ref_label}."
    w(legend + " Empty cells: the scenario does not apply to that client.\n")
    clients, areas = cmp.matrix(doc)
    mine, theirs = cmp.by_case(primary), (cmp.by_case(ref) if ref else {})
    for area, scenarios in areas.items():
        w(f"### {area}\n")
        w("| scenario | " + " | ".join(clients) + " |")
        w("|---|" + "---|" * len(clients))
        for scenario, case_ids in scenarios.items():
            title = doc["scenarios"].get(scenario, {}).get("title", "")
            cells = []
            for c in clients:
                cid = f"{scenario}[{c}]"
                if cid not in case_ids:
                    cells.append("")
                    continue
                cell = cmp.icon(mine.get(cid))
                if ref:
                    cell += " / " + cmp.icon(theirs.get(cid))
                cells.append(cell)
            w(f"| `{scenario}` {_esc(title)} | " + " | ".join(cells) + " |")
        w("")

    if ref:
        diffs = cmp.differences(doc)
        w(f"## Differences from {ref_label}\n")
        if not diffs:
            w("None: every case has the same outcome and the same observed values.\n")
        for d in diffs:
            a, b = d["broker"], d["reference"]
            w(f"### `{d['case_id']}`\n")
            w(f"- **{label}:** {a['status'].upper()}" + (f" ({cmp.KIND_WORDS.get(a['kind'], a['kind'])}) — "
                                                         f"{_esc(a['reason'])}" if a["status"] != "pass" else ""))
            w(f"- **{ref_label}:** {b['status'].upper()}" + (f" ({cmp.KIND_WORDS.get(b['kind'], b['kind'])}) — "
                                                             f"{_esc(b['reason'])}" if b["status"] != "pass" else ""))
            if d["keys"]:
                w("")
                w(f"| observed | {label} | {ref_label} |")
                w("|---|---|---|")
                for k in d["keys"]:
                    w(f"| {k} | {_esc(_short(a['observed'].get(k, '—')))} | {_esc(_short(b['observed'].get(k, '—')))} |")
            w("")

    w(f"## Failures of {label}\n")
    groups = cmp.failure_groups(primary)
    if not groups:
        w("None.\n")
    reasons = cmp.prerequisite_reasons(primary)
    if reasons:
        w("### Prerequisites missing\n")
        for reason, ids in reasons.items():
            w(f"- **{_esc(reason)}** — {len(ids)} cases: " + ", ".join(f"`{i}`" for i in ids))
        w("")
    for kind in ("assertion", "error", "timeout"):
        if kind in groups:
            w(f"### {cmp.KIND_HEADINGS[kind]}\n")
            for r in groups[kind]:
                w(f"- `{r['case_id']}` — {_esc(r['reason'])}")
            w("")

    rows = cmp.perf_rows(doc)
    if rows:
        w("## Performance\n")
        w("Same machine, one run, one after the other. MB = 2^20 bytes as the Kafka tools print it. "
          f"Ratio = {label} / {ref_label or 'reference'} (above 1 is faster for rates, slower for latencies). "
          + cmp.PERF_NOTES + "\n")
        head = "| case | metric | " + label + (f" | {ref_label} | ratio |" if ref else " |")
        w(head)
        w("|---|---|---|" + ("---|---|" if ref else ""))
        for row in rows:
            status = row["broker_status"]
            if status["status"] != "pass" and not row["reference"]:
                w(f"| `{row['case_id']}` | — | FAIL: {_esc(status['reason'][:120])} |" + (" — | |" if ref else ""))
                continue
            for key, name, _ in cmp.PERF_METRICS:
                if key not in row["broker"] and key not in row["reference"]:
                    continue
                a = cmp.fmt_value(row["broker"][key]) if key in row["broker"] else (
                    "FAIL" if status["status"] != "pass" else "—")
                line = f"| `{row['case_id']}` | {name} | {a} |"
                if ref:
                    b = cmp.fmt_value(row["reference"][key]) if key in row["reference"] else "—"
                    ratio = f"{row['ratio'][key]:.2f}" if key in row["ratio"] else "—"
                    line += f" {b} | {ratio} |"
                w(line)
        failed = [r for r in rows if r["broker_status"]["status"] != "pass"]
        for r in failed:
            w(f"\n- `{r['case_id']}` on {label}: {_esc(r['broker_status']['reason'][:300])}")
        w("")

    timings = cmp.timing_rows(doc)
    if timings:
        w("## Timings\n")
        w(cmp.TIMINGS_NOTE + "\n")
        w(f"| case | timing | {label} |" + (f" {ref_label} |" if ref else ""))
        w("|---|---|---|" + ("---|" if ref else ""))
        for case_id, key, a, b in timings:
            w(f"| `{case_id}` | {key} | {'—' if a is None else a} |" + (f" {'—' if b is None else b} |" if ref else ""))
        w("")

    w("## Advertised API versions\n")
    w(f"| API | {label} |" + (f" {ref_label} |" if ref else ""))
    w("|---|---|" + ("---|" if ref else ""))
    for api, a, b in cmp.api_table(doc):
        w(f"| {api} | {a} |" + (f" {b} |" if ref else ""))
    w("")
    events = [(label, e) for e in primary.get("events", [])] + ([(ref_label, e) for e in ref.get("events", [])]
                                                                   if ref else [])
    if events:
        w("## Events\n")
        for who, e in events:
            w(f"- {who}: {_esc(e)}")
        w("")
    return "\n".join(out)
