"""The conformance suite's ``ecosystem`` group against kcompat (issue 27): Kafka's Java applications.

Runs ``python -m conformance --broker-cmd kcompat --group ecosystem`` with one application release
per scenario, to stay within CI's time budget: Kafka Streams 4.3.1 (exactly_once_v2 word count
killed with SIGKILL, taken over by a second instance, restarted; final counts exact; and the same
word count with ``group.protocol=streams``, KIP-1071: two instances share the tasks, one leaves, the
other takes them over, kafka-streams-groups.sh lists and describes the group), Kafka Connect
3.9.1 in distributed mode (FileStream source and sink, a clean worker restart, a second worker
taking over a killed one's tasks) and MirrorMaker 2 3.9.1 (replication to the second kcompat the
suite starts beside the first, checkpoints, offset translation for a group failing over, no ERROR
about DescribeAcls). The other release of each is in the documented side-by-side run
(``conformance/README.md``). The application jars are resolved from Maven Central on first use.

From the machine-readable report: every selected case passes, the broker had its peer cluster, and
every scenario measured a takeover time where it has one.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.broker_process import ROOT

CASES = ("streams.eos-wordcount.kafka-4.3.1[java]", "connect.distributed-filestream.kafka-3.9.1[java]",
         "mirror.checkpoints-failover.kafka-3.9.1[java]", "streams.protocol-wordcount.kafka-4.3.1[java]")


def test_ecosystem_group_against_kcompat(tmp_path):
    report = tmp_path / "report"
    only = ",".join(c.split("[")[0] for c in CASES)
    proc = subprocess.run([sys.executable, "-m", "conformance", "--broker-cmd", "kcompat", "--group", "ecosystem",
                           "--only", only, "--report", str(report)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert proc.returncode in (0, 1), f"the suite crashed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                      f"{proc.stderr[-3000:]}"
    (target,) = json.loads((report / "report.json").read_text())["targets"]
    assert target["target"]["peer"]["bootstrap"] != target["target"]["bootstrap"]
    results = {r["case_id"]: r for r in target["results"]}
    assert set(results) == set(CASES)
    problems = [f"{cid}: {r['kind']}: {r['reason'][:500]}" for cid, r in sorted(results.items())
                if r["status"] != "pass"]
    assert not problems, "failures:\n" + "\n".join(problems)
    for cid in (*CASES[:2], CASES[3]):
        assert results[cid]["details"]["timings"]["takeover_s"] > 0
    mirror = results[CASES[2]]
    assert mirror["observed"]["no_authorizer_info_logged"] is True
    streams_protocol = results[CASES[3]]["observed"]
    assert streams_protocol["final_counts_exact"] is True and streams_protocol["tool_lists_group"] is True
    assert "## Timings" in (report / "report.md").read_text()
