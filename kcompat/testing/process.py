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
        # the child writes its log file itself (O_APPEND), so log_text() holds every line the broker
        # has logged so far: a test that asserts a line right after the request that logs it reads it
        # (a pipe copied by a thread of this process could be behind: the GIL, a loaded machine)
        with open(self.log_path, "ab") as logf:
            this_start = logf.tell()
            # a session of its own: kill9 takes the broker's worker processes (log cleaner) down
            # with it, as a crash of the machine would
            self.proc = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL, stderr=logf, env=env,
                                         cwd=self.cwd, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self._text_from(this_start)
            m = self.LISTENER_RE.search(text[:text.rfind("\n") + 1])   # whole lines: never half a port
            if m:
                self.bootstrap = f"{m.group(1)}:{m.group(2)}"
                self.port = int(m.group(2))   # kept across restarts so clients can reconnect
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        tail = "".join(self._text_from(this_start).splitlines(keepends=True)[-50:])
        self.kill9()
        raise RuntimeError(f"broker did not start; log:\n{tail}")

    def log_text(self) -> str:
        """Everything the process logged, over all its starts (the log file's text): every line it
        has written so far, since it writes the file itself."""
        return self._text_from(self._log_start)

    def _text_from(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
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
