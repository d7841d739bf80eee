"""librdkafka's own integration tests (``tests/0nnn-*.c``, its ``test-runner``) against kcompat or
any bootstrap address: every test that needs a broker, one ``test-runner`` process per test, a few
at a time, and a table of what passed, failed, was skipped or timed out.

librdkafka's sources come from the ``rdkafka-sys`` crate on crates.io, which bundles librdkafka
with its tests (a pinned version and SHA-256), or from ``--source DIR`` (a librdkafka checkout,
e.g. its master branch for tests newer than any release). They are built once per ``--workdir``
(``./configure`` without GSSAPI, zstd, curl and Cyrus SASL, then ``make libs`` and the tests'
``test-runner``: about 7 minutes on 2 cores). Tests that verify statistics need RapidJSON
(``apt-get install rapidjson-dev`` before the build) and are skipped by librdkafka without it.

The brokers are configured as librdkafka's own test clusters (trivup, ``tests/cluster_testing.py``):
``num.partitions=4``, a rack per broker with the rack-aware replica selector, a 1 s minimum share
record lock, replicated internal topics on a cluster, and an ACL authorizer that allows everything
no ACL denies (the authorization tests add ACLs with ``kafka-acls.sh``). ``KAFKA_PATH`` points at a
stand-in for a Kafka installation whose ``bin/kafka-topics.sh``, ``kafka-acls.sh`` and
``kafka-run-class.sh`` run Kafka 4.3.1's tools from the jars the conformance suite resolves from
Maven Central; the Java helpers some tests build (``tests/java``) use the same jars.

    python3 -m conformance.librdkafka_tests [--nodes 1|3] [--full] [--tests 0001,0081]
        [--parallel 3] [--bootstrap HOST:PORT] [--source DIR] [--workdir DIR] [--json FILE]

Exit status 0 when no test failed or timed out, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from conformance import maven

# librdkafka release -> (rdkafka-sys crate version, the crate's SHA-256)
CRATES = {"2.12.1": ("4.10.0+2.12.1", "e234cf318915c1059d4921ef7f75616b5219b10b46e9f3a511a15eb4b56a3f77")}
DEFAULT_RELEASE = "2.12.1"
TOOLS_VERSION = "4.3.1"          # Kafka's tools behind KAFKA_PATH
BROKER_VERSION = "4.2.0"         # TEST_KAFKA_VERSION: what the tests may assume the broker has
CONFIGURE = ["--disable-gssapi", "--disable-zstd", "--disable-curl", "--disable-sasl"]
RESULT = re.compile(r"=+ Test (\S+) (PASSED|FAILED|SKIPPED) =+")
FAILURE = re.compile(r"### Test \"([^\"]+)\" failed at [^\n]*###\n([^\n]*)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# trivup's broker settings for librdkafka's test clusters (tests/cluster_testing.py)
TRIVUP = {"num.partitions": "4",
          "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
          "group.share.min.record.lock.duration.ms": "1000",
          "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "allow.everyone.if.no.acl.found": "true"}

# Kafka's defaults, not kcompat.testing.Cluster's fast failure detection: with a 1 s quorum fetch
# timeout a loaded machine changes quorum leader now and then, and a CreateTopics forwarded to the
# old leader is sent again to the new one (as Kafka's NodeToControllerRequestThread does), which
# then answers TOPIC_ALREADY_EXISTS for topics the first attempt created (seen in test 0081).
KAFKA_FAILURE_DETECTION = {"broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000",
                           "controller.quorum.election.timeout.ms": "1000",
                           "controller.quorum.fetch.timeout.ms": "2000"}


@dataclass
class Outcome:
    """One ``test-runner`` run: ``status`` is PASSED, FAILED, SKIPPED, TIMEOUT or NONE (a test
    that only runs without a broker, skipped by ``-L``); ``reason`` the first failure or skip
    message; ``seconds`` wall time."""
    test: str
    status: str
    reason: str
    seconds: float


def fetch_sources(release: str, workdir: Path) -> Path:
    """librdkafka ``release``'s source tree from its rdkafka-sys crate (downloaded once into
    ``workdir``; ValueError on a SHA-256 mismatch, KeyError for a release not in CRATES)."""
    crate_version, sha256 = CRATES[release]
    tree = workdir / f"librdkafka-{release}"
    if (tree / "configure").exists():
        return tree
    url = f"https://static.crates.io/crates/rdkafka-sys/rdkafka-sys-{crate_version}.crate"
    data = urllib.request.urlopen(url, timeout=120).read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"{url}: SHA-256 {hashlib.sha256(data).hexdigest()}, expected {sha256}")
    archive = workdir / f"rdkafka-sys-{crate_version}.crate"
    archive.write_bytes(data)
    prefix = f"rdkafka-sys-{crate_version}/librdkafka/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        for m in members:
            m.name = m.name[len(prefix):]
        tar.extractall(tree, members=[m for m in members if m.name], filter="tar")
    return tree


def build(tree: Path) -> Path:
    """Build librdkafka and its ``tests/test-runner`` in ``tree`` (once); returns the runner.
    CalledProcessError if a step fails (its output is in ``tree/build.log``)."""
    runner = tree / "tests" / "test-runner"
    if runner.exists():
        return runner
    with open(tree / "build.log", "w") as log:
        for cmd, cwd in ((["./configure", *CONFIGURE], tree), (["make", "-j2", "libs"], tree),
                         (["make", "-j2", "test-runner"], tree / "tests")):
            print(f"build: {' '.join(cmd)} (in {cwd})", flush=True)
            subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, check=True)
    return runner


def kafka_path(workdir: Path) -> Path:
    """A stand-in Kafka installation for ``KAFKA_PATH``: ``libs`` (Kafka's jars from Maven
    Central) and the ``bin`` scripts librdkafka's tests call."""
    home = workdir / f"kafka-{TOOLS_VERSION}"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    libs = home / "libs"
    if not libs.exists():
        libs.symlink_to(maven.resolve_kafka(TOOLS_VERSION))
    run_class = home / "bin" / "kafka-run-class.sh"
    run_class.write_text(f'#!/bin/sh\nCP="{libs}/*"\n[ -n "$CLASSPATH" ] && CP="$CP:$CLASSPATH"\n'
                         'exec java -Xmx256m -cp "$CP" "$@"\n')
    for script, main in (("kafka-topics.sh", "org.apache.kafka.tools.TopicCommand"),
                         ("kafka-acls.sh", "org.apache.kafka.tools.AclCommand")):
        (home / "bin" / script).write_text(f'#!/bin/sh\nexec "{run_class}" {main} "$@"\n')
    for script in (home / "bin").iterdir():
        script.chmod(0o755)
    return home


def broker_tests(tree: Path) -> list[str]:
    """The numbers of librdkafka's 0000-0999 tests (the 1nnn and 8nnn ones need set-ups of their own)."""
    names = {p.name[:4] for p in (tree / "tests").glob("0[0-9][0-9][0-9]-*.c*")}
    return sorted(names)


def run_test(runner: Path, test: str, bootstrap: str, kafka_home: Path, out: Path, full: bool,
             timeout_s: float) -> Outcome:
    """Run one test with ``test-runner -L`` (only tests that need a broker); its log goes to
    ``out/<test>.log``."""
    conf = out / f"{test}.conf"
    conf.write_text(f"bootstrap.servers={bootstrap}\ntest.timeout.multiplier=2\n")
    lib = runner.parent.parent
    env = {**os.environ, "TESTS": test, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": BROKER_VERSION,
           "KAFKA_PATH": str(kafka_home), "BROKERS": bootstrap,
           "LD_LIBRARY_PATH": f"{lib / 'src'}:{lib / 'src-cpp'}"}
    args = [str(runner), "-L"] + ([] if full else ["-Q"])
    started = time.monotonic()
    with open(out / f"{test}.log", "wb") as log:
        try:
            subprocess.run(args, cwd=runner.parent, env=env, stdout=log, stderr=subprocess.STDOUT,
                           timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
    text = ANSI.sub("", (out / f"{test}.log").read_text(errors="replace"))
    return classify(test, text, timed_out, time.monotonic() - started)


def classify(test: str, text: str, timed_out: bool, seconds: float) -> Outcome:
    """The outcome of one test from ``test-runner``'s output: TIMEOUT if librdkafka's own test
    timeout or ``timed_out`` (this runner's) cut it, FAILED if any of its (sub)tests failed, PASSED
    if one passed, SKIPPED if all were skipped, NONE if none ran."""
    statuses = [m.group(2) for m in RESULT.finditer(text)]
    failure = FAILURE.search(text)
    skip = re.search(r"SKIPPING TEST: ([^\n]*)", text)
    if timed_out or (failure and "timed out (timeout set to" in failure.group(2)):
        status = "TIMEOUT"
    elif failure or "FAILED" in statuses:
        status = "FAILED"
    elif "PASSED" in statuses:
        status = "PASSED"
    elif statuses:
        status = "SKIPPED"
    else:
        status = "NONE"
    if failure:
        reason = f"{failure.group(1)}: {failure.group(2).strip()}"
    elif status == "SKIPPED" and skip:
        reason = skip.group(1).strip()
    else:
        reason = "cut after the runner's timeout" if timed_out else ""
    return Outcome(test, status, reason[:300], round(seconds, 1))


def start_kcompat(nodes: int, root: Path):
    """A kcompat single node (``nodes`` 1) or cluster on 127.0.0.1 configured as trivup does,
    started; the caller stops it."""
    from kcompat.testing import Broker, Cluster
    (root / "kcompat").mkdir(parents=True, exist_ok=True)
    if nodes == 1:
        return Broker({**TRIVUP, "broker.rack": "RACK1"}, data_dir=root / "kcompat").start()
    replicated = {"share.coordinator.state.topic.replication.factor": "3",
                  "share.coordinator.state.topic.min.isr": "2"}
    cluster = Cluster(nodes, {**TRIVUP, **replicated, **KAFKA_FAILURE_DETECTION}, root=root / "kcompat")
    for i, node in enumerate(cluster.nodes):
        node.overrides["broker.rack"] = f"RACK{i + 1}"
    return cluster.start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m conformance.librdkafka_tests", description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default=DEFAULT_RELEASE, choices=sorted(CRATES))
    ap.add_argument("--source", type=Path, help="a librdkafka source tree instead of the crate's")
    ap.add_argument("--workdir", type=Path, default=Path(".librdkafka-tests"))
    ap.add_argument("--bootstrap", help="test this broker instead of starting kcompat")
    ap.add_argument("--nodes", type=int, choices=(1, 3), default=3, help="kcompat nodes to start (default 3)")
    ap.add_argument("--tests", help="comma-separated test numbers (default: all 0000-0999)")
    ap.add_argument("--full", action="store_true", help="without test-runner's quick mode (-Q)")
    ap.add_argument("--parallel", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per test")
    ap.add_argument("--json", type=Path, help="write every outcome here")
    args = ap.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    tree = args.source.resolve() if args.source else fetch_sources(args.release, args.workdir.resolve())
    runner = build(tree)
    kafka_home = kafka_path(args.workdir.resolve())
    tests = args.tests.split(",") if args.tests else broker_tests(tree)
    out = args.workdir.resolve() / time.strftime("run-%Y%m%d-%H%M%S")
    out.mkdir()
    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker = start_kcompat(args.nodes, out)
        bootstrap = broker.bootstrap_servers
    print(f"librdkafka tests {tests[0]}..{tests[-1]} ({len(tests)}) from {tree} against {bootstrap}; logs in {out}",
          flush=True)
    try:
        with ThreadPoolExecutor(args.parallel) as pool:
            outcomes = list(pool.map(lambda t: run_test(runner, t, bootstrap, kafka_home, out, args.full,
                                                        args.timeout), tests))
    finally:
        if broker is not None:
            broker.stop()
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
        if o.status not in ("PASSED", "NONE"):
            print(f"{o.test} {o.status:8} {o.seconds:7.1f} s  {o.reason}")
    print("summary: " + ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
          + " (none: runs only without a broker)")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 1 if counts.get("FAILED") or counts.get("TIMEOUT") else 0


if __name__ == "__main__":
    sys.exit(main())
