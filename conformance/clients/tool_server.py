"""Kafka's command-line tools run one after another in one JVM (``ToolServer.java`` beside this
module), for :meth:`conformance.clients.java.JavaTools.run`: on this machine a tool's JVM start
costs 1-3 s, more than most tools' work. The tool's own ``main`` runs with the same arguments, the
same jars and JVM flags; what it prints to stdout and stderr and the status it exits with are
returned as :func:`conformance.procs.run` returns them (the status of ``Exit.exit``, Kafka's
``org.apache.kafka.common.utils.Exit``, or ``System.exit``; 0 when ``main`` returns; 1 with the
JVM's ``Exception in thread "main"`` report when it throws).

One server per (jar directory, JVM flags, working directory) and Python process; a run that
passes its timeout kills the server (the next run starts another) and is reported timed out, as
``procs.run`` does. Runs with stdin input, or while the server is busy with another thread's run,
start a JVM of their own, as do all runs when the server cannot start (no javac, say).
Only short-lived tools' commands (``java_command(quick=True)``) are taken: the perf group's
measured runs (``quick=False``) keep a JVM of their own. ``KCOMPAT_TOOLS_FORK=1`` in the
environment turns the server off.
"""

from __future__ import annotations

import atexit
import base64
import fcntl
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from conformance import maven, procs
from conformance.reference import java_command

SOURCE = Path(__file__).with_name("ToolServer.java")
SERVER_HEAP = "512m"
MAX_SERVERS = 2   # per Python process (an xdist worker): JVMs of distinct jar directories or flags
LOG4J_FLAG = "-Dlog4j.configuration=file:"
QUICK_FLAG = "-XX:TieredStopAtLevel=1"   # java_command(quick=True): a short-lived tool
_servers: dict[tuple, "ToolServer"] = {}
_servers_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("KCOMPAT_TOOLS_FORK", "") != "1" and shutil.which("javac") is not None


def compiled(source: Path, cache: Path, classpath: str = "") -> Path:
    """The directory holding the classes javac makes of ``source`` against ``classpath``, compiled
    once per source text and classpath (concurrent callers, e.g. two xdist workers, wait for one
    compilation)."""
    text = source.read_bytes()
    d = cache / f"javac-{source.stem}-{hashlib.sha256(text + classpath.encode()).hexdigest()[:12]}"
    done = d / f"{source.stem}.class"
    if done.exists():
        return d
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "javac.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            tmp = cache / f"{d.name}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(tmp), str(source)], check=True,
                           capture_output=True, timeout=300)
            shutil.rmtree(d, ignore_errors=True)
            os.replace(tmp, d)
    return d


def source_command(lib: Path, source: Path, args: list[str], heap: str = "512m", **java_options) -> list[str]:
    """:func:`conformance.reference.java_command` of the program ``source`` (one ``.java`` file
    whose first class has the main method, as Java's source-file mode runs it), compiled once by
    javac with ``lib``'s jars instead of at every start as source-file mode does (about a second
    of each start on this machine); ``java_options`` are java_command's other keywords."""
    classes = compiled(source, maven.cache_root(), f"{lib}/*")
    cmd = java_command(lib, source.stem, args, heap=heap, **java_options)
    cmd[cmd.index("-cp") + 1] = f"{classes}{os.pathsep}{lib}/*"
    return cmd


class ToolServer:
    """One ToolServer JVM: ``java <jvm_flags> -cp <classes>:<lib>/* ToolServer``."""

    def __init__(self, jvm_flags: list[str], lib: Path, classes: Path) -> None:
        self.cmd = ["java", *jvm_flags, "-Djava.security.manager=allow",
                    "--add-opens=java.base/java.lang=ALL-UNNAMED", "-cp", f"{classes}{os.pathsep}{lib}/*",
                    "ToolServer"]
        self.cwd = os.getcwd()
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, cwd=self.cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, encoding="ascii", bufsize=1)
        ready = self.proc.stdout.readline()
        if ready.strip() != "READY":
            self._kill()
            raise RuntimeError(f"ToolServer did not start: {ready!r}")

    def stop(self) -> None:
        """End the JVM (closing its stdin ends it; killed if busy)."""
        with self.lock:
            self._kill()

    def _kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, cmd: list[str], main: str, args: list[str], timeout: float) -> procs.Completed | None:
        """Run ``main`` with ``args``; None if the server is busy (the caller starts a JVM)."""
        if not self.lock.acquire(blocking=False):
            return None
        start = time.monotonic()
        try:
            if self.proc is None or self.proc.poll() is not None:
                try:
                    self._start()
                except (OSError, RuntimeError):
                    return None
            proc = self.proc
            line = " ".join(base64.b64encode(s.encode()).decode() for s in [main, *args])
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            answer: list[str] = []
            reader = threading.Thread(target=lambda: answer.append(proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(max(0.0, timeout - (time.monotonic() - start)))
            if not answer or not answer[0].startswith("DONE "):
                # timed out (killed, as procs.run kills), or the JVM exited: a thread other than
                # the tool's called System.exit; its status is the run's, what it printed is lost
                timed_out = not answer
                if timed_out:
                    proc.kill()
                status = proc.wait()
                self.proc = None
                return procs.Completed(list(cmd), status, "", "", timed_out, time.monotonic() - start)
            _done, status, out, err = (answer[0].rstrip("\n").split(" ") + ["", ""])[:4]
            return procs.Completed(list(cmd), int(status), base64.b64decode(out).decode("utf-8", "replace"),
                                   base64.b64decode(err).decode("utf-8", "replace"), False, time.monotonic() - start)
        finally:
            self.lock.release()


def run(cmd: list[str], timeout: float) -> procs.Completed | None:
    """Run the ``java ... -cp <lib>/* <main> <args>`` command ``cmd`` (as
    :func:`conformance.reference.java_command` builds it) in a ToolServer; None when it cannot
    (server off or busy, another command shape): the caller runs ``cmd`` itself."""
    if not enabled() or "-cp" not in cmd:
        return None
    i = cmd.index("-cp")
    flags, lib_glob, main, args = cmd[1:i], cmd[i + 1], cmd[i + 2], cmd[i + 3:]
    if not lib_glob.endswith("/*") or main.endswith(".java") or QUICK_FLAG not in flags:
        return None   # not a short-lived tool's command (a measured one, e.g. perf's, has a JVM of its own)
    lib = Path(lib_glob[:-2])
    cache = maven.cache_root()
    flags = _server_flags(flags, cache)
    key = (tuple(flags), str(lib), os.getcwd())   # relative paths in arguments mean the same
    with _servers_lock:
        server = _servers.pop(key, None)
        if server is None:
            try:
                server = ToolServer(flags, lib, compiled(SOURCE, cache))
            except (OSError, subprocess.SubprocessError):
                return None
        _servers[key] = server            # the most recently used last
        while len(_servers) > MAX_SERVERS:
            _servers.pop(next(iter(_servers))).stop()
    return server.run(cmd, main, args, timeout)


def _server_flags(flags: list[str], cache: Path) -> list[str]:
    """The JVM flags of the server for a command's ``flags``: the heap of the largest tool
    (``SERVER_HEAP``) and a log4j file of the same text in ``cache`` for the per-test copies
    :class:`conformance.clients.java.JavaTools` writes, so that one server serves every test."""
    out = [f"-Xmx{SERVER_HEAP}"]
    for f in flags:
        if f.startswith("-Xmx"):
            continue
        if f.startswith(LOG4J_FLAG):
            text = Path(f[len(LOG4J_FLAG):]).read_bytes()
            canonical = cache / f"tool-server-log4j-{hashlib.sha256(text).hexdigest()[:12]}.properties"
            if not canonical.exists():
                cache.mkdir(parents=True, exist_ok=True)
                tmp = canonical.with_suffix(f".tmp-{os.getpid()}")
                tmp.write_bytes(text)
                os.replace(tmp, canonical)
            f = LOG4J_FLAG + str(canonical)
        out.append(f)
    return out


def run_command(cmd: list[str], timeout: float) -> procs.Completed:
    """:func:`run`, or else :func:`conformance.procs.run` of ``cmd``: a tool command run the
    fastest way it can be."""
    res = run(cmd, timeout)
    return res if res is not None else procs.run(cmd, timeout=timeout)


def stop_all() -> None:
    """Stop every ToolServer of this process."""
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


atexit.register(stop_all)
