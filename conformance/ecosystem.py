"""The ``ecosystem`` group: Kafka's Java applications (Streams, Connect, MirrorMaker 2) as clients.

What the scenarios in :mod:`conformance.scenarios.eco_streams`, :mod:`.eco_connect` and
:mod:`.eco_mirror` share:

- :func:`apps_lib` — the application jars of one Kafka release (:func:`conformance.maven.resolve_apps`;
  the scenarios run with both :data:`APP_VERSIONS`), a missing resolution failing the case as a
  prerequisite;
- :class:`App` — one application JVM (``java -cp <apps lib>/* <main> args``) in the background with
  its log4j output in the case's work directory, stopped with SIGTERM or killed with SIGKILL;
- :class:`PeerCommandTarget` and :class:`PeerReferenceKafka` — with ``--group ecosystem`` each broker
  the suite owns gets a second, independent single-node cluster of the same kind beside it (another
  kcompat, another Kafka of the same release), which MirrorMaker 2 replicates to; a case sees its
  address as ``TargetInfo.peer_bootstrap`` (None against an external ``--bootstrap``).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from conformance import maven, procs
from conformance.clients.tool_server import source_command
from conformance.model import CaseFailure, Prerequisite
from conformance.reference import ReferenceKafka, java_command
from conformance.targets import CommandTarget

APP_VERSIONS = ("3.9.1", "4.3.1")
JAVA_DIR = Path(__file__).resolve().parent / "scenarios" / "java"

APP_LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.clients.consumer.ConsumerConfig=WARN
log4j.logger.org.apache.kafka.clients.producer.ProducerConfig=WARN
log4j.logger.org.apache.kafka.clients.admin.AdminClientConfig=WARN
log4j.logger.org.apache.kafka.streams.StreamsConfig=WARN
log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN
log4j.logger.org.reflections=ERROR
"""


def register(name: str, *, area: str, title: str, func, doc: str, requires=(), timeout: float = 420.0) -> None:
    """Register ``func(ctx, version)`` as one ``ecosystem`` scenario per release of
    :data:`APP_VERSIONS` (Java client): ``{name}.kafka-<version>``, ``title`` formatted with ``version``."""
    from conformance.registry import JAVA, scenario

    for version in APP_VERSIONS:
        def case(ctx, version=version):
            return func(ctx, version)

        case.__doc__ = doc
        scenario(f"{name}.kafka-{version}", area=area, title=title.format(version=version), clients=[JAVA],
                 requires=requires, group="ecosystem", timeout=timeout)(case)


def apps_lib(version: str) -> Path:
    """The jar directory of Kafka ``version``'s applications (resolved once with Maven)."""
    try:
        return maven.resolve_apps(version, log=lambda _msg: None)
    except maven.ResolveError as e:
        raise Prerequisite(f"Kafka {version} application jars unavailable: {e}") from None


class App:
    """One Java application process: ``main`` (a class name, or a ``.java`` file of :data:`JAVA_DIR`,
    compiled once as source-file mode would run it) with ``args`` on the jars of ``lib``. stdout lines are kept (``lines``),
    log4j writes INFO and above to ``<workdir>/<name>.log``; ``stdin`` is written to its standard input."""

    def __init__(self, lib: Path, workdir: Path, name: str, main: str, args: list[str], *,
                 stdin: str | None = None, heap: str = "512m", on_line=None) -> None:
        self.name = name
        self.log_path = Path(workdir) / f"{name}.log"
        self.log_path.unlink(missing_ok=True)  # log4j appends; this process's lines only
        log4j = Path(workdir) / f"{name}-log4j.properties"
        log4j.write_text(APP_LOG4J.format(log=self.log_path))
        if main.endswith(".java"):   # compiled once, not at every start as in source-file mode
            self.cmd = source_command(lib, JAVA_DIR / main, [str(a) for a in args], heap=heap, log4j=log4j)
        else:
            self.cmd = java_command(lib, main, [str(a) for a in args], heap=heap, log4j=log4j, quick=True)
        self._stdin, self._on_line, self._stderr = stdin, on_line, Path(workdir) / f"{name}.stderr"
        self.proc: procs.Background | None = None
        self.started_at = 0.0

    def start(self) -> "App":
        self.started_at = time.monotonic()
        self.proc = procs.Background(self.cmd, on_line=self._on_line, stderr_path=self._stderr,
                                     stdin_data=self._stdin)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.running()

    def lines(self) -> list[str]:
        return self.proc.snapshot() if self.proc else []

    def kill(self) -> None:
        """SIGKILL (``kill -9``): no clean-up in the JVM at all."""
        if self.proc is not None and self.proc.running():
            self.proc.proc.send_signal(signal.SIGKILL)
            try:
                self.proc.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.stop()

    def stop(self, grace: float = 30.0) -> None:
        if self.proc is not None:
            self.proc.stop(grace)

    def log_lines(self, level: str | None = None) -> list[str]:
        """The lines of the log4j file (only those at ``level`` when given, e.g. ``"ERROR"``)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        lines = text.splitlines()
        return [ln for ln in lines if f"] {level} " in ln] if level else lines

    def exit_summary(self) -> str:
        """Why the process is gone: exit status and the end of its stderr and log."""
        rc = self.proc.proc.returncode if self.proc else None
        err = ""
        try:
            err = procs.tail(self._stderr.read_text(errors="replace"), 8)
        except OSError:
            pass
        return f"{self.name} exited with status {rc}: {err or procs.tail(chr(10).join(self.log_lines()), 8)}"

    def require_running(self) -> None:
        if not self.running():
            raise CaseFailure(self.exit_summary())


def wait_for(ctx, what: str, cond, timeout: float, apps=()) -> None:
    """Poll ``cond`` until true; fail with ``what`` after ``timeout`` s (scaled by ``--timeout-scale``)
    or as soon as one of ``apps`` has exited."""
    deadline = time.monotonic() + ctx.timeout(timeout)
    while not cond():
        for a in apps:
            a.require_running()
        if time.monotonic() > deadline:
            raise CaseFailure(f"timed out after {ctx.timeout(timeout):.0f}s waiting for {what}")
        time.sleep(0.1)


def delete_group_when_empty(ctx, group: str, timeout: float = 30.0) -> None:
    """Delete ``group`` once its members are gone: Streams and Connect close without leaving the
    group, so it stays non-empty until their sessions time out."""
    deadline = time.monotonic() + timeout
    while True:
        errors = ctx.admin.delete_groups([group])
        if not errors or time.monotonic() > deadline:
            if errors:
                raise CaseFailure(f"clean-up: {errors}")
            return
        time.sleep(1.0)


# -- the second cluster -------------------------------------------------------------------------------

class _Peered:
    """Mixin for a :class:`~conformance.targets.ProcessTarget`: ``peer`` (a second single-node cluster
    of the same kind) is started with the target and stopped with it; ``peer_bootstrap`` is its
    address. Restarts of the target leave the peer alone."""

    peer: object

    def start(self) -> None:
        if self.peer.proc is None:
            self.peer.start()
        super().start()

    def stop(self, *a, **kw) -> None:
        try:
            super().stop(*a, **kw)
        finally:
            self.peer.stop()

    @property
    def peer_bootstrap(self) -> str:
        return self.peer.bootstrap

    def describe(self) -> dict:
        d = super().describe()
        d["peer"] = {"bootstrap": self.peer.bootstrap, "workdir": str(self.peer.workdir)}
        return d


class PeerCommandTarget(_Peered, CommandTarget):
    """A ``--broker-cmd`` broker with a second broker of the same command beside it."""

    def __init__(self, command: str, workdir: Path, **kw) -> None:
        super().__init__(command, workdir, **kw)
        self.peer = CommandTarget(command, self.workdir / "peer", host=self.host, label=f"{self.label} (peer)")


class PeerReferenceKafka(_Peered, ReferenceKafka):
    """The reference Kafka with a second Kafka of the same release beside it."""

    def __init__(self, lib: Path, version: str, workdir: Path, **kw) -> None:
        super().__init__(lib, version, workdir, **kw)
        self.peer = ReferenceKafka(lib, version, self.workdir / "peer", host=self.host)
