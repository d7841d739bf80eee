"""Command line: choose the broker(s), select cases, run them, write the reports.

    python -m conformance --bootstrap HOST:PORT --report DIR
    python -m conformance --broker-cmd kcompat --reference kafka --report DIR
    python -m conformance --broker-cmd 'my-broker --port {port} --data {data_dir}' --report DIR
    python -m conformance --bootstrap HOST:PORT --group perf --reference kafka --report DIR
    python -m conformance --list [--group all]

Exit status: 0 if every case passed on the broker under test, 1 if some failed (the reports say why),
2 for usage errors.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conformance import KAFKA_VERSION, SUITE_VERSION, maven, registry
from conformance.clients import client_versions
from conformance.report import load, write_reports
from conformance.runner import run_target
from conformance.targets import CommandTarget, ExternalTarget, environment_python_path, git_revision


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m conformance",
                                description="Run Kafka clients against a Kafka-compatible broker and report what works.")
    target = p.add_argument_group("broker under test (one of)")
    target.add_argument("--bootstrap", metavar="HOST:PORT", help="an already running broker (cannot be restarted)")
    target.add_argument("--broker-cmd", metavar="CMD",
                        help="start the broker with this command; {host}, {port} and {data_dir} are filled in. "
                             "'kcompat' is shorthand for python -m kcompat serve on a free port")
    p.add_argument("--label", help="name of the broker under test in the reports (default: broker, or kcompat)")
    p.add_argument("--revision", help="revision of the broker under test, shown in the reports")
    p.add_argument("--reference", choices=["kafka"], help="also run everything against Apache Kafka (KRaft) "
                                                          "downloaded from Maven Central and started by the suite")
    p.add_argument("--kafka-version", default=KAFKA_VERSION, help=f"Kafka release (default {KAFKA_VERSION})")
    p.add_argument("--group", default="core", choices=registry.GROUPS,
                   help="core: all functional scenarios (default); fast: Python clients, kcat and wire only; "
                        "perf: the performance tools; all: core + perf; security: SSL, SASL and ACL scenarios "
                        "against brokers the suite starts with security listeners (opt-in, not part of all); "
                        "ecosystem: Kafka Streams, Connect and MirrorMaker 2 of Kafka 3.9.1 and 4.3.1, each "
                        "broker with a second cluster beside it (opt-in, not part of all)")
    p.add_argument("--only", action="append", default=[], metavar="PATTERN",
                   help="run only cases whose id, scenario or area matches (glob or substring; repeatable, "
                        "comma-separated)")
    p.add_argument("--clients", help="comma-separated subset of: " + ", ".join(registry.CLIENTS))
    p.add_argument("--report", metavar="DIR", help="write report.json, report.md and report.html here")
    p.add_argument("--host", default="127.0.0.1", help="address for brokers the suite starts (127.0.0.x)")
    p.add_argument("--workdir", help="working directory (default: a temporary directory, removed afterwards)")
    p.add_argument("--keep-workdir", action="store_true", help="keep the working directory (logs, data)")
    p.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every timeout (slow machines)")
    p.add_argument("--perf-records", type=int, default=1_000_000, help="records per performance run")
    p.add_argument("--no-java", action="store_true", help="do not resolve Kafka's jars (Java cases then fail "
                                                          "with that prerequisite)")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    p.add_argument("--fetch-jars", action="store_true",
                   help="resolve Kafka's jars with Maven into the cache and exit (a CI install step)")
    p.add_argument("--rerender", metavar="DIR", help="re-render report.md/report.html from DIR/report.json")
    return p.parse_args(argv)


def _log(msg: str) -> None:
    print(msg, flush=True)


def _kcompat_revision() -> str | None:
    """Git revision of the checkout ``python -m kcompat`` would run from (the kcompat preset)."""
    res = subprocess.run([sys.executable, "-c", "import kcompat, os; print(os.path.dirname(kcompat.__file__))"],
                         capture_output=True, text=True, env=environment_python_path(), timeout=30)
    if res.returncode != 0:
        return None
    return git_revision(Path(res.stdout.strip()).parent)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rerender:
        write_reports(load(Path(args.rerender)), Path(args.rerender))
        _log(f"re-rendered {args.rerender}")
        return 0
    if args.fetch_jars:
        try:
            _log(f"Apache Kafka {args.kafka_version} jars: {maven.resolve_kafka(args.kafka_version, log=_log)}")
            return 0
        except maven.ResolveError as e:
            _log(f"!! {e}")
            return 1
    only = [p.strip() for item in args.only for p in item.split(",") if p.strip()]
    clients = [c.strip() for c in args.clients.split(",")] if args.clients else None
    if clients and not set(clients) <= set(registry.CLIENTS):
        _log(f"unknown client in --clients: {sorted(set(clients) - set(registry.CLIENTS))}")
        return 2
    cases = registry.select(args.group, only, clients)
    if args.list:
        for c in cases:
            _log(f"{c.id:60s} {c.area:14s} {c.title}")
        _log(f"{len(cases)} cases")
        return 0
    if not (args.bootstrap or args.broker_cmd or args.reference):
        _log("give --bootstrap HOST:PORT, --broker-cmd CMD or --reference kafka (see --help)")
        return 2
    if args.bootstrap and args.broker_cmd:
        _log("--bootstrap and --broker-cmd are exclusive")
        return 2
    if not args.report:
        _log("--report DIR is required")
        return 2
    if not cases:
        _log("no case matches the selection")
        return 2

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kcompat-conformance-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    load_start = os.getloadavg()
    run_id = secrets.token_hex(3)
    command = "python -m conformance " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))

    java_lib, java_error = None, None
    needs_java = args.reference or any(c.client == registry.JAVA for c in cases)
    if args.no_java:
        java_error = "Java tools disabled (--no-java)"
    elif needs_java:
        try:
            java_lib = str(maven.resolve_kafka(args.kafka_version, log=_log))
        except Exception as e:
            java_error = f"could not resolve Apache Kafka {args.kafka_version} jars: {e}"
            _log(f"!! {java_error}")
        if shutil.which("java") is None:
            java_error, java_lib = "java is not installed (Java 17 is needed for Kafka's tools)", None

    runs = []
    secure = args.group == "security"  # start the brokers with the security listeners
    peered = args.group == "ecosystem"  # start a second cluster beside each broker (MirrorMaker 2)
    common = dict(run_id=run_id, java_lib=java_lib, java_error=java_error, kafka_version=args.kafka_version,
                  timeout_scale=args.timeout_scale, perf_records=args.perf_records, progress=_log)
    try:
        if args.bootstrap or args.broker_cmd:
            if args.bootstrap:
                primary = ExternalTarget(args.bootstrap, label=args.label or "broker")
            elif secure and args.broker_cmd == "kcompat":
                from conformance.security import SecureCommandTarget

                primary = SecureCommandTarget(args.broker_cmd, workdir / "broker", host=args.host,
                                              label=args.label or "broker")
            elif peered:
                from conformance.ecosystem import PeerCommandTarget

                primary = PeerCommandTarget(args.broker_cmd, workdir / "broker", host=args.host,
                                            label=args.label or "broker")
            else:  # security cases against another broker fail with a prerequisite reason
                primary = CommandTarget(args.broker_cmd, workdir / "broker", host=args.host,
                                        label=args.label or "broker")
            _log(f"== {primary.label}: {len(cases)} cases")
            run = run_target(primary, cases, workdir=workdir / "primary", **common)
            revision = args.revision or (_kcompat_revision() if args.broker_cmd == "kcompat" else None)
            if revision:
                run.target["revision"] = revision
            runs.append(run)
        if args.reference and not any(r.interrupted for r in runs):
            from conformance.reference import ReferenceKafka

            if java_lib is None:
                from conformance.runner import TargetRun
                from conformance.model import CaseResult

                ref_run = TargetRun({"label": f"Kafka {args.kafka_version}", "kind": "reference"},
                                    error=f"reference Kafka unavailable: {java_error}")
                ref_run.results = [CaseResult(c.id, c.scenario, c.client, c.area, "fail", "prerequisite",
                                              ref_run.error) for c in cases]
                runs.append(ref_run)
            else:
                if secure:
                    from conformance.security import SecureReferenceKafka as ref_class
                elif peered:
                    from conformance.ecosystem import PeerReferenceKafka as ref_class
                else:
                    ref_class = ReferenceKafka
                ref = ref_class(Path(java_lib), args.kafka_version, workdir / "kafka", host=args.host)
                _log(f"== {ref.label} (reference, KRaft): {len(cases)} cases")
                runs.append(run_target(ref, cases, workdir=workdir / "reference", **common))
    finally:
        finished = time.time()
        if runs:
            doc = {
                "suite": {"version": SUITE_VERSION, "kafka_version": args.kafka_version, "command": command,
                          "started": started, "finished": finished,
                          "finished_at": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(finished)),
                          "duration_s": round(finished - started, 1), "group": args.group, "only": only,
                          "run_id": run_id, "machine": {"cpus": os.cpu_count(), "platform": sys.platform,
                                                          "load_start": list(load_start),
                                                          "load_end": list(os.getloadavg())}},
                "clients": client_versions(args.kafka_version if java_lib else None),
                "scenarios": {c.scenario: registry.scenario_info(c.scenario) for c in cases},
                "targets": [r.to_json() for r in runs],
            }
            paths = write_reports(doc, Path(args.report))
            _log(f"reports: {paths['markdown']}  {paths['html']}  {paths['json']}")
        if not args.keep_workdir and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        elif args.keep_workdir or args.workdir:
            _log(f"working directory kept: {workdir}")

    if any(r.interrupted for r in runs):
        return 130
    primary_results = runs[0].results if runs else []
    failed = [r for r in primary_results if r.status != "pass"]
    _log(f"{runs[0].target['label'] if runs else '?'}: {len(primary_results) - len(failed)} of "
         f"{len(primary_results)} cases passed")
    return 1 if failed else 0
