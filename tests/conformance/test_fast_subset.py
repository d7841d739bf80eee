"""The conformance suite's fast subset against a kcompat broker started by the test.

Runs ``python -m conformance --group fast`` (kafka-python, confluent-kafka, kcat and the wire probes)
against a fresh kcompat process and checks the machine-readable report:

- every selected case has a result (nothing crashed the suite, nothing is silently skipped);
- a case kcompat cannot run yet fails as a *prerequisite* whose reason names an API the broker really
  does not advertise (e.g. transactions before they exist);
- every other case passes, except the known differences listed below, each with the reason (a listed
  case that starts passing fails the test too, so the list stays true).

A second test runs one Java case (Kafka's own VerifiableProducer and ConsoleConsumer). The suite
resolves Kafka's jars with Maven from Maven Central into its cache on first use, so on a fresh machine
this test downloads them (about 60 MB) and needs Java 17, Maven and the network; without them the case
fails as a missing prerequisite and so does the test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conformance import KAFKA_VERSION, maven, registry
from tests.support.broker_process import ROOT, BrokerProcess

# Known differences from Kafka found by the suite, case id -> why it fails today. None now: the last
# ones, kcat's compressed produce, pass since Produce v0-v2 are advertised as Kafka 4.0 does.
KNOWN_FAILURES: dict[str, str] = {}


def _run_suite(bootstrap: str, report_dir, *extra: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess,
                                                                                        dict]:
    proc = subprocess.run([sys.executable, "-m", "conformance", "--bootstrap", bootstrap, "--label", "kcompat",
                           "--report", str(report_dir), *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode in (0, 1), f"the suite crashed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                      f"{proc.stderr[-3000:]}"
    return proc, json.loads((report_dir / "report.json").read_text())


def test_fast_subset_against_kcompat(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        proc, doc = _run_suite(broker.bootstrap, tmp_path / "report", "--group", "fast", "--no-java")
    (target,) = doc["targets"]
    results = {r["case_id"]: r for r in target["results"]}
    expected = {c.id for c in registry.select("fast")}
    assert set(results) == expected, f"cases without a result: {sorted(expected - set(results))[:10]}"
    for name in ("report.md", "report.html"):
        assert (tmp_path / "report" / name).stat().st_size > 1000

    advertised = {int(k) for k in target["api_versions"]}
    problems = []
    for case_id, r in sorted(results.items()):
        if r["status"] == "pass":
            if case_id in KNOWN_FAILURES:  # keep the list honest: a fixed difference leaves it
                problems.append(f"{case_id}: listed as a known failure but passes; remove it from KNOWN_FAILURES")
            continue
        if r["kind"] == "prerequisite":
            m = re.search(r"does not advertise \w+\((\d+)\)", r["reason"])
            if not m or int(m.group(1)) in advertised:
                problems.append(f"{case_id}: prerequisite failure without a true reason: {r['reason']}")
            continue
        if case_id in KNOWN_FAILURES and r["kind"] == "assertion":
            continue
        problems.append(f"{case_id}: {r['kind']}: {r['reason'][:300]}")
    assert not problems, "unexpected failures:\n" + "\n".join(problems)

    # features kcompat lacks today are reported as failing prerequisites, never skipped
    if 24 not in advertised:
        txn = [r for cid, r in results.items() if cid.startswith("txn.")]
        assert txn and all(r["status"] == "fail" and r["kind"] == "prerequisite" for r in txn)


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_one_java_case_against_kcompat(tmp_path):
    fresh = maven.cached_lib(KAFKA_VERSION) is None
    with BrokerProcess(tmp_path / "data") as broker:
        _, doc = _run_suite(broker.bootstrap, tmp_path / "report", "--clients", "java", "--only",
                            "produce.zstd.acks-all", timeout=1100 if fresh else 240)
    (result,) = doc["targets"][0]["results"]
    assert result["status"] == "pass", f"{result['kind']}: {result['reason']}"
    assert maven.cached_lib(KAFKA_VERSION) is not None


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_java_cases_run_kafka_4_tools_under_their_new_class_names(tmp_path):
    """Kafka 4.0 moved ConsoleProducer and BrokerApiVersionsCommand from the Scala core
    (``kafka.tools`` / ``kafka.admin``) to the Java tools module (``org.apache.kafka.tools``);
    with ``--kafka-version 4.3.1`` the Java cases that use them must run the 4.x classes
    (they failed with "Could not find or load main class" before)."""
    with BrokerProcess(tmp_path / "data") as broker:
        _, doc = _run_suite(broker.bootstrap, tmp_path / "report", "--kafka-version", "4.3.1", "--clients", "java",
                            "--only", "api.version-negotiation,fetch.headers-and-timestamps", timeout=1100)
    results = {r["case_id"]: r for r in doc["targets"][0]["results"]}
    assert len(results) == 2, results
    assert all(r["status"] == "pass" for r in results.values()), \
        {cid: (r["kind"], r["reason"]) for cid, r in results.items() if r["status"] != "pass"}
