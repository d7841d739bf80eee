"""Start and stop a real ``python -m kcompat serve`` process (tests, benchmarks, the pytest plugin).

The broker listens on a port of its own below the kernel's ephemeral range (:mod:`kcompat.testing.ports`,
so that a restart gets the same port back); its address is read from its ``started listener
<host>:<port>`` log line. Data lives in a directory the caller owns, so a test can restart (``stop`` +
``start``) or ``kill9`` + ``start`` the same broker over the same data. The process's log (stderr)
goes to ``log_path``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kcompat.testing.ports import free_ports

_LISTENER = re.compile(r"started listener (\S+):(\d+)")
# the directory that holds the kcompat package: a child finds the same kcompat as its parent, an
# installed one or a checkout's
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class BrokerProcess:
    """A kcompat broker subprocess. ``bootstrap`` is ``host:port`` once started.

    ``overrides`` are broker properties (Kafka's names, string values) passed as ``--override``;
    ``listeners`` and ``log.dirs`` default to ``host``:``port`` and ``data_dir``. ``cwd`` is the
    child's working directory (default: the caller's)."""

    LISTENER_RE = _LISTENER  # the log line that says the process serves, with its address

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, log_path: Path | None = None, cwd: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.host = host
        # a port of our own below the ephemeral range, kept across restarts (kcompat.testing.ports)
        self.port = port or free_ports(1, host)[0]
        self.proc: subprocess.Popen | None = None
        self.bootstrap: str | None = None
        self.log_path = log_path or (self.data_dir.parent / f"{self.data_dir.name}-broker.log")
        self.cwd = cwd
        try:   # log_text() is this object's part of a log file that an earlier object may have begun
            self._log_start = self.log_path.stat().st_size
        except FileNotFoundError:
            self._log_start = 0
        self._tail: list[str] = []     # this start's last lines, for the error of a failed start
        self._reader: threading.Thread | None = None

    def args(self) -> list[str]:
        """The ``python -m kcompat serve --override ...`` command line."""
        # no HTTP listener unless asked: test brokers would compete for its one documented port
        overrides = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": str(self.data_dir),
                     "http.listeners": ""}
        overrides.update(self.overrides)
        cmd = [sys.executable, "-m", "kcompat", "serve"]
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, timeout: float = 120.0) -> "BrokerProcess":
        """Start the process and wait for its listener line (``timeout`` seconds bounds a hung
        start only: an overloaded machine can take tens of seconds to import and start). A process
        still running is left as it is, so ``with BrokerProcess(...).start() as b`` (and a
        cluster's ``with Cluster(...).start() as c``) starts it once, not a second, orphaned copy."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.bootstrap = None   # set again from this start's listener line, never left from the last
        env = dict(os.environ)
        env["PYTHONPATH"] = str(PACKAGE_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        logf = open(self.log_path, "a")
        # a session of its own: kill9 takes the broker's worker processes (log cleaner) down with
        # it, as a crash of the machine would, instead of leaving them holding its stderr open
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=env, cwd=self.cwd, start_new_session=True)
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                logf.write(line)
                logf.flush()
                if not found.is_set():
                    self._tail = self._tail[-49:] + [line]
                m = self.LISTENER_RE.search(line)
                if m and not found.is_set():
                    self.bootstrap = f"{m.group(1)}:{m.group(2)}"
                    # keep the same port across restarts so clients can reconnect
                    self.port = int(m.group(2))
                    found.set()
            logf.close()
            found.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        if not found.wait(timeout) or self.bootstrap is None or self.proc.poll() is not None:
            self.kill9()
            raise RuntimeError(f"broker did not start; log:\n{''.join(self._tail)}")
        return self

    def log_text(self) -> str:
        """Everything the process logged, over all its starts (the log file's text)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_start)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            raise RuntimeError("broker did not stop within the timeout after SIGTERM")
        finally:
            if self._reader is not None:
                self._reader.join(5)
        self.proc = None
        return rc

    def kill9(self) -> None:
        """SIGKILL the broker and its worker processes (its process group) and reap it; a later
        :meth:`start` recovers its data as after a crash."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        if self._reader is not None:
            self._reader.join(5)
        self.proc = None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the broker and its worker processes (its process group). Raises
        RuntimeError if it is not running."""
        if self.proc is None:
            raise RuntimeError("the broker is not running")
        os.killpg(self.proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP the broker (and its workers): connections stay open, nothing is answered."""
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused broker."""
        self.signal(signal.SIGCONT)

    def restart(self) -> "BrokerProcess":
        """:meth:`stop` (SIGTERM) and :meth:`start` again over the same data and port."""
        self.stop()
        return self.start()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc is not None:
            try:
                self.stop()
            except Exception:
                self.kill9()


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """``predicate()``'s first truthy value, polled every ``interval`` s; AssertionError naming
    ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
