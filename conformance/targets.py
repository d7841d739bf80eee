"""Brokers the suite runs scenarios against.

- :class:`ExternalTarget` — a bootstrap address given with ``--bootstrap``. The suite cannot
  restart it, so scenarios that need a restart fail with that prerequisite named.
- :class:`CommandTarget` — a broker the suite starts itself from ``--broker-cmd`` (with
  ``{host}``, ``{port}`` and ``{data_dir}`` placeholders); it can be restarted cleanly (SIGTERM,
  start again on the same port and data) or after ``kill -9``.
- :class:`conformance.reference.ReferenceKafka` — Apache Kafka in KRaft mode (``--reference kafka``).

:class:`TargetInfo` is the picklable description handed to the case worker.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from conformance import procs, wire

KCOMPAT_PRESET = "kcompat"
KCOMPAT_COMMAND = ("{python} -m kcompat serve --override listeners=PLAINTEXT://{host}:{port} "
                   "--override log.dirs={data_dir}")


@dataclass
class TargetInfo:
    """What a case knows about the broker it runs against (picklable, sent to the worker)."""

    label: str
    kind: str  # "external", "command", "reference"
    bootstrap: str
    restartable: bool
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    workdir: str = "/tmp"
    java_lib: str | None = None  # directory of Kafka's jars, if resolved
    java_error: str | None = None  # why the Java tools are unavailable
    kafka_version: str = ""
    timeout_scale: float = 1.0
    run_id: str = ""
    perf_records: int = 1_000_000
    security: dict | None = None  # the security listeners, users and CA (--group security), else None
    peer_bootstrap: str | None = None  # a second cluster beside the broker (--group ecosystem), else None


class NotRestartable(RuntimeError):
    pass


class Target:
    """A broker the suite runs against."""

    label = "broker"
    kind = "external"
    restartable = False
    bootstrap: str = ""

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def restart(self, mode: str = "clean") -> None:
        raise NotRestartable(f"the suite cannot restart {self.label} ({self.kind} bootstrap {self.bootstrap}); "
                             "start it with --broker-cmd to allow restarts")

    def describe(self) -> dict:
        return {"label": self.label, "kind": self.kind, "bootstrap": self.bootstrap, "restartable": self.restartable}

    def log_tail(self, lines: int = 40) -> str:
        return ""


def wait_serving(bootstrap: str, timeout: float, proc: subprocess.Popen | None = None, what: str = "broker") -> None:
    """Wait until ``bootstrap`` answers ApiVersions and Metadata (and ``proc`` is still alive)."""

    def ready():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        with wire.Connection(bootstrap, timeout=5) as conn:
            if wire.api_versions(conn, 0).error_code != 0:
                return False
            md = wire.metadata(conn, [], version=1)
            return bool(md.brokers)

    try:
        procs.wait_until(ready, timeout, interval=0.25, what=f"{what} at {bootstrap} to serve")
    except TimeoutError:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}") from None
        raise


class ExternalTarget(Target):
    """A broker someone else runs; the suite only connects to it."""

    def __init__(self, bootstrap: str, label: str = "broker") -> None:
        self.bootstrap = bootstrap
        self.label = label

    def start(self) -> None:
        wait_serving(self.bootstrap, 30, what=self.label)


class ProcessTarget(Target):
    """A broker process the suite starts and owns (in its own process group): start and wait until
    it serves, SIGTERM stop, SIGKILL, restart on the same port and data. Subclasses say what to run
    (:meth:`launch`) and set ``bootstrap``, ``label``, ``start_timeout``."""

    restartable = True
    proc: subprocess.Popen | None = None
    restarts = 0
    start_timeout = 60.0

    def launch(self) -> tuple[list[str], Path, dict]:
        """(argv, file for its stdout and stderr, extra ``subprocess.Popen`` arguments)."""
        raise NotImplementedError

    def start(self) -> None:
        argv, out_path, popen_args = self.launch()
        out = open(out_path, "a")
        out.write(f"\n=== {time.strftime('%H:%M:%S')} starting: {' '.join(argv)}\n")
        out.flush()
        self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, **popen_args)
        out.close()
        try:
            wait_serving(self.bootstrap, self.start_timeout, self.proc, what=self.label)
        except Exception as e:
            self.kill()
            raise RuntimeError(f"{self.label} did not start: {e}\n{self.log_tail()}") from None

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            procs.kill_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                procs.kill_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            procs.kill_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def restart(self, mode: str = "clean") -> None:
        """``clean``: SIGTERM and wait; ``kill``: SIGKILL. Then start again on the same port and data."""
        if mode == "kill":
            self.kill()
        else:
            self.stop()
        self.restarts += 1
        self.start()


class CommandTarget(ProcessTarget):
    """A broker started by the suite from a command template; restartable."""

    kind = "command"

    def __init__(self, command: str, workdir: Path, *, host: str = "127.0.0.1", label: str = "broker",
                 start_timeout: float = 60.0) -> None:
        if command == KCOMPAT_PRESET:
            command = KCOMPAT_COMMAND.replace("{python}", shlex.quote(sys.executable))
            if label == "broker":
                label = "kcompat"
        self.template = command
        self.workdir = Path(workdir)
        self.host = host
        self.label = label
        self.port = procs.free_port(host)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "broker.log"
        self.start_timeout = start_timeout
        self.bootstrap = f"{host}:{self.port}"

    def argv(self) -> list[str]:
        cmd = self.template.format(host=self.host, port=self.port, data_dir=self.data_dir)
        return shlex.split(cmd)

    def launch(self) -> tuple[list[str], Path, dict]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.argv(), self.log_path, {"env": environment_python_path(), "cwd": self.workdir}

    def describe(self) -> dict:
        d = super().describe()
        d.update({"command": self.template, "data_dir": str(self.data_dir), "log": str(self.log_path)})
        return d

    def log_tail(self, lines: int = 40) -> str:
        try:
            return procs.tail(self.log_path.read_text(errors="replace"), lines)
        except OSError:
            return ""


def git_revision(path: Path) -> str | None:
    """``<short sha>[+dirty]`` of the checkout at ``path``, if it is one."""
    res = procs.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], timeout=10)
    if not res.ok:
        return None
    # --no-optional-locks: a read-only look that never takes the index lock a concurrent commit needs
    dirty = procs.run(["git", "--no-optional-locks", "-C", str(path), "status", "--porcelain",
                       "--untracked-files=no"], timeout=10)
    return res.stdout.strip() + ("+dirty" if dirty.ok and dirty.stdout.strip() else "")


def environment_python_path() -> dict:
    """The environment for a broker command: the checkout holding the suite is appended to
    PYTHONPATH (so the ``kcompat`` preset works from any directory; an explicit PYTHONPATH wins)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = (env["PYTHONPATH"] + os.pathsep if env.get("PYTHONPATH") else "") + root
    return env
