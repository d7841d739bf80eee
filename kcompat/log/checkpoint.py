"""Kafka's small metadata files, byte-compatible with Kafka's readers.

- offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``; Kafka ``CheckpointFile`` / ``OffsetCheckpointFile``)::

      0                  <- version
      2                  <- entry count
      my-topic 0 1234    <- topic partition offset
      other 3 0

- ``partition.metadata`` (Kafka ``PartitionMetadataFile``)::

      version: 0
      topic_id: <22-char url-safe base64 of the 16 uuid bytes, no padding>

- ``meta.properties`` (Kafka ``MetaProperties``, a Java properties file): ``version=1``,
  ``cluster.id``, ``node.id``, ``directory.id``.

Every write is atomic (tmp file, fsync, rename, fsync dir). Readers raise CheckpointError on
malformed content; a missing file reads as empty/None.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Mapping

from kcompat.log.errors import CheckpointError
from kcompat.log.fileio import atomic_write

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


def unreadable(path: Path, e: Exception) -> str:
    """``"<path>: <what is wrong>"`` for an error reading a checkpoint-like file."""
    text = str(e)
    return text if text.startswith(str(path)) else f"{path}: {text}"


# -- offset checkpoints -------------------------------------------------------------------------
def format_offset_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    """``{(topic, partition): offset}`` in Kafka's checkpoint format."""
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int], *,
                            tmp_suffix: str = ".tmp") -> None:
    """Write ``{(topic, partition): offset}`` in Kafka's checkpoint format, atomically (through
    ``<path><tmp_suffix>``: concurrent writers need distinct suffixes)."""
    atomic_write(path, format_offset_checkpoint(offsets), tmp_suffix)


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read a checkpoint written by Kafka or :func:`write_offset_checkpoint`; ``{}`` if the file
    does not exist, is empty or ends after the version line (Kafka ``CheckpointReadBuffer`` reads
    those as no entries). Raises CheckpointError on a bad version, count or line."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: not text: {e}") from None
    lines = text.splitlines()
    if not lines or (len(lines) == 1 and lines[0].strip() == "0"):
        return {}
    if lines[0].strip() != "0":
        raise CheckpointError(f"{path}: unsupported checkpoint version {lines[0].strip()!r}")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    if count < 0:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}")
    entries = [ln for ln in lines[2:] if ln.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    out: dict[TopicPartition, int] = {}
    for ln in entries:
        parts = ln.split()
        if len(parts) != 3:
            raise CheckpointError(f"{path}: malformed line {ln!r}")
        try:
            tp, offset = (parts[0], int(parts[1])), int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}: malformed line {ln!r}") from None
        if tp[1] < 0:
            raise CheckpointError(f"{path}: malformed line {ln!r}")
        out[tp] = offset
    return out


# -- topic ids and partition.metadata ----------------------------------------------------------
def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka ``Uuid.toString``: url-safe base64 of the 16 bytes without padding (22 chars)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_str(text: str) -> uuid.UUID:
    """Inverse of :func:`topic_id_to_str`; raises CheckpointError if malformed."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise CheckpointError(f"invalid topic id {text!r}") from None
    if len(raw) != 16 or len(text) != 22:
        raise CheckpointError(f"invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    """Write ``partition.metadata`` (version 0) atomically."""
    atomic_write(path, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n".encode("ascii"))


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    """The topic id stored in ``partition.metadata``; None if the file does not exist.
    Raises CheckpointError on unknown versions or malformed content."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not text") from None
    fields: dict[str, str] = {}
    for ln in text.splitlines():
        if ln.strip():
            key, sep, value = ln.partition(":")
            if not sep:
                raise CheckpointError(f"{path}: malformed line {ln!r}")
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        raise CheckpointError(f"{path}: unsupported version {fields.get('version')!r}")
    if "topic_id" not in fields:
        raise CheckpointError(f"{path}: no topic_id")
    topic_id = topic_id_from_str(fields["topic_id"])
    if topic_id.int == 0:   # Kafka PartitionMetadataReadBuffer: "Invalid topic ID"
        raise CheckpointError(f"{path}: invalid topic id {fields['topic_id']!r}")
    return topic_id


# -- meta.properties -------------------------------------------------------------------------------
def _escape(s: str) -> str:
    out = []
    for ch in s:
        if ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
    return "".join(out)


def _unescape(s: str) -> str:
    out = []
    it = iter(s)
    for ch in it:
        if ch == "\\":
            nxt = next(it, "")
            out.append({"n": "\n", "t": "\t", "r": "\r", "f": "\f"}.get(nxt, nxt))
        else:
            out.append(ch)
    return "".join(out)


def write_meta_properties(path: Path, props: Mapping[str, str]) -> None:
    """Write a Java properties file (as ``Properties.store``, minus the date comment)."""
    lines = ["#", "#Written by kcompat"]
    lines += [f"{_escape(k)}={_escape(str(v))}" for k, v in sorted(props.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))


def read_meta_properties(path: Path) -> dict[str, str] | None:
    """Key/values of a Java properties file (``#``/``!`` comments, ``=``/``:`` separators,
    backslash escapes; no line continuations); None if it does not exist."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not text") from None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        ln = raw.strip()
        if not ln or ln[0] in "#!":
            continue
        i = 0
        while i < len(ln):
            if ln[i] == "\\":
                i += 2
                continue
            if ln[i] in "=:":
                break
            i += 1
        key, value = ln[:i].strip(), ln[i + 1:].strip() if i < len(ln) else ""
        props[_unescape(key)] = _unescape(value)
    return props
