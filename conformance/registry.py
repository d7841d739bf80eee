"""Scenario registry: a scenario run through one client is a *case*, identified as ``scenario[client]``.

Scenario modules declare scenarios with :func:`scenario`; one case is registered per client listed.
Cases are selected by group (``core``, ``fast``, ``perf``, ``all``, ``security``, ``ecosystem``), by
``--only`` patterns and by client. ``security`` cases need brokers started with security listeners
(:mod:`conformance.security`), ``ecosystem`` cases (Kafka Streams, Connect, MirrorMaker 2) a second
cluster beside each broker (:mod:`conformance.ecosystem`), so they run only when their group is asked
for, never in ``all``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Iterable

WIRE = "wire"
KAFKA_PYTHON = "kafka-python"
CONFLUENT = "confluent-kafka"
JAVA = "java"
KCAT = "kcat"
CLIENTS = (WIRE, KAFKA_PYTHON, CONFLUENT, JAVA, KCAT)
PYTHON_CLIENTS = (KAFKA_PYTHON, CONFLUENT)
FAST_CLIENTS = frozenset({WIRE, KAFKA_PYTHON, CONFLUENT, KCAT})

GROUPS = ("core", "fast", "perf", "all", "security", "ecosystem")
OPT_IN = ("security", "ecosystem")  # groups never part of "all": their brokers are started differently

# An API requirement: an api key, or (api key, minimum version).
Requirement = int | tuple[int, int]


@dataclass(frozen=True)
class Case:
    """One scenario through one client."""

    scenario: str
    client: str
    area: str
    title: str
    func: Callable = field(compare=False, repr=False)
    requires: tuple[Requirement, ...] = ()
    needs: frozenset[str] = frozenset()  # e.g. {"restart"}
    timeout_s: float = 60.0
    group: str = "core"  # "core", "perf", "security" or "ecosystem"
    slow: bool = False  # excluded from the fast subset

    @property
    def id(self) -> str:
        return f"{self.scenario}[{self.client}]"

    @property
    def fast(self) -> bool:
        return self.group == "core" and not self.slow and self.client in FAST_CLIENTS


_CASES: dict[str, Case] = {}
_SCENARIOS: dict[str, dict] = {}


def scenario(name: str, *, area: str, title: str, clients: Iterable[str], requires: Iterable[Requirement] = (),
             needs: Iterable[str] = (), timeout: float = 60.0, group: str = "core", slow: bool = False,
             client_requires: dict[str, Iterable[Requirement]] | None = None):
    """Register ``func(ctx)`` as scenario ``name`` for each client in ``clients``.

    ``client_requires`` adds API requirements for particular clients (e.g. kcat's balanced
    consumer needs the group APIs even where another client's variant does not).
    """

    def deco(func):
        _SCENARIOS[name] = {"area": area, "title": title, "doc": (func.__doc__ or "").strip()}
        for client in clients:
            if client not in CLIENTS:
                raise ValueError(f"unknown client {client!r} for scenario {name}")
            reqs = tuple(requires) + tuple((client_requires or {}).get(client, ()))
            case = Case(name, client, area, title, func, reqs, frozenset(needs), timeout, group,
                        slow or client == JAVA)
            if case.id in _CASES:
                raise ValueError(f"duplicate case {case.id}")
            _CASES[case.id] = case
        return func

    return deco


def all_cases() -> list[Case]:
    """Every registered case, in registration order (scenario modules are imported on first use)."""
    import conformance.scenarios  # noqa: F401  (registers the scenarios)
    return list(_CASES.values())


def get_case(case_id: str) -> Case:
    all_cases()
    return _CASES[case_id]


def scenario_info(name: str) -> dict:
    all_cases()
    return _SCENARIOS.get(name, {})


def matches(case: Case, patterns: list[str]) -> bool:
    """True if any pattern matches the case id, its scenario name or its area (globs or substrings)."""
    for p in patterns:
        if p in (case.id, case.scenario, case.area):
            return True
        for subject in (case.id, case.scenario, case.area):
            if fnmatch.fnmatchcase(subject, p) or (not any(c in p for c in "*?[") and p in subject):
                return True
    return False


def select(group: str = "core", only: list[str] | None = None, clients: Iterable[str] | None = None) -> list[Case]:
    """The cases of ``group`` (``core``, ``fast``, ``perf``, ``all``, ``security`` or ``ecosystem``;
    ``all`` is core + perf), filtered by patterns and clients."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}; choose one of {', '.join(GROUPS)}")
    chosen = []
    wanted_clients = set(clients) if clients else None
    for case in all_cases():
        if (group in OPT_IN or case.group in OPT_IN) and group != case.group:
            continue
        if group == "fast" and not case.fast:
            continue
        if group == "core" and case.group != "core":
            continue
        if group == "perf" and case.group != "perf":
            continue
        if wanted_clients is not None and case.client not in wanted_clients:
            continue
        if only and not matches(case, only):
            continue
        chosen.append(case)
    return chosen
