"""Torn writes and bit flips in every file kcompat reads at start-up, table-driven and seeded:
each file type x {truncate at a random point, flip random bits, zero-fill a random range, append
garbage}, over a data directory built by the real code (tests/support/storage_golden.py), then the
storage part of a broker start-up run on it and everything read back.

What each case must show (Kafka's behaviour, checked file by file in its source):

- files Kafka repairs - segments (``.log``: a torn or damaged tail is cut by recovery),
  ``.index``/``.timeindex`` (rebuilt), ``.txnindex`` (rebuilt through the producer-state
  replay), producer snapshots (ignored, state rebuilt from the log), the metadata log and its
  indexes - never stop start-up;
- files Kafka fails the log dir for when they are malformed - the offset checkpoints,
  ``leader-epoch-checkpoint``, ``partition.metadata``, ``meta.properties``, ``quorum-state``, a
  metadata snapshot - stop start-up exactly when a reference parser written here from Kafka's
  rules says they are malformed, with a LogDirError naming the file and nothing on disk changed;
  when they still parse, start-up goes on;
- no batch with a bad CRC is ever served, every batch served is byte for byte the one written, and
  what cannot be damaged by the mutation (batches before the damage; all of them when an index, a
  snapshot or a checkpoint was hit) is served completely; producer state, aborted transactions and
  timestamp lookups come back as they were when the damage is to something rebuilt.

Flips in a ``.log`` hit the bytes the batch CRC covers (and batchLength): the v2 format does not
protect ``baseOffset`` and ``partitionLeaderEpoch`` (Kafka neither detects a flip there).
``KCOMPAT_CORRUPTION_SEEDS=1,2,3,...`` runs more seeds.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path

import pytest

from kcompat.log import LogError
from kcompat.log.txn_index import TransactionIndex
from kcompat.protocol import records as rb
from tests.support import storage_golden as golden

SEEDS = [int(s) for s in os.environ.get("KCOMPAT_CORRUPTION_SEEDS", "1,2").split(",")]
MUTATIONS = ("truncate", "flip", "zero", "garbage")

# target -> (file under the data dir: a name or a callable choosing one, kind)
TARGETS = {
    "log-old": (lambda d: sorted((d / "t-0").glob("*.log"))[0], "log"),
    "log-middle": (lambda d: sorted((d / "t-0").glob("*.log"))[1], "log"),
    "log-active": (lambda d: sorted((d / "t-0").glob("*.log"))[-1], "log"),
    "index-old": (lambda d: sorted((d / "t-0").glob("*.index"))[0], "index"),
    "index-active": (lambda d: sorted((d / "t-0").glob("*.index"))[-1], "index"),
    "timeindex-old": (lambda d: sorted((d / "t-0").glob("*.timeindex"))[0], "index"),
    "timeindex-active": (lambda d: sorted((d / "t-0").glob("*.timeindex"))[-1], "index"),
    "txnindex": (lambda d: sorted((d / "t-0").glob("*.txnindex"))[0], "txnindex"),
    "producer-snapshot": (lambda d: sorted((d / "t-0").glob("*.snapshot"))[-1], "snapshot"),
    "leader-epoch-checkpoint": (lambda d: d / "t-0" / "leader-epoch-checkpoint", "epochs"),
    "partition.metadata": (lambda d: d / "t-0" / "partition.metadata", "partition-metadata"),
    "meta.properties": (lambda d: d / "meta.properties", "meta-properties"),
    "recovery-point-offset-checkpoint": (lambda d: d / "recovery-point-offset-checkpoint", "checkpoint"),
    "log-start-offset-checkpoint": (lambda d: d / "log-start-offset-checkpoint", "checkpoint"),
    "replication-offset-checkpoint": (lambda d: d / "replication-offset-checkpoint", "checkpoint"),
    "cleaner-offset-checkpoint": (lambda d: d / "cleaner-offset-checkpoint", "checkpoint"),
    "quorum-state": (lambda d: d / "__cluster_metadata-0" / "quorum-state", "quorum-state"),
    "metadata-log-old": (lambda d: sorted((d / "__cluster_metadata-0").glob("*.log"))[0], "metadata-log"),
    "metadata-log-active": (lambda d: sorted((d / "__cluster_metadata-0").glob("*.log"))[-1], "metadata-log"),
    "metadata-timeindex": (lambda d: sorted((d / "__cluster_metadata-0").glob("*.timeindex"))[0], "metadata-index"),
    "metadata-epoch-checkpoint": (lambda d: d / "__cluster_metadata-0" / "leader-epoch-checkpoint", "epochs"),
    "metadata-snapshot": (lambda d: sorted((d / "__cluster_metadata-0").glob("*.checkpoint"))[0],
                          "metadata-snapshot"),
}
# the start-up after a clean shutdown, and after a crash that flushed nothing (every segment
# recovered from the start); only the partition's own files behave differently between the two
SEGMENT_KINDS = {"log", "index", "txnindex", "snapshot"}


def cases():
    for target, (_path, kind) in TARGETS.items():
        for mutation in MUTATIONS:
            for mode in (("clean", "unclean") if kind in SEGMENT_KINDS else ("clean",)):
                for seed in SEEDS:
                    yield pytest.param(target, mutation, mode, seed, id=f"{target}-{mutation}-{mode}-{seed}")


@pytest.fixture(scope="module")
def gold(tmp_path_factory):
    root = tmp_path_factory.mktemp("golden")
    data = golden.build(root)
    reference = root / "reference"
    shutil.copytree(data, reference)
    return data, golden.start_up(reference)


# -- mutations -------------------------------------------------------------------------------------
def batch_layout(data: bytes) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch of a segment file."""
    return [(pos, h.size, h.base_offset) for pos, h in rb.iter_batches(data)]


def protected_positions(data: bytes) -> list[int]:
    """The bytes of a segment file whose change the batch framing or CRC must reveal: all but
    baseOffset [0, 8) and partitionLeaderEpoch [12, 16) of each batch."""
    out = []
    for pos, size, _base in batch_layout(data):
        out += list(range(pos + 8, pos + 12)) + list(range(pos + 16, pos + size))
    return out


def mutate(data: bytes, mutation: str, rng: random.Random, *, segment: bool) -> bytes:
    if mutation == "truncate":
        return data[:rng.randrange(len(data))] if data else data
    if mutation == "flip":
        if not data:
            return data
        positions = protected_positions(data) if segment else range(len(data))
        out = bytearray(data)
        for pos in rng.sample(list(positions), min(len(positions), rng.randint(1, 3))):
            out[pos] ^= 1 << rng.randrange(8)
        return bytes(out)
    if mutation == "zero":
        if not data:
            return data
        start = rng.randrange(len(data))
        n = min(len(data) - start, rng.randint(1, 64))
        return data[:start] + bytes(n) + data[start + n:]
    return data + rng.randbytes(rng.randint(1, 300))


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# -- reference parsers: what Kafka rejects, from its source ------------------------------------------
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def java_int(s: str, bits: int) -> bool:
    return bool(_JAVA_INT.fullmatch(s)) and -(1 << (bits - 1)) <= int(s) < 1 << (bits - 1)


def java_lines(text: str) -> list[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def java_split(line: str) -> list[str]:
    """``line.split("\\s+")`` in Java: a leading empty field stays, trailing ones go."""
    parts = re.split(r"[ \t\n\x0b\f\r]+", line) if line else [""]
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def kafka_checkpoint_ok(raw: bytes, fields: list[int]) -> bool:
    """Kafka ``CheckpointFile.CheckpointReadBuffer`` (UTF-8, version 0, count, lines split on
    \\s+ into ``len(fields)`` fields; a field of bits 0 is a string, else an int of that size;
    kcompat also rejects negative leader epochs and offsets in ``leader-epoch-checkpoint``)."""
    try:
        lines = java_lines(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return False
    if not lines or (len(lines) == 1 and lines[0] == "0"):
        return True
    if lines[0] != "0" or not java_int(lines[1], 32):
        return False
    for line in lines[2:]:
        parts = java_split(line)
        if len(parts) != len(fields) or not all(bits == 0 or java_int(v, bits) for v, bits in zip(parts, fields)):
            return False
        if len(fields) == 2 and (int(parts[0]) < 0 or int(parts[1]) < 0):
            return False
    return int(lines[1]) == len(lines) - 2


def kafka_uuid_ok(s: str) -> bool:
    """Kafka ``Uuid.fromString``: at most 24 characters of url-safe base64 decoding to 16 bytes
    (Java's decoder ignores the unused low bits of the last character, so a flip there is a
    different, valid id)."""
    if len(s) > 24 or not re.fullmatch(r"[A-Za-z0-9_-]+={0,2}", s):
        return False
    return len(s.rstrip("=")) == 22


def partition_metadata_ok(raw: bytes) -> bool:
    """Kafka ``PartitionMetadataReadBuffer``."""
    try:
        lines = java_lines(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return False
    if len(lines) < 2:
        return False
    first, second = (java_split(ln) for ln in lines[:2])
    if len(first) != 2 or not java_int(first[1], 32) or int(first[1]) < 0:
        return False
    return len(second) == 2 and kafka_uuid_ok(second[1]) and second[1].rstrip("=") != "A" * 22


def quorum_state_ok(raw: bytes) -> bool:
    """Kafka ``FileQuorumStateStore``: the first line is the JSON of QuorumStateData with every
    field of its data_version present and typed."""
    try:
        obj = json.loads(java_lines(raw.decode("utf-8"))[0])
    except (UnicodeDecodeError, IndexError, ValueError):
        return False

    def is_int(v, bits):
        return type(v) is int and -(1 << (bits - 1)) <= v < 1 << (bits - 1)
    if not isinstance(obj, dict) or obj.get("data_version") not in (0, 1) or type(obj["data_version"]) is not int:
        return False
    if not all(is_int(obj.get(k), 32) for k in ("leaderId", "leaderEpoch", "votedId")):
        return False
    if obj["data_version"] == 0:
        voters = obj.get("currentVoters", ())
        return (isinstance(obj.get("clusterId"), str) and is_int(obj.get("appliedOffset"), 64) and "currentVoters" in obj
                and (voters is None or (isinstance(voters, list)
                                        and all(isinstance(v, dict) and is_int(v.get("voterId"), 32) for v in voters))))
    return isinstance(obj.get("votedDirectoryId"), str) and kafka_uuid_ok(obj["votedDirectoryId"])


def meta_properties_ok(raw: bytes) -> bool:
    """What start-up accepts of ``meta.properties`` (Kafka ``MetaProperties``): version 0 or 1, a
    cluster id (a single log dir supplies the expected one itself), this node's id, a valid
    directory id if there is one."""
    from kcompat.log import read_meta_properties   # the Java properties syntax itself is not re-derived here
    p = Path(os.environ.get("TMPDIR", "/tmp")) / f"meta-{os.getpid()}.properties"
    p.write_bytes(raw)
    try:
        props = read_meta_properties(p)
    except Exception:
        return False
    finally:
        p.unlink()
    return (props.get("version", "0") in ("0", "1") and bool(props.get("cluster.id"))
            and props.get("node.id", props.get("broker.id")) == str(golden.NODE)
            and ("directory.id" not in props or kafka_uuid_ok(props["directory.id"])))


def metadata_snapshot_ok(raw: bytes) -> bool:
    pos = 0
    while pos < len(raw):
        try:
            h = rb.parse_header(raw, pos)
        except rb.CorruptRecordError:
            return False
        if pos + h.size > len(raw) or not rb.crc_valid(raw, pos, h):
            return False
        pos += h.size
    return pos > 0


REFERENCE = {
    "checkpoint": lambda raw: kafka_checkpoint_ok(raw, [0, 32, 64]),
    "epochs": lambda raw: kafka_checkpoint_ok(raw, [32, 64]),
    "partition-metadata": partition_metadata_ok,
    "quorum-state": quorum_state_ok,
    "meta-properties": meta_properties_ok,
    "metadata-snapshot": metadata_snapshot_ok,
}


# -- the table --------------------------------------------------------------------------------------
@pytest.mark.parametrize("target,mutation,mode,seed", list(cases()))
def test_start_up_after_damage(gold, tmp_path, target, mutation, mode, seed):
    source, ref = gold
    data = tmp_path / "data"
    shutil.copytree(source, data)
    if mode == "unclean":          # a crash that flushed nothing: every segment is recovered
        (data / ".kafka_cleanshutdown").unlink()
        (data / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 0\n")
    path_of, kind = TARGETS[target]
    path = path_of(data)
    before_bytes = path.read_bytes()
    rng = random.Random(f"{target}/{mutation}/{seed}")
    after_bytes = mutate(before_bytes, mutation, rng, segment=kind in ("log", "metadata-log"))
    path.write_bytes(after_bytes)
    files_before = tree(data)

    must_refuse = kind in REFERENCE and not REFERENCE[kind](after_bytes)
    # damage a .txnindex sanity check finds must be repaired; what it cannot see (a cut at an entry
    # boundary, a flip that keeps the entries plausible) is Kafka's blind spot too
    txn_detectable = kind == "txnindex" and txn_index_problem(after_bytes, int(path.name[:20]), tmp_path)
    try:
        got = golden.start_up(data)
    except LogError as e:          # what ends a broker's start-up: "cannot start: ...", exit status 1
        assert must_refuse, f"start-up refused a file Kafka reads fine or repairs: {e}"
        assert path.name in str(e), f"the error does not name {path.name}: {e}"
        assert tree(data) == files_before, "a refused start-up changed files on disk"
        return
    assert not must_refuse, f"start-up accepted {path.name} although Kafka refuses it: {after_bytes!r:.300}"
    check_served(ref, got)

    complete = kind not in ("log", "metadata-log", "metadata-snapshot")
    if kind == "log":
        check_log_damage(ref, got, data, path, before_bytes, after_bytes, mode)
    elif target == "log-start-offset-checkpoint":
        # a start offset read from a damaged file moves the log start (beyond the end, it deletes
        # every segment: Kafka's LogLoader does the same); what is still served is intact
        complete = False
        assert all(base + 1 > got.log_start - 1 for base in got.batches)
    if complete:
        assert got.log_end == ref.log_end and got.log_start == ref.log_start
        assert got.batches == ref.batches and not got.refused, "an intact batch was not served"
        assert got.producers == ref.producers
        if kind != "txnindex" or txn_detectable or after_bytes == before_bytes:
            assert got.aborted == ref.aborted
        if kind == "index":
            assert got.by_timestamp == ref.by_timestamp
    if kind == "metadata-log":
        assert got.snapshot_records == ref.snapshot_records
        assert got.metadata_records == ref.metadata_records[:len(got.metadata_records)], "metadata records changed"
    elif kind in ("metadata-index", "metadata-snapshot", "quorum-state", "epochs") or complete:
        assert got.snapshot_records == ref.snapshot_records
        assert got.metadata_records == ref.metadata_records


def txn_index_problem(raw: bytes, base: int, tmp: Path) -> bool:
    probe = tmp / "probe.txnindex"
    probe.write_bytes(raw)
    return TransactionIndex(probe).sanity_check(base, None) is not None


def check_served(ref, got) -> None:
    """Every batch served is byte for byte the one written (start_up also checked its CRC)."""
    for base, raw in got.batches.items():
        assert ref.batches.get(base) == raw, f"the batch served at offset {base} is not the one written"


def check_log_damage(ref, got, data: Path, path: Path, before: bytes, after: bytes, mode: str) -> None:
    """A damaged segment: nothing damaged is served; every batch before the damage is; after a
    clean shutdown, batches in other (later) segments are too (recovery does not run there)."""
    changed = [i for i in range(min(len(before), len(after))) if before[i] != after[i]]
    first = min(changed + ([len(after)] if len(after) < len(before) else []), default=len(before))
    segment_base = int(path.name.split(".")[0])
    later = sorted(int(p.name.split(".")[0]) for p in (data / "t-0").glob("*.log") if int(p.name.split(".")[0]) > segment_base)
    intact_before = {base for pos, size, base in batch_layout(before) if pos + size <= first}
    for base, raw in ref.batches.items():
        if base < segment_base or base in intact_before:
            assert got.batches.get(base) == raw, f"batch {base}, before the damage, was not served"
        elif mode == "clean" and later and base >= later[0]:
            assert got.batches.get(base) == raw, f"batch {base}, in a later segment, was not served"
