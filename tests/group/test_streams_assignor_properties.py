"""Properties of the streams groups' sticky task assignor (:mod:`kcompat.group.streams_assignor`,
KIP-1071) over random groups: processes with one or more members (stream threads), subtopologies
with their task counts, some stateful, 0-2 standby replicas, and members that already own tasks.

Whatever the group, every task has exactly one active owner, no process holds a task twice
(active and standby, or two standbys), each stateful task gets as many standbys as there are
other processes to hold them (at most ``num.standby.replicas``), a fresh group's active tasks are
spread within one of each other across members.

Assigning again from the assignment it produced is not stable, and this is Kafka's behaviour:
Kafka 4.3.1's own StickyTaskAssignor (driven from Java with the same members, tasks and current
assignment) moves active tasks between threads and between processes, and standbys between
processes, in such a re-run; for {p0-m0, p1-m0, p1-m1} with tasks s0:1 s1:4 s2:8 it made exactly
the moves kcompat makes."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.group.streams_assignor import AssignmentMember, StickyTaskAssignor


@st.composite
def groups(draw):
    processes = draw(st.integers(1, 4))
    members = {}
    for p in range(processes):
        for t in range(draw(st.integers(1, 3))):
            members[f"p{p}-m{t}"] = f"p{p}"
    tasks = {f"s{i}": draw(st.integers(1, 8)) for i in range(draw(st.integers(1, 3)))}
    stateful = {s for s in tasks if draw(st.booleans())}
    num_standby = draw(st.integers(0, 2))
    previous = draw(st.booleans())
    return members, tasks, stateful, num_standby, previous


def _run(members, tasks, stateful, num_standby, current=None):
    current = current or {}
    spec = {m: AssignmentMember(p, *current.get(m, ({}, {}))) for m, p in members.items()}
    return StickyTaskAssignor().assign(spec, tasks, stateful, num_standby)


def _flat(tasks_by_subtopology):
    return [(s, p) for s, ps in tasks_by_subtopology.items() for p in ps]


@settings(max_examples=300, deadline=None)
@given(groups())
def test_sticky_assignor_properties(group):
    members, tasks, stateful, num_standby, previous = group
    processes = set(members.values())
    current = None
    if previous:   # members own what a first assignment gave them, then one member leaves
        first = _run(members, tasks, stateful, num_standby)
        gone = sorted(members)[-1]
        if len(members) > 1:
            members = {m: p for m, p in members.items() if m != gone}
            processes = set(members.values())
        current = {m: first[m] for m in members}
    out = _run(members, tasks, stateful, num_standby, current)
    assert set(out) == set(members)

    active = Counter(t for m in out for t in _flat(out[m][0]))
    every = {(s, p) for s, n in tasks.items() for p in range(n)}
    assert set(active) == every and set(active.values()) == {1}

    held = Counter((members[m], t) for m in out for part in out[m] for t in _flat(part))
    assert set(held.values()) == {1}, "a process holds a task twice"
    standbys = Counter(t for m in out for t in _flat(out[m][1]))
    for task in every:
        expected = min(num_standby, len(processes) - 1) if task[0] in stateful else 0
        assert standbys[task] == expected, task

    if current is None:
        counts = [sum(len(ps) for ps in out[m][0].values()) for m in members]
        assert max(counts) - min(counts) <= 1, counts
