"""What a scenario works with (:class:`Context`) and how one case is executed (:func:`run_case`).

A scenario is a function ``func(ctx)``. It names its own topics, groups and transactional ids
through the context (unique per run and case, so cases are independent and leave nothing behind:
the context deletes them afterwards), records comparable ``observed`` values and free-form
``details``, and fails by raising :class:`~conformance.model.CaseFailure` (``ctx.check``,
``ctx.expect_eq``). ``ctx.client`` is the driver of the client the case runs through (``None`` for
wire cases). Setup and clean-up go through :class:`SetupAdmin` (confluent-kafka's AdminClient), not
through the client under test.
"""

from __future__ import annotations

import re
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from conformance import wire
from conformance.model import FAIL, PASS, CaseFailure, CaseResult, Prerequisite, jsonable
from conformance.registry import Case
from conformance.targets import TargetInfo

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
CLIENT_TAGS = {"wire": "w", "kafka-python": "kp", "confluent-kafka": "ck", "java": "j", "kcat": "kc"}


def name_prefix(run_id: str, case: Case) -> str:
    """The prefix of every topic, group and transactional id a case creates."""
    slug = _SLUG.sub("-", case.scenario)[:120]
    return f"conf-{run_id}-{slug}-{CLIENT_TAGS.get(case.client, case.client)}"


class SetupAdmin:
    """Topic and group set-up/clean-up through confluent-kafka's AdminClient."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                     timeout: float = 30.0) -> None:
        from confluent_kafka.admin import NewTopic

        fs = self.admin.create_topics([NewTopic(name, partitions, 1, config=dict(configs or {}))],
                                      request_timeout=timeout, operation_timeout=timeout)
        try:
            fs[name].result(timeout + 5)
        except Exception as e:
            raise CaseFailure(f"setup: creating topic {name} failed: {e}") from None
        self.wait_leaders(name, partitions, timeout)

    def wait_leaders(self, name: str, partitions: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            md = self.admin.list_topics(name, timeout=10)
            t = md.topics.get(name)
            if t is not None and t.error is None and len(t.partitions) >= partitions and all(
                    p.leader >= 0 for p in t.partitions.values()) and self._partitions_ready(name, partitions):
                return
            if time.monotonic() > deadline:
                raise CaseFailure(f"setup: topic {name} has no leader for every partition after {timeout:.0f}s")
            time.sleep(0.1)

    def _partitions_ready(self, name: str, partitions: int) -> bool:
        """Metadata can name a leader a moment before that broker serves the partition (Kafka applies
        the metadata delta to its replica manager after updating its cache): ask ListOffsets too."""
        try:
            with wire.Connection(self.bootstrap, 5) as conn:
                return all(wire.list_offsets(conn, name, p, -1).get("error") == 0 for p in range(partitions))
        except (OSError, ValueError):
            return False

    def delete_topics(self, names: list[str], timeout: float = 30.0) -> list[str]:
        if not names:
            return []
        errors = []
        fs = self.admin.delete_topics(list(names), operation_timeout=timeout, request_timeout=timeout)
        for name, f in fs.items():
            try:
                f.result(timeout + 5)
            except Exception as e:
                if "UNKNOWN_TOPIC" not in str(e):
                    errors.append(f"delete topic {name}: {e}")
        return errors

    def delete_groups(self, names: list[str], timeout: float = 30.0) -> list[str]:
        if not names:
            return []
        errors = []
        try:
            fs = self.admin.delete_consumer_groups(list(names), request_timeout=timeout)
        except Exception as e:
            return [f"delete groups: {e}"]
        for name, f in fs.items():
            try:
                f.result(timeout + 5)
            except Exception as e:
                if "GROUP_ID_NOT_FOUND" not in str(e) and "NOT_COORDINATOR" not in str(e):
                    errors.append(f"delete group {name}: {e}")
        return errors

    def topics_with_prefix(self, prefix: str) -> list[str]:
        md = self.admin.list_topics(timeout=10)
        return [t for t in md.topics if t.startswith(prefix)]


class Context:
    """Everything one case may use; see the module docstring."""

    def __init__(self, case: Case, target: TargetInfo, *, restart: Callable[[str], None] | None = None,
                 workdir: Path | None = None) -> None:
        self.case = case
        self.target = target
        self.bootstrap = target.bootstrap
        self.observed: dict[str, Any] = {}
        self.details: dict[str, Any] = {}
        self.prefix = name_prefix(target.run_id, case)
        self.workdir = Path(workdir or target.workdir) / _SLUG.sub("-", f"{case.scenario}.{case.client}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._restart = restart
        self._seq = 0
        self._topics: list[str] = []
        self._groups: list[str] = []
        self._cleanups: list[Callable[[], None]] = []
        self._admin: SetupAdmin | None = None
        self.client = None

    # -- names --------------------------------------------------------------------------------------

    def _name(self, kind: str) -> str:
        self._seq += 1
        return f"{self.prefix}-{kind}{self._seq}"

    def topic(self, partitions: int = 1, configs: dict[str, str] | None = None, *, create: bool = True) -> str:
        """A fresh topic name (created with ``partitions`` through the set-up admin unless ``create=False``);
        it is deleted when the case ends."""
        name = self._name("t")
        self._topics.append(name)
        if create:
            self.require_api(19)  # CreateTopics: every scenario sets up its own topics with it
            self.admin.create_topic(name, partitions, configs)
        return name

    def group(self) -> str:
        name = self._name("g")
        self._groups.append(name)
        return name

    def transactional_id(self) -> str:
        return self._name("x")

    # -- set-up helpers -------------------------------------------------------------------------------

    @property
    def admin(self) -> SetupAdmin:
        if self._admin is None:
            self._admin = SetupAdmin(self.bootstrap)
        return self._admin

    def setup_produce(self, topic: str, values: list[bytes], *, partition: int = 0,
                      timestamps: list[int] | None = None, keys: list[bytes] | None = None,
                      linger_ms: int = 5, flush_every: int | None = None) -> list[int]:
        """Produce ``values`` with confluent-kafka (acks=all) for scenarios that test something else;
        returns their offsets. ``flush_every`` flushes after that many records (one batch each)."""
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": linger_ms,
                      "enable.idempotence": False, "message.timeout.ms": 30000})
        offsets: dict[int, int] = {}
        errors: list[str] = []

        def report(i):
            def cb(err, msg):
                if err is not None:
                    errors.append(str(err))
                else:
                    offsets[i] = msg.offset()
            return cb

        for i, v in enumerate(values):
            kw = {}
            if timestamps is not None:
                kw["timestamp"] = timestamps[i]
            if keys is not None:
                kw["key"] = keys[i]
            p.produce(topic, v, partition=partition, on_delivery=report(i), **kw)
            if flush_every and (i + 1) % flush_every == 0:
                p.flush(30)
        left = p.flush(30)
        if errors or left or len(offsets) != len(values):
            raise CaseFailure(f"setup: producing {len(values)} records to {topic} failed: "
                              f"{errors[:3] or f'{left} undelivered'}")
        return [offsets[i] for i in range(len(values))]

    def wire(self, timeout: float = 10.0) -> wire.Connection:
        return wire.Connection(self.bootstrap, timeout)

    def on_cleanup(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the case ends (before topics and groups are deleted), last registered first."""
        self._cleanups.append(fn)

    def timeout(self, seconds: float) -> float:
        return seconds * self.target.timeout_scale

    # -- prerequisites and the broker -------------------------------------------------------------------

    def has_api(self, key: int, min_version: int = 0) -> bool:
        rng = self.target.api_versions.get(key)
        return rng is not None and rng[1] >= min_version

    def require_api(self, key: int, min_version: int = 0) -> None:
        rng = self.target.api_versions.get(key)
        if rng is None:
            raise Prerequisite(f"broker does not advertise {wire.api_name(key)}")
        if rng[1] < min_version:
            raise Prerequisite(f"broker advertises {wire.api_name(key)} up to v{rng[1]}; needs v{min_version}+")

    def restart_broker(self, mode: str = "clean") -> float:
        """Restart the broker (``clean`` or ``kill``); returns the seconds it took."""
        if not self.target.restartable or self._restart is None:
            raise Prerequisite(f"restart not possible: the suite did not start {self.target.label} "
                               "(external --bootstrap); use --broker-cmd so the suite can restart it")
        start = time.monotonic()
        self._restart(mode)
        took = time.monotonic() - start
        self.details.setdefault("restarts", []).append({"mode": mode, "seconds": round(took, 1)})
        return took

    # -- results -------------------------------------------------------------------------------------------

    def observe(self, **values: Any) -> None:
        """Record values that should be identical on any conforming broker (compared with Kafka)."""
        self.observed.update(values)

    def detail(self, **values: Any) -> None:
        """Record informative values (not compared)."""
        self.details.update(values)

    def check(self, condition: Any, reason: str) -> None:
        if not condition:
            raise CaseFailure(reason)

    def expect_eq(self, label: str, actual: Any, expected: Any) -> None:
        """Record ``label`` = ``actual`` as observed and fail unless it equals ``expected``."""
        self.observed[label] = actual
        if actual != expected:
            raise CaseFailure(f"{label}: expected {_short(expected)}, got {_short(actual)}")

    def fail(self, reason: str) -> None:
        raise CaseFailure(reason)

    # -- end of case -----------------------------------------------------------------------------------------

    def cleanup(self) -> list[str]:
        errors = []
        for fn in reversed(self._cleanups):
            try:
                fn()
            except Exception as e:
                errors.append(f"{getattr(fn, '__name__', 'cleanup')}: {e}")
        if self.client is not None:
            try:
                self.client.close()
            except Exception as e:
                errors.append(f"closing {self.case.client}: {e}")
        if self._topics or self._groups:
            try:
                if self._groups and self.has_api(42):
                    errors += self.admin.delete_groups(self._groups)
                if self._topics:
                    errors += self.admin.delete_topics(self._topics)
            except Exception as e:
                errors.append(f"clean-up: {e}")
        return errors


def _short(value: Any, limit: int = 300) -> str:
    s = repr(value)
    return s if len(s) <= limit else s[:limit] + "..."


def check_requirements(case: Case, ctx: Context) -> None:
    """Fail with a prerequisite reason when the broker lacks an API or the suite a capability."""
    for req in case.requires:
        key, min_version = (req, 0) if isinstance(req, int) else req
        ctx.require_api(key, min_version)
    if "restart" in case.needs and not ctx.target.restartable:
        raise Prerequisite(f"restart not possible: the suite did not start {ctx.target.label} "
                           "(external --bootstrap); use --broker-cmd so the suite can restart it")


def run_case(case: Case, target: TargetInfo, restart: Callable[[str], None] | None = None) -> CaseResult:
    """Execute one case to completion (the caller enforces the hard timeout) and return its result."""
    from conformance.clients import make_driver

    start = time.monotonic()
    ctx = Context(case, target, restart=restart)
    status, kind, reason = PASS, "ok", ""
    try:
        check_requirements(case, ctx)
        ctx.client = make_driver(case.client, ctx)
        case.func(ctx)
    except CaseFailure as e:
        status, kind, reason = FAIL, e.kind, e.reason
    except Exception as e:  # a client raised: report it as the reason
        status, kind, reason = FAIL, "error", f"{type(e).__name__}: {e}"
        ctx.details["traceback"] = traceback.format_exc(limit=8)[-3000:]
    finally:
        errors = ctx.cleanup()
        if errors:
            ctx.details["cleanup_errors"] = errors
    return CaseResult(case.id, case.scenario, case.client, case.area, status, kind, reason,
                      jsonable(ctx.observed), jsonable(ctx.details), round(time.monotonic() - start, 2))
