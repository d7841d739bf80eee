"""Cases run in a separate worker process so that a hung client can be killed.

The worker is a ``spawn``-ed process that makes itself a process-group leader; every process a case
starts (Java tools, kcat) stays in that group. The runner sends ``("run", case_id)`` and waits for
``("result", ...)`` up to the case's timeout; when it passes, the whole group is killed
(SIGKILL), the case is reported as a timeout and a fresh worker is started for the next case.

A case that needs the broker restarted sends ``("restart", mode)``; the runner (which owns the
broker process) restarts it and answers ``("restarted", error_or_None)``. Time spent restarting
does not count against the case's timeout.

The worker's stdout and stderr (client library logs) go to a log file, not the console.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Callable

from conformance import procs
from conformance.model import FAIL, CaseResult
from conformance.registry import Case
from conformance.targets import TargetInfo


def _worker_main(conn, target: TargetInfo, log_path: str) -> None:
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    from conformance.context import run_case
    from conformance.registry import get_case

    def restart(mode: str) -> None:
        conn.send(("restart", mode))
        tag, error = conn.recv()
        if error:
            raise RuntimeError(f"broker restart failed: {error}")

    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        case = get_case(msg[1])
        print(f"=== {time.strftime('%H:%M:%S')} {case.id}", flush=True)
        result = run_case(case, target, restart)
        conn.send(("result", result.to_json()))


class CaseWorker:
    """Parent-side handle of the worker process for one target."""

    def __init__(self, target: TargetInfo, log_path: Path, restart: Callable[[str], None]) -> None:
        self.target = target
        self.log_path = Path(log_path)
        self._restart = restart
        self._proc = None
        self._conn = None

    def _spawn(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main, args=(child, self.target, str(self.log_path)),
                                 name="conformance-worker", daemon=False)
        self._proc.start()
        child.close()
        self._conn = parent

    def _kill(self) -> None:
        if self._proc is not None:
            procs.kill_group(self._proc.pid)
            self._proc.join(10)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def run(self, case: Case, timeout: float) -> CaseResult:
        """Run ``case``; on timeout or crash, kill the worker's process group and report it."""
        if self._proc is None or not self._proc.is_alive():
            self._spawn()
        start = time.monotonic()
        deadline = start + timeout
        self._conn.send(("run", case.id))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                return CaseResult(case.id, case.scenario, case.client, case.area, FAIL, "timeout",
                                  f"timed out after {timeout:.0f}s (the case and every process it started "
                                  "were killed)", duration_s=round(time.monotonic() - start, 2))
            try:
                ready = self._conn.poll(min(remaining, 1.0))
            except (EOFError, OSError):
                ready = True
            if not ready:
                if not self._proc.is_alive():
                    return self._crashed(case, start)
                continue
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                return self._crashed(case, start)
            if msg[0] == "restart":
                t0 = time.monotonic()
                error = None
                try:
                    self._restart(msg[1])
                except Exception as e:
                    error = f"{type(e).__name__}: {e}"
                deadline += time.monotonic() - t0
                self._conn.send(("restarted", error))
            elif msg[0] == "result":
                return CaseResult.from_json(msg[1])

    def _crashed(self, case: Case, start: float) -> CaseResult:
        code = self._proc.exitcode if self._proc is not None else None
        self._kill()
        return CaseResult(case.id, case.scenario, case.client, case.area, FAIL, "error",
                          f"the case worker process died (exit code {code}); see {self.log_path}",
                          duration_s=round(time.monotonic() - start, 2))

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._proc.join(10)
            except (OSError, BrokenPipeError):
                pass
        self._kill()
