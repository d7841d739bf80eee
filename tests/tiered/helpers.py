"""Broker and topic settings of the tiered-storage tests, and what they look at on disk."""

from __future__ import annotations

from pathlib import Path

# short intervals so that copying and local retention happen within a test
TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "200",
    "remote.log.manager.task.retry.backoff.ms": "100",
    "remote.log.manager.task.retry.backoff.max.ms": "1000",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}

TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "segment.bytes": str(1024 * 1024),
    "local.retention.bytes": str(2 * 1024 * 1024),
    "file.delete.delay.ms": "0",
}


def consume_from_zero(bootstrap: str, topic: str, n: int, value_of) -> tuple[int, int]:
    """Read records 0..n-1 of ``topic``-0 with confluent-kafka, checking each offset and value
    (``value_of(offset)``); returns the partition's (low, high) watermarks."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-check", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        while seen < n:
            for m in c.consume(500, timeout=30):
                assert m.error() is None, m.error()
                assert (m.offset(), m.value()) == (seen, value_of(seen))
                seen += 1
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def local_segments(partition_dir: Path) -> list[tuple[int, int]]:
    """(base offset, bytes) of the ``.log`` files of a partition directory, by offset (a file
    that retention deletes while this looks is left out)."""
    out = []
    for f in partition_dir.glob("*.log"):
        try:
            out.append((int(f.name[:20]), f.stat().st_size))
        except FileNotFoundError:
            pass
    return sorted(out)


def local_log_bytes(partition_dir: Path) -> int:
    """Bytes of the ``.log`` files of a partition directory."""
    return sum(size for _base, size in local_segments(partition_dir))


COMPANIONS = ("index", "timeindex", "snapshot", "leader-epoch-checkpoint")


def complete_segments_have_companions(names: list[str]) -> bool:
    """Every segment whose ``.log`` object exists (the copier writes it last) also has its
    indexes, producer snapshot and leader-epoch checkpoint, and no leftover ``.tmp``; ``names``
    are object names or paths as strings. A copy in progress (no ``.log`` yet) is ignored."""
    stems = {n[:-len(".log")] for n in names if n.endswith(".log")}
    have = set(names)
    return all(f"{stem}.{suffix}" in have for stem in stems for suffix in COMPANIONS) and \
        not any(n.endswith(".tmp") and n[:-len(".tmp")].rsplit(".", 1)[0] in stems for n in names)


def remote_objects(root: Path, suffix: str) -> list[Path]:
    """Objects with ``suffix`` the local filesystem backend holds under ``root``."""
    return [p for p in root.rglob(f"*.{suffix}") if p.is_file()] if root.exists() else []


class RawProxy:
    """A plain TCP forwarder (HTTP to the S3 server) the test can make refuse connections:
    ``refuse()`` resets open and new connections (the store is unreachable), ``forward()``
    lets them through again. Threads only; :meth:`stop` closes everything."""

    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1") -> None:
        import socket
        import threading
        self.upstream = upstream
        self.refusing = False
        self._lock = threading.Lock()
        self._conns: set = set()
        self._sock = socket.create_server((host, 0))
        self.port = self._sock.getsockname()[1]
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        import socket
        import threading
        while not self._stopped:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass
        with self._lock:
            self._conns.discard(src)
            self._conns.discard(dst)

    def refuse(self) -> None:
        import socket
        self.refusing = True
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def forward(self) -> None:
        self.refusing = False

    def stop(self) -> None:
        self._stopped = True
        self.refuse()
        self._sock.close()
        self._thread.join(5)
