"""Driver for kcat (Debian's package, built on the system librdkafka — a different librdkafka release
than the one bundled with confluent-kafka).

Produce: ``kcat -P`` (key delimiter, one header set for all records; no per-record timestamps and no
offsets reported). Fetch: ``kcat -C -p -o -c -e -f`` with a tab-separated format that also prints key
and value lengths (so null and empty differ). Offsets: ``kcat -Q -t topic:partition:time`` (librdkafka's
offsets_for_times; -1, -2 and -3 pass through as latest, earliest and max-timestamp). Metadata:
``kcat -L -J``. Groups: ``kcat -G`` (balanced consumer; rebalances are reported on stderr).
"""

from __future__ import annotations

import json
import re
import shutil
import threading

from conformance import procs
from conformance.clients.base import Consumed, Driver, GroupRun, Unsupported
from conformance.clients.members import Member
from conformance.model import CaseFailure, Prerequisite

FORMAT = "%p\t%o\t%T\t%K\t%k\t%S\t%s\t%h\n"  # partition offset timestamp keylen key valuelen value headers
# eager: "% Group g rebalanced (memberid m): assigned: t [0], t [1]"
# cooperative: "% Group g rebalanced: incremental assignment of 1 partition(s) (memberid m, ...): t [0]"
_REBALANCE = re.compile(r"% Group (\S+) rebalanced(?: \(memberid [^)]*\))?: "
                        r"(assigned|revoked|incremental assignment|incremental revoke)"
                        r"(?: of \d+ partition\(s\) \([^)]*\))?: ?(.*)$")
_TP = re.compile(r"(\S+) \[(\d+)\]")


class KcatDriver(Driver):
    name = "kcat"
    caps = frozenset({"produce", "fetch", "list_offset", "list_offset.max", "metadata", "group",
                      "group.static", "group.cooperative", "idempotence"})

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.exe = shutil.which("kcat") or shutil.which("kafkacat")
        if self.exe is None:
            raise Prerequisite("kcat is not installed (Debian: apt-get install -y kcat)")

    def version(self) -> str:
        res = procs.run([self.exe, "-V"], timeout=10)
        m = re.search(r"Version (\S+).*?librdkafka (\S+)", res.stdout + res.stderr)
        return f"{m.group(1)} (librdkafka {m.group(2)})" if m else "?"

    def _run(self, args: list[str], *, timeout: float = 60, input: str | None = None, check: bool = True,
             bootstrap: str | None = None):
        res = procs.run([self.exe, "-b", bootstrap or self.bootstrap, *args], timeout=self.ctx.timeout(timeout),
                        input=input)
        if check and not res.ok:
            raise CaseFailure(f"kcat {' '.join(args[:2])} failed: {res.summary()}")
        return res

    def produce(self, topic, records, *, acks="all", codec="none", idempotent=False, bootstrap=None,
                linger_ms=5, **extra):
        if any(r.timestamp_ms is not None for r in records):
            raise Unsupported("kcat -P cannot set per-record timestamps")
        headers = records[0].headers if records else []
        if any(r.headers != headers for r in records):
            raise Unsupported("kcat -P sends the same headers with every record")
        partitions = {r.partition for r in records}
        if len(partitions) > 1:
            raise Unsupported("one kcat -P run writes to one partition (or the partitioner)")
        args = ["-P", "-t", topic, "-K", "\t", "-z", codec, "-X", f"acks={acks}",
                "-X", f"enable.idempotence={str(bool(idempotent)).lower()}", "-X", f"linger.ms={linger_ms}"]
        (part,) = partitions
        if part is not None:
            args += ["-p", str(part)]
        for k, v in headers:
            args += ["-H", f"{k}={v.decode()}"]
        for k, v in extra.items():
            args += ["-X", f"{k}={v}"]
        lines = "".join(f"{(r.key or b'').decode()}\t{(r.value or b'').decode()}\n" for r in records)
        res = self._run(args, input=lines, timeout=90, bootstrap=bootstrap)
        if "ERROR" in res.stderr or "failed" in res.stderr.lower():
            raise CaseFailure(f"kcat -P reported: {procs.tail(res.stderr, 5)}")
        return [None] * len(records)

    def fetch(self, topic, partition, offset, count, *, timeout_s=20.0, isolation="read_uncommitted"):
        start = "beginning" if offset == "earliest" else str(offset)
        res = self._run(["-C", "-t", topic, "-p", str(partition), "-o", start, "-c", str(count), "-e",
                         "-X", f"isolation.level={isolation}", "-f", FORMAT],
                        timeout=timeout_s + 30, check=False)
        if res.returncode not in (0,) and not res.stdout:
            raise CaseFailure(f"kcat -C failed: {res.summary()}")
        out = []
        for line in res.stdout.splitlines():
            cols = line.split("\t")
            if len(cols) != 8:
                continue
            p, o, ts, klen, key, vlen, value, hdrs = cols
            headers = [(h.split("=", 1)[0], h.split("=", 1)[1].encode()) for h in hdrs.split(",") if "=" in h]
            out.append(Consumed(topic, int(p), int(o), None if klen == "-1" else key.encode(),
                                None if vlen == "-1" else value.encode(), headers,
                                int(ts) if ts.lstrip("-").isdigit() and int(ts) >= 0 else None, None))
        return out

    def fetch_from_timestamp(self, topic, partition, timestamp_ms, count, *, timeout_s=20.0):
        """kcat's own start position by timestamp: ``-o s@<ms>``."""
        return self.fetch(topic, partition, f"s@{timestamp_ms}", count, timeout_s=timeout_s)

    def list_offset(self, topic, partition, spec):
        t = {"earliest": -2, "latest": -1, "max": -3}.get(spec, spec)
        res = self._run(["-Q", "-t", f"{topic}:{partition}:{t}"], timeout=30)
        m = re.search(rf"{re.escape(topic)} \[{partition}\] offset (-?\d+)", res.stdout)
        if not m:
            raise CaseFailure(f"kcat -Q printed no offset: {procs.tail(res.stdout + res.stderr, 3)}")
        off = int(m.group(1))
        return None if off < 0 else off

    def describe_topic(self, name):
        res = self._run(["-L", "-J", "-t", name], timeout=30)
        md = json.loads(res.stdout)
        for t in md.get("topics", []):
            if t["topic"] == name:
                if t.get("error"):
                    raise CaseFailure(f"kcat -L: topic {name}: {t['error']}")
                return {p["partition"]: {"leader": p["leader"], "replicas": [r["id"] for r in p["replicas"]],
                                         "isr": [r["id"] for r in p["isrs"]]} for p in t["partitions"]}
        raise CaseFailure(f"kcat -L: topic {name} missing")

    def metadata(self) -> dict:
        return json.loads(self._run(["-L", "-J"], timeout=30).stdout)

    def group_args(self, topic, group, *, assignor="range", instance_id=None, session_timeout_ms=10000):
        args = ["-G", group, "-X", f"partition.assignment.strategy={assignor}", "-X",
                f"session.timeout.ms={session_timeout_ms}", "-X", "heartbeat.interval.ms=500",
                "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
                "-f", FORMAT]
        if instance_id:
            args += ["-X", f"group.instance.id={instance_id}"]
        return args + [topic]

    def group_consume(self, topic, group, count, *, timeout_s=30.0, commit=True, **options):
        """kcat -G -c count: consumes ``count`` records; offsets are committed automatically and on close."""
        res = self._run(["-c", str(count), *self.group_args(topic, group)], timeout=timeout_s + 30, check=False)
        run = GroupRun()
        for line in res.stdout.splitlines():
            cols = line.split("\t")
            if len(cols) == 8:
                run.records.append(Consumed(topic, int(cols[0]), int(cols[1]), cols[4].encode(), cols[6].encode()))
        for line in res.stderr.splitlines():
            m = _REBALANCE.search(line)
            if m:
                parts = [(t, int(p)) for t, p in _TP.findall(m.group(3))]
                (run.assignments if "assign" in m.group(2) else run.revocations).append(sorted(parts))
        if res.timed_out or res.returncode != 0:
            run.errors.append(res.summary())
        last: dict = {}
        for r in run.records:
            last[(r.topic, r.partition)] = max(last.get((r.topic, r.partition), -1), r.offset)
        run.committed = {k: o + 1 for k, o in last.items()}
        return run

    def start_member(self, topic, group, **options) -> "KcatMember":
        return KcatMember(self, topic, group, **options)


class KcatMember(Member):
    """A ``kcat -G`` process; rebalance lines on stderr drive the bookkeeping."""

    def __init__(self, driver: KcatDriver, topic: str, group: str, *, assignor: str = "range",
                 instance_id: str | None = None, session_timeout_ms: int = 10000, commit: bool = True) -> None:
        super().__init__()
        self.topic = topic
        cmd = [driver.exe, "-b", driver.bootstrap,
               *driver.group_args(topic, group, assignor=assignor, instance_id=instance_id,
                                  session_timeout_ms=session_timeout_ms)]
        import subprocess

        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1)
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        for line in self._proc.stdout:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 8:
                self._consumed([Consumed(self.topic, int(cols[0]), int(cols[1]), cols[4].encode(),
                                         cols[6].encode())])

    def _read_err(self) -> None:
        for line in self._proc.stderr:
            m = _REBALANCE.search(line)
            if m:
                parts = [(t, int(p)) for t, p in _TP.findall(m.group(3))]
                if "assign" in m.group(2):
                    self._assigned(parts)
                else:
                    self._revoked(parts)
            elif "ERROR" in line or "FATAL" in line:
                self.events.append((0.0, line.strip()[:300], []))

    def stop(self, leave: bool = True) -> None:
        """SIGTERM: kcat closes the consumer (LeaveGroup for dynamic members, final commit)."""
        import signal
        import subprocess

        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for t in self._threads:
            t.join(5)

    def crash(self) -> None:
        self._proc.kill()
        self._proc.wait()
        for t in self._threads:
            t.join(5)
