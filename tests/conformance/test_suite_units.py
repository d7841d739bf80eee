"""Unit tests of the conformance suite's own pieces (no broker): address rewriting in the fault proxy,
Kafka's validate_delivery rule, case selection, the report views."""

from __future__ import annotations

from conformance import registry, wire
from conformance.faultproxy import rewrite_find_coordinator, rewrite_metadata
from conformance.report import compare, html, markdown
from conformance.scenarios.verifiable import validate_delivery


def _metadata_v1(brokers, tail=b"TAIL"):
    w = wire.Writer().i32(len(brokers))
    for node, host, port in brokers:
        w.i32(node).string(host).i32(port).string(None)
    return w.getvalue() + tail


def _metadata_v9(brokers, tail=b"TAIL"):
    w = wire.Writer().tags().i32(0).uvarint(len(brokers) + 1)
    for node, host, port in brokers:
        w.i32(node).compact_string(host).i32(port).compact_string("rack-a").tags()
    return w.getvalue() + tail


def test_metadata_rewrite_replaces_every_broker_address_and_keeps_the_rest():
    mapper = {("10.0.0.1", 9092): ("127.0.0.1", 40001), ("10.0.0.2", 9092): ("127.0.0.1", 40002)}
    brokers = [(1, "10.0.0.1", 9092), (2, "10.0.0.2", 9092)]
    out = rewrite_metadata(_metadata_v1(brokers), 1, lambda h, p: mapper[(h, p)])
    assert out == _metadata_v1([(1, "127.0.0.1", 40001), (2, "127.0.0.1", 40002)])
    out9 = rewrite_metadata(_metadata_v9(brokers), 9, lambda h, p: mapper[(h, p)])
    assert out9 == _metadata_v9([(1, "127.0.0.1", 40001), (2, "127.0.0.1", 40002)])


def test_find_coordinator_rewrite_v0_and_v4():
    v0 = wire.Writer().i16(0).i32(3).string("10.0.0.3").i32(9092).getvalue()
    assert rewrite_find_coordinator(v0, 0, lambda h, p: ("127.0.0.1", 1)) == \
        wire.Writer().i16(0).i32(3).string("127.0.0.1").i32(1).getvalue()
    v4 = (wire.Writer().tags().i32(0).uvarint(2).compact_string("g").i32(3).compact_string("10.0.0.3").i32(9092)
          .i16(0).compact_string(None).tags().tags().getvalue())
    want = (wire.Writer().tags().i32(0).uvarint(2).compact_string("g").i32(3).compact_string("127.0.0.1").i32(1)
            .i16(0).compact_string(None).tags().tags().getvalue())
    assert rewrite_find_coordinator(v4, 4, lambda h, p: ("127.0.0.1", 1)) == want


def test_validate_delivery_follows_kafkas_rule():
    assert validate_delivery(["1", "2"], ["2", "1"])[0]
    ok, msg, numbers = validate_delivery(["1", "2", "3"], ["1", "2", "2"])
    assert not ok and numbers["missing"] == 1 and numbers["duplicates"] == 1
    assert validate_delivery(["1"], ["1", "1"], idempotence=False)[0]  # duplicates only count with idempotence


def test_record_batch_headers_round_trip():
    batch = wire.record_batch([b"a", b"bb", b"ccc"], producer_id=7, producer_epoch=0, base_sequence=4)
    (h,) = wire.batch_headers(batch)
    assert (h.base_offset, h.last_offset_delta, h.record_count, h.producer_id, h.base_sequence) == (0, 2, 3, 7, 4)


def test_selection_groups():
    fast = registry.select("fast")
    assert fast and all(c.client in registry.FAST_CLIENTS and c.group == "core" for c in fast)
    perf = registry.select("perf")
    assert perf and all(c.group == "perf" for c in perf)
    assert len(registry.select("all")) == len(registry.select("core")) + len(perf)
    only = registry.select("core", ["produce.none.acks-all[java]"])
    assert [c.id for c in only] == ["produce.none.acks-all[java]"]
    eco = registry.select("ecosystem")
    # one case per application release each, and the streams-protocol word count (Kafka 4.3.1 only)
    assert {c.area for c in eco} == {"streams", "connect", "mirror"} and len(eco) == 7
    assert not {c.id for c in eco} & {c.id for c in registry.select("all") + registry.select("security")}


def test_report_lists_the_timings_of_both_brokers():
    def run(label, seconds):
        r = _result("streams.x[java]")
        r["details"] = {"timings": {"takeover_s": seconds}}
        return {"target": {"label": label}, "api_versions": {}, "results": [r]}

    doc = {"suite": {"version": "1", "kafka_version": "3.9.1", "command": "x", "finished_at": "now"},
           "clients": {}, "scenarios": {}, "targets": [run("kcompat", 12.5), run("Kafka 3.9.1", 11.0)]}
    assert compare.timing_rows(doc) == [("streams.x[java]", "takeover_s", 12.5, 11.0)]
    assert "| `streams.x[java]` | takeover_s | 12.5 | 11.0 |" in markdown.render(doc)
    assert "<td class=c>11.0</td>" in html.render(doc)


def _result(case_id, status="pass", kind="ok", observed=None):
    scenario, client = case_id[:-1].split("[")
    return {"case_id": case_id, "scenario": scenario, "client": client, "area": "api", "status": status,
            "kind": kind, "reason": "" if status == "pass" else "why", "observed": observed or {}, "details": {},
            "duration_s": 0.1}


def test_report_views_show_differences_side_by_side():
    doc = {"suite": {"version": "1", "kafka_version": "3.9.2", "command": "x", "finished_at": "now"},
           "clients": {"wire": "own"}, "scenarios": {"a.b": {"title": "T"}},
           "targets": [
               {"target": {"label": "broker"}, "api_versions": {"18": [0, 4]},
                "results": [_result("a.b[wire]", observed={"error": "NONE(0)"})]},
               {"target": {"label": "Kafka"}, "api_versions": {"18": [0, 4]},
                "results": [_result("a.b[wire]", "fail", "assertion", observed={"error": "UNSUPPORTED_VERSION(35)"})]},
           ]}
    (diff,) = compare.differences(doc)
    assert diff["keys"] == ["error"]
    md = markdown.render(doc)
    assert "UNSUPPORTED_VERSION(35)" in md and "| `a.b` T | ✅ / ❌ |" in md
    assert "UNSUPPORTED_VERSION(35)" in html.render(doc)


def test_report_states_how_busy_the_machine_was():
    doc = {"suite": {"duration_s": 90.0, "machine": {"cpus": 2, "load_start": [0.5, 0.4, 0.3],
                                                      "load_end": [3.25, 2.0, 1.5]}}}
    assert compare.machine_line(doc) == ("2 CPUs, 1-minute load average 0.5 at the start, 3.2 at the end "
                                         "(15-minute 1.5), run took 1.5 min")
    assert compare.machine_line({"suite": {}}) == "CPUs unknown"
