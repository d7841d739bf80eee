"""Run a list of cases against one target and collect the results.

For each target: start it (if the suite owns it), read its ApiVersions, then run every case in the
worker process (:mod:`conformance.worker`) with the case's timeout. After each case the runner
checks that the broker still serves; a broker that died or stopped answering is recorded on that
case (it fails with the reason) and, if the suite owns it, restarted so the remaining cases run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from conformance import wire
from conformance.context import SetupAdmin, name_prefix
from conformance.model import FAIL, CaseResult
from conformance.registry import Case
from conformance.targets import Target, TargetInfo
from conformance.worker import CaseWorker


@dataclass
class TargetRun:
    """Everything learned about one target in one run."""

    target: dict
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    results: list[CaseResult] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0
    error: str | None = None
    interrupted: bool = False

    def to_json(self) -> dict:
        return {"target": self.target, "api_versions": {str(k): list(v) for k, v in sorted(self.api_versions.items())},
                "results": [r.to_json() for r in self.results], "events": self.events,
                "started": self.started, "finished": self.finished, "error": self.error}

    @classmethod
    def from_json(cls, d: dict) -> "TargetRun":
        return cls(d["target"], {int(k): tuple(v) for k, v in d.get("api_versions", {}).items()},
                   [CaseResult.from_json(r) for r in d.get("results", [])], d.get("events", []),
                   d.get("started", 0.0), d.get("finished", 0.0), d.get("error"))


def serving(bootstrap: str, timeout: float = 5.0) -> str | None:
    """None if the broker answers ApiVersions and Metadata, else why not."""
    try:
        with wire.Connection(bootstrap, timeout) as conn:
            if wire.api_versions(conn, 0).error_code != 0:
                return "ApiVersions answered with an error"
            wire.metadata(conn, [], version=1)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def run_target(target: Target, cases: list[Case], *, workdir: Path, run_id: str, java_lib: str | None,
               java_error: str | None, kafka_version: str, timeout_scale: float = 1.0, perf_records: int = 1_000_000,
               progress: Callable[[str], None] = print) -> TargetRun:
    """Start ``target`` if needed, run ``cases`` against it, stop it; returns the :class:`TargetRun`."""
    workdir.mkdir(parents=True, exist_ok=True)
    run = TargetRun(target.describe(), started=time.time())
    try:
        target.start()
        run.target = target.describe()
        run.api_versions = wire.fetch_api_versions(target.bootstrap)
    except Exception as e:
        run.error = f"{target.label} is not usable: {e}"
        progress(f"!! {run.error}")
        for case in cases:
            run.results.append(CaseResult(case.id, case.scenario, case.client, case.area, FAIL, "prerequisite",
                                          run.error))
        run.finished = time.time()
        target.stop()
        return run

    info = TargetInfo(label=target.label, kind=target.kind, bootstrap=target.bootstrap,
                      restartable=target.restartable, api_versions=run.api_versions, workdir=str(workdir / "cases"),
                      java_lib=java_lib, java_error=java_error, kafka_version=kafka_version,
                      timeout_scale=timeout_scale, run_id=run_id, perf_records=perf_records,
                      security=getattr(target, "security", None),
                      peer_bootstrap=getattr(target, "peer_bootstrap", None))

    def restart(mode: str) -> None:
        run.events.append(f"{time.strftime('%H:%M:%S')} restart ({mode}) requested by a case")
        target.restart(mode)

    worker = CaseWorker(info, workdir / "worker.log", restart)
    width = len(str(len(cases)))
    try:
        for i, case in enumerate(cases, 1):
            result = worker.run(case, case.timeout_s * timeout_scale)
            if result.kind == "timeout":
                _cleanup_prefix(target.bootstrap, name_prefix(run_id, case), result)
            problem = serving(target.bootstrap)
            if problem is not None:
                _broker_down(target, result, problem, run)
            run.results.append(result)
            mark = "PASS" if result.status == "pass" else "FAIL"
            line = f"[{i:>{width}}/{len(cases)}] {target.label}: {mark} {case.id} ({result.duration_s:.1f}s)"
            if result.status != "pass":
                line += f" — {result.reason.splitlines()[0][:200] if result.reason else result.kind}"
            progress(line)
    except KeyboardInterrupt:
        run.interrupted = True
        run.events.append(f"{time.strftime('%H:%M:%S')} interrupted after {len(run.results)} of {len(cases)} cases")
        progress("!! interrupted: stopping the broker and the case worker")
    finally:
        worker.close()
        run.finished = time.time()
        try:
            target.stop()
        except Exception as e:
            run.events.append(f"stopping {target.label} failed: {e}")
    return run


def _broker_down(target: Target, result: CaseResult, problem: str, run: TargetRun) -> None:
    """The broker stopped serving after ``result``'s case: record it and try to bring it back."""
    note = f"broker not serving after this case: {problem}"
    tail = target.log_tail(30)
    result.details["broker_after_case"] = note
    if tail:
        result.details["broker_log_tail"] = tail
    if result.status == "pass":
        result.status, result.kind = FAIL, "assertion"
        result.reason = note
    else:
        result.reason += f" (and {note})"
    run.events.append(f"{time.strftime('%H:%M:%S')} {result.case_id}: {note}")
    if target.restartable:
        try:
            target.restart("kill")
            run.events.append(f"{time.strftime('%H:%M:%S')} restarted {target.label} to continue")
        except Exception as e:
            run.events.append(f"restarting {target.label} failed: {e}")
    else:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and serving(target.bootstrap) is not None:
            time.sleep(1)


def _cleanup_prefix(bootstrap: str, prefix: str, result: CaseResult) -> None:
    """Delete the topics a killed case left behind."""
    try:
        admin = SetupAdmin(bootstrap)
        left = admin.topics_with_prefix(prefix)
        errors = admin.delete_topics(left)
        if errors:
            result.details["cleanup_errors"] = errors
    except Exception as e:
        result.details["cleanup_errors"] = [str(e)]
