"""What the benchmarks share: CPU accounting from /proc (Linux only) and a periodic sampler thread."""

from __future__ import annotations

import os
import threading


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads); 0.0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0


def proc_run_seconds(pid: int) -> float:
    """CPU seconds of process ``pid``'s live threads, nanosecond precision (the first field of
    ``/proc/PID/task/TID/schedstat``: time on a CPU), for runs too short for ``stat``'s 10 ms
    ticks; threads that ended no longer count. 0.0 once the process is gone."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


def busy_cpu_seconds() -> float:
    """Non-idle CPU time of the whole machine so far (/proc/stat), to spot other load."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class PeriodicSampler(threading.Thread):
    """A daemon thread calling :meth:`sample` every ``interval`` seconds until :meth:`stop`,
    which takes one last sample after the thread ended. Subclasses implement ``sample()``."""

    def __init__(self, interval: float, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.interval = interval
        self._halt = threading.Event()

    def sample(self):
        raise NotImplementedError

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.sample()
