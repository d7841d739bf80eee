"""External processes with timeouts that always end, and small network helpers.

Every process the suite starts goes through :func:`run` (run to completion within a timeout) or
:class:`Background` (a long-running process whose stdout lines are collected by a thread, stopped
with SIGTERM then SIGKILL). Processes started inside a case worker stay in the worker's process
group, so the runner can end a timed-out case together with everything it started.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kcompat.testing.ports import free_ports


@dataclass
class Completed:
    """Outcome of :func:`run`."""

    cmd: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def summary(self, lines: int = 15) -> str:
        """A short description for failure reasons: exit status and the end of stderr/stdout."""
        state = f"timed out after {self.duration_s:.0f}s" if self.timed_out else f"exit status {self.returncode}"
        out = tail(self.stderr.strip() or self.stdout.strip(), lines)
        return f"{Path(self.cmd[0]).name} {state}" + (f": {out}" if out else "")


def tail(text: str, lines: int = 15, width: int = 2000) -> str:
    """The last ``lines`` lines of ``text``, at most ``width`` characters."""
    t = "\n".join(text.splitlines()[-lines:])
    return t[-width:]


def run(cmd: list[str], timeout: float, *, input: str | bytes | None = None, env: dict | None = None,
        cwd: str | Path | None = None) -> Completed:
    """Run ``cmd`` to completion; kill it when ``timeout`` seconds pass. Never raises on failure."""
    start = time.monotonic()
    text = not isinstance(input, bytes)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, text=text,
                            errors="replace" if text else None)
    timed_out = False
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        out, err = proc.communicate()
    if not text:
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
    return Completed(list(cmd), proc.returncode, out or "", err or "", timed_out, time.monotonic() - start)


class Background:
    """A long-running process; stdout lines are collected (and optionally parsed) by a thread.

    ``on_line`` is called for each stdout line from the reader thread. stderr goes to ``stderr_path``
    (or is discarded). Use as a context manager: leaving the block stops the process.
    """

    def __init__(self, cmd: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
                 stderr_path: Path | None = None, on_line=None, stdin_data: str | None = None) -> None:
        self.cmd = list(cmd)
        self.lines: list[str] = []
        self._on_line = on_line
        self._stderr_file = open(stderr_path, "a") if stderr_path else None
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=self._stderr_file or subprocess.DEVNULL,
            env=env, cwd=cwd, text=True, errors="replace", bufsize=1)
        if stdin_data is not None:
            threading.Thread(target=self._feed, args=(stdin_data,), daemon=True).start()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _feed(self, data: str) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            with self._lock:
                self.lines.append(line)
            if self._on_line is not None:
                try:
                    self._on_line(line)
                except Exception:  # a parsing problem must not kill the reader
                    pass

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int | None:
        """Wait for exit; returns the exit status, or None if still running after ``timeout``."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(5)
        return rc

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``grace`` seconds. Returns the exit status."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            except ProcessLookupError:
                pass
        self._reader.join(5)
        if not self._reader.is_alive():   # the reader is at EOF: its pipe can go (else it is reading it)
            for pipe in (self.proc.stdout, self.proc.stdin):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
        if self._stderr_file:
            self._stderr_file.close()
            self._stderr_file = None
        return self.proc.returncode

    def __enter__(self) -> "Background":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group led by ``pid``, ignoring groups that are already gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now, never handed out before by this process and
    outside the kernel's ephemeral range (:func:`kcompat.testing.ports.free_ports`): the port
    ``bind(port 0)`` gave could come back from the next such call once released (a reference
    Kafka's two listener ports once collided that way), or be taken by an outgoing connection
    before the server binds it."""
    return free_ports(1, host)[0]


def split_hostport(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; raise TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # keep polling; report the last error on timeout
            last_exc = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}" +
                       (f" (last error: {last_exc})" if last_exc else ""))
