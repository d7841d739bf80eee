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
import re
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
    rows = read_kafka_checkpoint(path, _offset_entry)
    return {} if rows is None else {tp: offset for tp, offset in rows}


def _offset_entry(line: str):
    parts = java_split(line)   # Kafka OffsetCheckpointFile.Formatter: "topic partition offset"
    return ((parts[0], java_int(parts[1], 32)), java_int(parts[2], 64)) if len(parts) == 3 else None


# -- Kafka's text parsing, to the letter (what it rejects decides what fails a log dir) -------------
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def java_lines(text: str) -> list[str]:
    """The lines ``BufferedReader.readLine`` returns: split at \\n, \\r or \\r\\n, no final empty line."""
    lines = _LINE_BREAK.split(text) if text else []
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def java_split(line: str) -> list[str]:
    """``Pattern.compile("\\s+").split(line)``: a leading empty field is kept, trailing ones are not."""
    if line == "":
        return [""]
    parts = _JAVA_WS.split(line)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def java_int(text: str, bits: int) -> int:
    """``Integer.parseInt`` (``bits`` 32) / ``Long.parseLong`` (64): ASCII digits with an optional
    sign, nothing else, in range; ValueError otherwise."""
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    value = int(text)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(f"out of range: {text!r}")
    return value


def read_kafka_checkpoint(path: Path, parse_entry) -> list | None:
    """The entries of a file in Kafka's checkpoint format (``CheckpointFile.CheckpointReadBuffer``):
    version ``0``, the entry count, one entry per line; ``parse_entry(line)`` returns the entry,
    or None (or raises ValueError) for a malformed line. None if the file does not exist, is empty
    or ends after the version line (Kafka: no entries). Raises CheckpointError otherwise: a file
    that is not UTF-8, a version other than 0, a malformed count or line, a count that does not
    match the lines."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse_kafka_checkpoint(data, parse_entry, str(path))


def parse_kafka_checkpoint(data: bytes, parse_entry, source: str) -> list | None:
    """:func:`read_kafka_checkpoint` of content already read (e.g. a copy from remote storage);
    ``source`` names it in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{source}: not UTF-8 text: {e}") from None
    lines = java_lines(text)
    if not lines:
        return None
    try:
        version = java_int(lines[0], 32)
    except ValueError:
        raise CheckpointError(f"{source}: malformed version line {lines[0]!r}") from None
    if version != 0:
        raise CheckpointError(f"{source}: unsupported version {version}")
    if len(lines) == 1:
        return None
    try:
        count = java_int(lines[1], 32)
    except ValueError:
        raise CheckpointError(f"{source}: malformed entry count {lines[1]!r}") from None
    entries = []
    for line in lines[2:]:
        try:
            entry = parse_entry(line)
        except ValueError:
            entry = None
        if entry is None:
            raise CheckpointError(f"{source}: malformed line {line!r}")
        entries.append(entry)
    if len(entries) != count:
        raise CheckpointError(f"{source}: expected {count} entries, found {len(entries)}")
    return entries


# -- topic ids and partition.metadata ----------------------------------------------------------
def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka ``Uuid.toString``: url-safe base64 of the 16 bytes without padding (22 chars)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_str(text: str) -> uuid.UUID:
    """Inverse of :func:`topic_id_to_str`, as Kafka's ``Uuid.fromString``: url-safe base64 (padded
    or not, at most 24 characters) of exactly 16 bytes; raises CheckpointError otherwise."""
    if len(text) > 24 or not _UUID_TEXT.fullmatch(text):
        raise CheckpointError(f"invalid topic id {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except ValueError:
        raise CheckpointError(f"invalid topic id {text!r}") from None
    if len(raw) != 16:
        raise CheckpointError(f"invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]+={0,2}")


def write_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    """Write ``partition.metadata`` (version 0) atomically."""
    atomic_write(path, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n".encode("ascii"))


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    """The topic id stored in ``partition.metadata``; None if the file does not exist. Parsed as
    Kafka's ``PartitionMetadataReadBuffer``: a first line of two fields, the second a version >= 0;
    a second line of two fields, the second the topic id (not the zero id); later lines ignored.
    Raises CheckpointError on anything else (Kafka fails the log dir)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text") from None
    lines = java_lines(text)
    if len(lines) < 2:
        raise CheckpointError(f"{path}: expected a version line and a topic id line")
    parts = java_split(lines[0])
    try:
        if len(parts) != 2:
            raise ValueError
        version = java_int(parts[1], 32)
    except ValueError:
        raise CheckpointError(f"{path}: malformed line {lines[0]!r}") from None
    if version < 0:
        raise CheckpointError(f"{path}: unrecognized version {version}")
    parts = java_split(lines[1])
    if len(parts) != 2:
        raise CheckpointError(f"{path}: malformed line {lines[1]!r}")
    topic_id = topic_id_from_str(parts[1])
    if topic_id.int == 0:   # Kafka PartitionMetadataReadBuffer: "Invalid topic ID"
        raise CheckpointError(f"{path}: invalid topic id {parts[1]!r}")
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
