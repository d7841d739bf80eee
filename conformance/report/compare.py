"""Views over a run document shared by the Markdown and HTML writers: the scenario x client matrix,
the differences between the broker under test and the reference Kafka, failure groups, the perf table.

The run document is what ``report.json`` holds: ``targets`` (the broker under test first, the
reference Kafka second when present), each with ``results``, plus ``scenarios`` and ``clients``.
"""

from __future__ import annotations

from collections import OrderedDict

from conformance.registry import CLIENTS

ICONS = {"pass": "✅", "assertion": "❌", "error": "💥", "timeout": "⏱", "prerequisite": "⛔"}
KIND_HEADINGS = {"assertion": "Behaves differently from Kafka", "error": "Client errors", "timeout": "Timeouts"}
KIND_WORDS = {"assertion": "differs from Kafka's behaviour", "error": "client error", "timeout": "timed out",
              "prerequisite": "prerequisite missing"}


def icon(result: dict | None) -> str:
    if result is None:
        return "·"
    return ICONS["pass"] if result["status"] == "pass" else ICONS.get(result["kind"], "❌")


def by_case(target: dict) -> dict[str, dict]:
    return {r["case_id"]: r for r in target["results"]}


def targets(doc: dict) -> tuple[dict, dict | None]:
    """(broker under test, reference or None)."""
    ts = doc["targets"]
    primary = ts[0] if ts else {"target": {"label": "?"}, "results": []}
    return primary, (ts[1] if len(ts) > 1 else None)


def summary(target: dict) -> dict[str, int]:
    out = {"total": 0, "pass": 0, "assertion": 0, "error": 0, "timeout": 0, "prerequisite": 0}
    for r in target["results"]:
        out["total"] += 1
        out["pass" if r["status"] == "pass" else r["kind"]] = out.get(
            "pass" if r["status"] == "pass" else r["kind"], 0) + 1
    return out


def matrix(doc: dict) -> tuple[list[str], "OrderedDict[str, OrderedDict[str, list[str]]]"]:
    """(clients used, {area: {scenario: [case ids]}}) in registration order."""
    primary, ref = targets(doc)
    order: list[dict] = list(primary["results"])
    seen = {r["case_id"] for r in order}
    if ref is not None:
        order += [r for r in ref["results"] if r["case_id"] not in seen]
    clients = [c for c in CLIENTS if any(r["client"] == c for r in order)]
    areas: OrderedDict = OrderedDict()
    for r in order:
        areas.setdefault(r["area"], OrderedDict()).setdefault(r["scenario"], []).append(r["case_id"])
    return clients, areas


def differences(doc: dict) -> list[dict]:
    """Cases whose outcome or observed values differ between the broker and the reference."""
    primary, ref = targets(doc)
    if ref is None:
        return []
    mine, theirs = by_case(primary), by_case(ref)
    out = []
    for case_id, a in mine.items():
        b = theirs.get(case_id)
        if b is None:
            continue
        keys = sorted(set(a["observed"]) | set(b["observed"]))
        differing = [k for k in keys if a["observed"].get(k, "—") != b["observed"].get(k, "—")]
        if a["status"] != b["status"] or differing:
            out.append({"case_id": case_id, "broker": a, "reference": b, "keys": differing})
    return out


def failure_groups(target: dict) -> dict[str, list[dict]]:
    """Failures of one target grouped by kind (prerequisite, assertion, error, timeout)."""
    groups: dict[str, list[dict]] = {}
    for r in target["results"]:
        if r["status"] != "pass":
            groups.setdefault(r["kind"], []).append(r)
    return groups


def prerequisite_reasons(target: dict) -> "OrderedDict[str, list[str]]":
    """{reason: [case ids]} for the prerequisite failures."""
    out: OrderedDict = OrderedDict()
    for r in target["results"]:
        if r["status"] != "pass" and r["kind"] == "prerequisite":
            out.setdefault(r["reason"], []).append(r["case_id"])
    return out


PERF_METRICS = (("records_per_s", "records/s", True), ("mb_per_s", "MB/s", True), ("p50_ms", "p50 ms", False),
                ("p99_ms", "p99 ms", False), ("avg_ms", "avg ms", False))


PERF_NOTES = ("ProducerPerformance runs unthrottled, so its latencies are mostly time the records wait in the "
              "producer's full buffer, not broker latency. EndToEndLatency prints its percentiles in whole "
              "milliseconds (truncated): 0 means under 1 ms. Other work on the machine makes every number noisy; "
              "each perf case records the load average right after its measurement (details.load_avg_1m).")


def perf_rows(doc: dict) -> list[dict]:
    """One row per perf case: the metrics of both targets and the ratio broker/Kafka."""
    primary, ref = targets(doc)
    theirs = by_case(ref) if ref else {}
    rows = []
    for r in primary["results"]:
        if r["area"] != "perf":
            continue
        b = theirs.get(r["case_id"])
        mine_m = r["details"].get("metrics", {}) if r["status"] == "pass" else {}
        ref_m = (b["details"].get("metrics", {}) if b and b["status"] == "pass" else {})
        row = {"case_id": r["case_id"], "title": r["scenario"], "broker": mine_m, "reference": ref_m,
               "broker_status": r, "reference_status": b, "ratio": {}}
        for key, _, _ in PERF_METRICS:
            if key in mine_m and key in ref_m and ref_m[key]:
                row["ratio"][key] = mine_m[key] / ref_m[key]
        rows.append(row)
    return rows


TIMINGS_NOTE = ("Seconds measured by the ecosystem scenarios (details.timings), e.g. takeover_s: from the "
                "kill -9 of an application instance to the surviving instance having processed what the "
                "killed one owned. Noisy on a busy machine; not compared for conformance.")


def timing_rows(doc: dict) -> list[tuple[str, str, object, object]]:
    """(case id, timing name, broker's seconds or None, reference's seconds or None) for every case
    that recorded ``details.timings`` on either target."""
    primary, ref = targets(doc)
    theirs = by_case(ref) if ref else {}
    rows = []
    for r in primary["results"]:
        b = theirs.get(r["case_id"])
        mine_t = r["details"].get("timings", {})
        ref_t = b["details"].get("timings", {}) if b else {}
        for key in sorted(set(mine_t) | set(ref_t)):
            rows.append((r["case_id"], key, mine_t.get(key), ref_t.get(key)))
    return rows


def machine_line(doc: dict) -> str:
    """One sentence about the machine and the run: CPUs, load averages, duration (numbers are noisy on a
    busy machine; the load average says how busy it was)."""
    suite = doc["suite"]
    m = suite.get("machine", {})
    parts = [f"{m['cpus']} CPUs" if m.get("cpus") else "CPUs unknown"]
    if m.get("load_start") is not None and m.get("load_end") is not None:
        parts.append(f"1-minute load average {m['load_start'][0]:.1f} at the start, {m['load_end'][0]:.1f} at the end "
                     f"(15-minute {m['load_end'][2]:.1f})")
    if suite.get("duration_s") is not None:
        parts.append(f"run took {suite['duration_s'] / 60:.1f} min")
    return ", ".join(parts)


def fmt_value(v) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def api_table(doc: dict) -> list[tuple[str, str, str]]:
    """(API, broker range, reference range) for every API either advertises."""
    from conformance.wire import api_name

    primary, ref = targets(doc)
    mine = primary.get("api_versions", {})
    theirs = ref.get("api_versions", {}) if ref else {}
    keys = sorted({int(k) for k in mine} | {int(k) for k in theirs})
    rows = []
    for k in keys:
        a = mine.get(str(k))
        b = theirs.get(str(k))
        rows.append((api_name(k), f"{a[0]}-{a[1]}" if a else "—", f"{b[0]}-{b[1]}" if b else "—"))
    return rows
