"""The ``sticky`` task assignor of streams groups, the default of Kafka 4.3.1 (KIP-1071; Kafka's
``org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor`` and ``ProcessState``).

Tasks are ``(subtopology id, partition)``. Members belong to processes (one Kafka Streams
instance, several stream threads = members); load is balanced across processes (tasks per
member of the process), then across the members of a process:

1. active tasks go back to their previous owner while it is under its quota (ceil of tasks over
   members, recomputed as members fill up), then to a previous standby owner of the task with the
   least load, and the rest, sorted by subtopology and partition, to the least loaded process;
2. with ``num.standby.replicas`` > 0, each task of a stateful subtopology gets that many standbys,
   on processes not holding the task yet: the previous active owner first, then previous standby
   owners, then the least loaded processes.

Ties are broken by sorted process and member ids (Kafka breaks them by Java hash order).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

TaskId = tuple[str, int]
Tasks = dict[str, frozenset[int]]


@dataclass(frozen=True)
class AssignmentMember:
    """A member as the assignor sees it: its process and its current target tasks."""

    process_id: str
    active: Tasks
    standby: Tasks


class _Process:
    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.member_tasks: dict[str, int] = {}
        self.active: dict[str, set[TaskId]] = {}
        self.standby: dict[str, set[TaskId]] = {}
        self.tasks: set[TaskId] = set()

    @property
    def load(self) -> float:
        """Tasks per member of the process (ProcessState.load)."""
        return sum(self.member_tasks.values()) / len(self.member_tasks) if self.member_tasks else -1.0

    def add(self, member_id: str, task: TaskId, active: bool) -> int:
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.tasks.add(task)
        self.member_tasks[member_id] += 1
        return self.member_tasks[member_id]

    def add_to_least_loaded(self, task: TaskId, active: bool) -> int:
        member_id = min(self.member_tasks, key=lambda m: (self.member_tasks[m], m))
        return self.add(member_id, task, active)


def _per_member(tasks: int, members: int) -> int:
    return -(-tasks // members) if members else 0


class StickyTaskAssignor:
    """``assign(members, tasks, stateful, num_standby)`` -> member id -> (active, standby)."""

    name = "sticky"

    def assign(self, members: dict[str, AssignmentMember], tasks: dict[str, int], stateful: set[str],
               num_standby: int) -> dict[str, tuple[Tasks, Tasks]]:
        """``tasks``: subtopology id -> number of tasks; ``stateful``: subtopologies with state."""
        self._init(members, tasks, stateful, num_standby)
        active = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
        self._assign_active(active)
        if num_standby > 0:
            self._assign_standby([(s, p) for s in sorted(tasks) if s in stateful for p in range(tasks[s])],
                                 num_standby)
        out = {}
        for member_id in members:
            proc = self.processes[members[member_id].process_id]
            out[member_id] = (_compact(proc.active.get(member_id, ())), _compact(proc.standby.get(member_id, ())))
        return out

    def _init(self, members, tasks, stateful, num_standby) -> None:
        self.total_active = sum(tasks.values())
        self.total = self.total_active + num_standby * sum(n for s, n in tasks.items() if s in stateful)
        self.members_active_capacity = self.members_capacity = len(members)
        self.active_per_member = _per_member(self.total_active, len(members))
        self.total_per_member = _per_member(self.total, len(members))
        self.processes: dict[str, _Process] = {}
        self.prev_active: dict[TaskId, tuple[str, str]] = {}
        self.prev_standby: dict[TaskId, list[tuple[str, str]]] = {}
        for member_id in sorted(members):
            m = members[member_id]
            self.processes.setdefault(m.process_id, _Process(m.process_id)).member_tasks[member_id] = 0
            for s, ps in m.active.items():
                for p in ps:
                    self.prev_active[(s, p)] = (m.process_id, member_id)
            for s, ps in m.standby.items():
                for p in ps:
                    self.prev_standby.setdefault((s, p), []).append((m.process_id, member_id))

    def _took_active(self, count: int) -> None:
        if count == self.active_per_member:
            self.members_active_capacity -= 1
            self.total_active -= count
            self.active_per_member = _per_member(self.total_active, self.members_active_capacity)
        self._took(count)

    def _took(self, count: int) -> None:
        if count == self.total_per_member:
            self.members_capacity -= 1
            self.total -= count
            self.total_per_member = _per_member(self.total, self.members_capacity)

    def _least_loaded_previous(self, owners, task: TaskId | None):
        """StickyTaskAssignor.findPrevMemberWithLeastLoad."""
        if not owners:
            return None
        best = owners[0]
        best_proc = self.processes[best[0]]
        best_load, best_member_load = best_proc.load, best_proc.member_tasks[best[1]]
        for owner in owners[1:]:
            proc = self.processes[owner[0]]
            if proc.load < best_load and (task is None or task not in proc.tasks):
                if proc.member_tasks[owner[1]] < best_member_load:
                    best, best_load, best_member_load = owner, proc.load, proc.member_tasks[owner[1]]
        if task is None or task not in self.processes[best[0]].tasks:
            return best
        return None

    def _by_load(self):
        heap = [(p.load, p.process_id) for p in self.processes.values()]
        heapq.heapify(heap)
        return heap

    def _assign_active(self, tasks: list[TaskId]) -> None:
        rest = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0])):
            prev = self.prev_active.get(task)
            if prev is not None and self.processes[prev[0]].member_tasks[prev[1]] < self.active_per_member:
                self._took_active(self.processes[prev[0]].add(prev[1], task, True))
            else:
                rest.append(task)
        remaining = []
        for task in rest:
            prev = self._least_loaded_previous(self.prev_standby.get(task), None)
            if prev is not None and self.processes[prev[0]].member_tasks[prev[1]] < self.active_per_member:
                self._took_active(self.processes[prev[0]].add(prev[1], task, True))
            else:
                remaining.append(task)
        heap = self._by_load()
        for task in sorted(remaining):
            _, pid = heapq.heappop(heap)
            proc = self.processes[pid]
            self._took_active(proc.add_to_least_loaded(task, True))
            heapq.heappush(heap, (proc.load, pid))

    def _assign_standby(self, tasks: list[TaskId], replicas: int) -> None:
        to_least_loaded = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for i in range(replicas):
                prev = self.prev_active.get(task)
                if prev is not None:
                    proc = self.processes[prev[0]]
                    if task not in proc.tasks and proc.member_tasks[prev[1]] < self.total_per_member:
                        self._took(proc.add(prev[1], task, False))
                        continue
                prev = self._least_loaded_previous(self.prev_standby.get(task), task)
                if prev is not None and self.processes[prev[0]].member_tasks[prev[1]] < self.total_per_member:
                    self._took(self.processes[prev[0]].add(prev[1], task, False))
                    continue
                to_least_loaded.append((task, replicas - i))
                break
        heap = self._by_load()
        for task, remaining in sorted(to_least_loaded, reverse=True):
            for _ in range(remaining):
                if not self._standby_to_least_loaded(heap, task):
                    break

    def _standby_to_least_loaded(self, heap, task: TaskId) -> bool:
        """The least loaded process not holding ``task`` takes it as a standby; False if none can."""
        skipped = []
        found = False
        while heap:
            load, pid = heapq.heappop(heap)
            proc = self.processes[pid]
            if task not in proc.tasks:
                self._took(proc.add_to_least_loaded(task, False))
                heapq.heappush(heap, (proc.load, pid))
                found = True
                break
            skipped.append((load, pid))
        for item in skipped:
            heapq.heappush(heap, item)
        return found


def _compact(tasks) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}
