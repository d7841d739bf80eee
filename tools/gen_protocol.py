#!/usr/bin/env python3
"""Generate kcompat's protocol codecs from Apache Kafka's JSON message specifications.

Usage::

    python tools/gen_protocol.py [--specs ../shared/kafka-specs] [--check]

Reads ``<specs>/message/*.json`` (requests, responses, headers and data messages) and writes one
Python module per API (request and response together) into ``kcompat/protocol/messages/``, plus an
``__init__.py`` registry mapping API keys to classes. The on-disk formats (``metadata/`` KRaft
records, ``storage/`` producer snapshots, ``group-coordinator/``, ``transaction-coordinator/``,
``raft/``) go to ``kcompat/protocol/<name>_records/`` with a ``RECORD_TYPES`` registry. Generated modules are committed; ``--check``
regenerates in memory and exits 1 if any committed file differs (drift), 0 otherwise.

Every generated class is valid for all versions of its message: ``read(buf, off, version) ->
(obj, off)`` over a memoryview and ``write(out, version)`` appending to a bytearray
(DESIGN.md section 3). Field presence, nullability, flexible (compact) encodings and tagged fields
follow the spec's ``versions``, ``nullableVersions``, ``flexibleVersions`` and ``taggedVersions``.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPECS = ROOT.parent / "shared" / "kafka-specs"
# Specs taken from Kafka 4.3.1's copy (a sibling ``kafka-specs-4.3.1`` of ``--specs``) for the APIs
# and records kcompat serves at their Kafka 4 versions; globs relative to the spec root. Kafka 4
# dropped old versions of other APIs that kcompat keeps serving, so the rest stays on the older specs.
NEWER_SPECS_DIR = "kafka-specs-4.3.1"
FROM_NEWER_SPECS = (
    "message/ConsumerGroupDescribe*.json",       # v1: MemberType (KIP-1099)
    "group-coordinator/ConsumerGroup*.json",     # KIP-848 records incl. RegularExpression (type 16)
    "message/*Share*.json",                      # KIP-932 as released in Kafka 4.1+ (v1 onwards)
    "group-coordinator/ShareGroup*.json",        # KIP-932 records incl. StatePartitionMetadata
    "share-coordinator/*.json",                  # __share_group_state: ShareSnapshot, ShareUpdate
    "message/ListTransactions*.json",            # v2: TransactionalIdPattern (KIP-1152)
    "message/AlterPartitionReassignments*.json", # v1: AllowReplicationFactorChange (KIP-860)
    "message/ListConfigResources*.json",         # key 74 v0-1: ListClientMetricsResources renamed (KIP-1142)
    "message/*DelegationToken*.json",            # keys 38-41 (KIP-48) from v1: v0 removed in Kafka 4.0
    "message/BrokerHeartbeat*.json",             # v2: CordonedLogDirs (KIP-1066)
    "metadata/RegisterBrokerRecord.json",        # v4: CordonedLogDirs (KIP-1066)
    "metadata/BrokerRegistrationChangeRecord.json",  # v3: CordonedLogDirs (KIP-1066)
    "message/StreamsGroup*.json",                # keys 88-89: KIP-1071 streams groups (Kafka 4.1+)
    "group-coordinator/StreamsGroup*.json",      # KIP-1071 records (types 15, 17-21)
)
# Older spec files that a FROM_NEWER_SPECS file replaces under another name (same API key), dropped.
SUPERSEDED_BY_NEWER = (
    "message/ListClientMetricsResources*.json",  # -> ListConfigResources (KIP-1142)
)
# APIs whose newest versions come from Kafka 4.3.1's specs while kcompat keeps serving versions that
# Kafka 4 dropped (KIP-896): the 4.3.1 spec merged with the older one (:func:`merge_specs`), so one
# class reads and writes both the old versions and the new ones.
MERGED_WITH_NEWER_SPECS = (
    "message/Metadata*.json",                    # v13: top-level ErrorCode (KIP-1102)
    "message/FetchRe*.json",                     # v18: ReplicaState.HighWatermark (KIP-1166)
    "message/Produce*.json",                     # v12 (KIP-890 part 2), v13: topic ids (KIP-516)
    "message/ListOffsets*.json",                 # v11: EARLIEST_PENDING_UPLOAD (KIP-1023)
    "message/OffsetCommit*.json",                # v10: topic ids (KIP-848)
    "message/OffsetFetch*.json",                 # v10: topic ids (KIP-848)
    "message/DescribeGroups*.json",              # v6: ErrorMessage, GROUP_ID_NOT_FOUND (KIP-1043)
    "message/DescribeCluster*.json",             # v2: IncludeFencedBrokers, IsFenced (KIP-1073)
    "message/DescribeLogDirs*.json",             # v5: IsCordoned (KIP-1066)
    "message/TxnOffsetCommit*.json",             # v5: adds the offsets partition implicitly (KIP-890 part 2)
    "message/WriteTxnMarkers*.json",             # v2: TransactionVersion (KIP-1228); v0 kept for old peers
)
OUT_DIR = ROOT / "kcompat" / "protocol"

FIXED = {  # type -> (struct name in primitives, size)
    "int8": ("I8", 1), "int16": ("I16", 2), "uint16": ("U16", 2), "int32": ("I32", 4),
    "uint32": ("U32", 4), "int64": ("I64", 8), "float64": ("F64", 8),
}
VARLEN = {"string", "bytes", "records", "uuid", "bool"}


# ------------------------------------------------------------------------------------------------
# spec parsing
# ------------------------------------------------------------------------------------------------

def strip_comments(text: str) -> str:
    """Remove // comments that are outside JSON strings."""
    out = []
    i = 0
    n = len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int | None  # None: open-ended; lo > hi (e.g. lo=1, hi=0): none

    @staticmethod
    def parse(s: str | None) -> "Versions":
        if s is None or s == "none":
            return Versions(1, 0)
        s = s.strip()
        if s.endswith("+"):
            return Versions(int(s[:-1]), None)
        if "-" in s:
            a, b = s.split("-")
            return Versions(int(a), int(b))
        return Versions(int(s), int(s))

    def contains(self, v: int) -> bool:
        return v >= self.lo and (self.hi is None or v <= self.hi)

    def as_tuple(self):
        return (self.lo, self.hi)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s):
        s += "_"
    return s


@dataclass
class Field:
    name: str
    attr: str
    type: str  # as in the spec, e.g. "int32", "[]string", "[]Foo", "Foo"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flex_override: Versions | None
    default: object
    about: str
    struct: "Struct | None" = None  # element struct for []Foo and Foo

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.struct is not None


@dataclass
class Struct:
    name: str
    fields: list[Field]
    about: str = ""


@dataclass
class Message:
    name: str
    kind: str  # request, response, header, data
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: Struct
    structs: list[Struct] = field(default_factory=list)  # every nested struct, in definition order
    listeners: list[str] = field(default_factory=list)
    source: str = ""


def python_default(ftype: str, raw, nullable_all: bool):
    """Python literal source for a field default (see the specs' README, 'Custom Default Values')."""
    if ftype.startswith("[]"):
        return "None" if raw == "null" else "[]"
    if ftype in FIXED:
        if raw is None or raw == "":
            return "0.0" if ftype == "float64" else "0"
        if ftype == "float64":
            return repr(float(raw))
        return str(int(str(raw), 0))
    if ftype == "bool":
        return "True" if str(raw).lower() == "true" else "False"
    if ftype == "string":
        if raw == "null":
            return "None"
        return repr(raw if raw is not None else "")
    if ftype == "bytes":
        return "None" if raw == "null" else "b''"
    if ftype == "records":
        return "None"
    if ftype == "uuid":
        return "ZERO_UUID"
    # struct
    return "None" if raw == "null" else "STRUCT"


def load_spec(path: Path) -> dict:
    return json.loads(strip_comments(path.read_text()))


def merge_specs(older: dict, newer: dict) -> dict:
    """``newer`` (a Kafka 4 spec) with the valid versions and the fields of ``older`` that Kafka 4
    dropped (KIP-896) put back, each after the field that preceded it in ``older``: fields in both
    keep ``newer``'s definition. Only for specs whose shared fields agree on the old versions (the
    case for Kafka's: a removed version removes fields, it does not redefine the others)."""
    lo_old, hi_old = Versions.parse(older["validVersions"]).as_tuple()
    lo_new, hi_new = Versions.parse(newer["validVersions"]).as_tuple()
    merged = dict(newer)
    merged["validVersions"] = f"{min(lo_old, lo_new)}-{max(hi_old, hi_new)}"

    def merge_fields(old_fields: list, new_fields: list) -> list:
        by_name = {f["name"]: f for f in new_fields}
        out = list(new_fields)
        prev = None
        for f in old_fields:
            if f["name"] in by_name:
                nf = by_name[f["name"]]
                if "fields" in f and "fields" in nf:
                    out[out.index(nf)] = dict(nf, fields=merge_fields(f["fields"], nf["fields"]))
                prev = f["name"]
                continue
            at = next((i + 1 for i, g in enumerate(out) if g["name"] == prev), 0)
            out.insert(at, f)
            prev = f["name"]
        return out

    merged["fields"] = merge_fields(older.get("fields", []), newer.get("fields", []))
    common_new = {c["name"]: c for c in newer.get("commonStructs", [])}
    for c in older.get("commonStructs", []):
        if c["name"] in common_new:
            common_new[c["name"]] = dict(common_new[c["name"]],
                                         fields=merge_fields(c["fields"], common_new[c["name"]]["fields"]))
        else:
            common_new[c["name"]] = c
    if common_new:
        merged["commonStructs"] = list(common_new.values())
    return merged


def parse_message(path: Path, older: Path | None = None) -> Message:
    spec = load_spec(path)
    if older is not None:
        spec = merge_specs(load_spec(older), spec)
    msg = Message(
        name=spec["name"], kind=spec["type"], api_key=spec.get("apiKey"),
        valid=Versions.parse(spec["validVersions"]),
        flexible=Versions.parse(spec.get("flexibleVersions", "none")),
        root=Struct(spec["name"], []), listeners=spec.get("listeners", []),
        source=(f"{path.parent.name}/{path.name}" if path.parent.parent.name != NEWER_SPECS_DIR
                else f"{path.parent.name}/{path.name} of {NEWER_SPECS_DIR}"
                + (" + older versions" if older is not None else "")),
    )
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    built: dict[str, Struct] = {}

    def build_struct(name: str, fields_spec: list, about: str = "") -> Struct:
        if name in built:
            return built[name]
        st = Struct(name, [], about)
        built[name] = st
        for f in fields_spec:
            st.fields.append(build_field(f))
        msg.structs.append(st)
        return st

    def build_field(f: dict) -> Field:
        ftype = f["type"]
        versions = Versions.parse(f.get("versions", f.get("taggedVersions")))
        nullable = Versions.parse(f.get("nullableVersions"))
        fld = Field(
            name=f["name"], attr=snake(f["name"]), type=ftype, versions=versions,
            nullable=nullable, tagged=Versions.parse(f.get("taggedVersions")),
            tag=f.get("tag"),
            flex_override=Versions.parse(f["flexibleVersions"]) if "flexibleVersions" in f else None,
            default=None, about=f.get("about", ""),
        )
        elem = fld.elem
        if elem not in FIXED and elem not in VARLEN:
            if "fields" in f:
                fld.struct = build_struct(elem, f["fields"], f.get("about", ""))
            elif elem in common:
                fld.struct = build_struct(elem, common[elem]["fields"])
            else:
                raise SystemExit(f"{path.name}: unknown type {ftype} for field {f['name']}")
        fld.default = python_default(ftype, f.get("default"), nullable.lo == 0)
        return fld

    # common structs are built lazily when referenced, but must exist even if unreferenced
    for f in spec.get("fields", []):
        msg.root.fields.append(build_field(f))
    for name, c in common.items():
        build_struct(name, c["fields"])
    return msg


# ------------------------------------------------------------------------------------------------
# code generation
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mode:
    kind: str  # "absent", "tagged", "regular"
    flex: bool = False
    nullable: bool = False


def field_mode(msg: Message, f: Field, v: int) -> Mode:
    if not f.versions.contains(v):
        return Mode("absent")
    flex = msg.flexible.contains(v)
    if f.flex_override is not None:
        flex = flex and f.flex_override.contains(v)
    nullable = f.nullable.contains(v)
    if not f.is_array and (f.type in FIXED or f.type in ("bool", "uuid")):
        nullable = False  # encoding does not depend on flexibility or nullability
        flex = False
    elif not f.is_array and f.is_struct:
        flex = False
    if f.tag is not None and f.tagged.contains(v):
        return Mode("tagged", True, nullable)
    return Mode("regular", flex, nullable)


def version_ranges(msg: Message, f: Field):
    """Group the message's valid versions into consecutive ranges with the same Mode."""
    lo, hi = msg.valid.lo, msg.valid.hi
    ranges = []
    for v in range(lo, hi + 1):
        m = field_mode(msg, f, v)
        if ranges and ranges[-1][2] == m:
            ranges[-1][1] = v
        else:
            ranges.append([v, v, m])
    return [(a, b, m) for a, b, m in ranges]


def cond(msg: Message, a: int, b: int) -> str:
    lo, hi = msg.valid.lo, msg.valid.hi
    if a <= lo and b >= hi:
        return "True"
    if a <= lo:
        return f"version <= {b}"
    if b >= hi:
        return f"version >= {a}"
    if a == b:
        return f"version == {a}"
    return f"{a} <= version <= {b}"


def first_flexible(msg: Message) -> int | None:
    """First flexible version of the message, or None if no valid version is flexible."""
    f = msg.flexible
    if f.hi is not None and f.lo > f.hi:
        return None
    return f.lo if f.lo <= msg.valid.hi else None


def struct_ref(msg: Message, st: Struct) -> str:
    return f"{msg.name}.{st.name}" if st is not msg.root else msg.name


EMPTY_STRUCTS: dict[str, list[str]] = {}  # message name -> struct refs needing an _EMPTY instance


class Emitter:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, indent: int = 0, text: str = "") -> None:
        self.lines.append(("    " * indent + text) if text else "")


def read_value(e: Emitter, ind: int, msg: Message, f: Field, mode: Mode, target: str) -> None:
    """Emit code that reads one value of field f (mode) into the expression `target`."""
    flex, nullable = mode.flex, mode.nullable
    if f.is_array:
        e(ind, f"n, off = {'r_ccount' if flex else 'r_count'}(buf, off)")
        e(ind, "if n < 0:")
        if nullable:
            e(ind + 1, f"{target} = None")
        else:
            e(ind + 1, f"raise DecodeError('non-nullable array {f.attr} was null')")
        e(ind, "else:")
        elem = f.elem
        if elem in FIXED:
            e(ind + 1, f"{target}, off = r_fixed_array(buf, off, n, {elem!r})")
            return
        e(ind + 1, "items = []")
        e(ind + 1, "for _ in range(n):")
        if f.is_struct:
            e(ind + 2, f"item, off = {struct_ref(msg, f.struct)}.read(buf, off, version)")
        else:
            e(ind + 2, f"item, off = {scalar_reader(elem, flex, False)}(buf, off)")
        e(ind + 2, "items.append(item)")
        e(ind + 1, f"{target} = items")
        return
    t = f.type
    if t in FIXED:
        s, size = FIXED[t]
        e(ind, f"{target} = {s}.unpack_from(buf, off)[0]")
        e(ind, f"off += {size}")
    elif t == "bool":
        e(ind, f"{target} = buf[off] != 0")
        e(ind, "off += 1")
    elif f.is_struct:
        if nullable:
            e(ind, "present = I8.unpack_from(buf, off)[0]")
            e(ind, "off += 1")
            e(ind, "if present < 0:")
            e(ind + 1, f"{target} = None")
            e(ind, "else:")
            e(ind + 1, f"{target}, off = {struct_ref(msg, f.struct)}.read(buf, off, version)")
        else:
            e(ind, f"{target}, off = {struct_ref(msg, f.struct)}.read(buf, off, version)")
    else:
        e(ind, f"{target}, off = {scalar_reader(t, flex, nullable)}(buf, off)")


def scalar_reader(t: str, flex: bool, nullable: bool) -> str:
    if t == "uuid":
        return "r_uuid"
    if t == "bool":
        return "r_bool"
    base = {"string": "str", "bytes": "bytes", "records": "records"}[t]
    return "r_" + ("n" if nullable else "") + ("c" if flex else "") + base


def scalar_writer(t: str, flex: bool) -> str:
    if t == "uuid":
        return "w_uuid"
    if t == "bool":
        return "w_bool"
    base = {"string": "str", "bytes": "bytes", "records": "records"}[t]
    return "w_n" + ("c" if flex else "") + base


def write_value(e: Emitter, ind: int, msg: Message, f: Field, mode: Mode, value: str, out: str) -> None:
    flex, nullable = mode.flex, mode.nullable
    if f.is_array:
        e(ind, f"if {value} is None:")
        if nullable:
            e(ind + 1, f"{'w_ccount' if flex else 'w_count'}({out}, -1)")
        else:
            e(ind + 1, f"raise ValueError('non-nullable array {f.attr} is None')")
        e(ind, "else:")
        e(ind + 1, f"{'w_ccount' if flex else 'w_count'}({out}, len({value}))")
        elem = f.elem
        if elem in FIXED:
            e(ind + 1, f"w_fixed_array({out}, {value}, {elem!r})")
            return
        e(ind + 1, f"for item in {value}:")
        if f.is_struct:
            e(ind + 2, f"item.write({out}, version)")
        else:
            e(ind + 2, f"{scalar_writer(elem, flex)}({out}, item)")
        return
    t = f.type
    if t in FIXED:
        s, _ = FIXED[t]
        e(ind, f"{out} += {s}.pack({value})")
    elif t == "bool":
        e(ind, f"{out}.append(1 if {value} else 0)")
    elif f.is_struct:
        if nullable:
            e(ind, f"if {value} is None:")
            e(ind + 1, f"{out}.append(255)")
            e(ind, "else:")
            e(ind + 1, f"{out}.append(1)")
            e(ind + 1, f"{value}.write({out}, version)")
        else:
            e(ind, f"{value}.write({out}, version)")
    else:
        if not nullable:
            e(ind, f"if {value} is None:")
            e(ind + 1, f"raise ValueError('non-nullable field {f.attr} is None')")
        e(ind, f"{scalar_writer(t, flex)}({out}, {value})")


def default_expr(msg: Message, f: Field) -> str:
    if f.default == "STRUCT":
        return f"{struct_ref(msg, f.struct)}()"
    return f.default


def mutable_default(f: Field) -> bool:
    return f.default in ("[]", "STRUCT")


def emit_struct(e: Emitter, ind: int, msg: Message, st: Struct, top: bool) -> None:
    name = st.name
    e(ind, f"class {name}(Struct):")
    doc = st.about or (f"{msg.name} {msg.kind}" if top else f"Element of {msg.name}.")
    if top:
        vv = f"{msg.valid.lo}-{msg.valid.hi}"
        fl = f"{msg.flexible.lo}+" if msg.flexible.hi is None and msg.flexible.lo <= msg.valid.hi else "none"
        key = f", API key {msg.api_key}" if msg.api_key is not None else ""
        doc = f"Kafka {msg.name} ({msg.kind}{key}), versions {vv}, flexible versions {fl}.\n\n" \
              f"{' ' * 4 * (ind + 1)}Generated from kafka-specs/{msg.source}."
    e(ind + 1, '"""' + doc.replace('"""', "'''").replace("\\", "\\\\") + '"""')
    e()
    slots = [f.attr for f in st.fields] + ["unknown_tagged_fields"]
    e(ind + 1, f"__slots__ = {tuple(slots)!r}")
    if top:
        e(ind + 1, f"NAME = {msg.name!r}")
        e(ind + 1, f"API_KEY = {msg.api_key!r}")
        e(ind + 1, f"MESSAGE_TYPE = {msg.kind!r}")
        e(ind + 1, f"VALID_VERSIONS = ({msg.valid.lo}, {msg.valid.hi})")
        flex_lo = first_flexible(msg)
        e(ind + 1, f"FLEXIBLE_MIN = {flex_lo!r}  # first flexible version, or None")
        e(ind + 1, f"LISTENERS = {tuple(msg.listeners)!r}")
    e()
    # nested structs (only under the top-level class, flat)
    if top:
        for sub in msg.structs:
            emit_struct(e, ind + 1, msg, sub, False)
    # FIELDS schema: (attr, type, versions, nullable versions, tag, tagged versions, flex override)
    e(ind + 1, "FIELDS = (")
    for f in st.fields:
        flex_o = f.flex_override.as_tuple() if f.flex_override else None
        ref = f"'{f.struct.name}'" if f.struct else "None"
        e(ind + 2, f"({f.attr!r}, {f.type!r}, {f.versions.as_tuple()!r}, {f.nullable.as_tuple()!r}, "
                   f"{f.tag!r}, {f.tagged.as_tuple()!r}, {flex_o!r}, {ref}),")
    e(ind + 1, ")")
    e()
    # __init__
    params = []
    for f in st.fields:
        params.append(f"{f.attr}={'_DEFAULT' if mutable_default(f) else f.default}")
    params.append("unknown_tagged_fields=None")
    e(ind + 1, "def __init__(self, " + ", ".join(params) + "):")
    for f in st.fields:
        if mutable_default(f):
            e(ind + 2, f"self.{f.attr} = {default_expr(msg, f)} if {f.attr} is _DEFAULT else {f.attr}")
        else:
            e(ind + 2, f"self.{f.attr} = {f.attr}")
    e(ind + 2, "self.unknown_tagged_fields = unknown_tagged_fields")
    e()
    # Field-wise equality spelled out per class: the writers compare tagged struct fields with their
    # empty default on every write (Fetch: three per partition), and Struct's generic __eq__ costs
    # a generator and a getattr per slot.
    e(ind + 1, "def __eq__(self, other):")
    e(ind + 2, "if type(other) is not type(self):")
    e(ind + 3, "return NotImplemented")
    e(ind + 2, "return (" + " and ".join(f"self.{s} == other.{s}" for s in slots) + ")")
    e()
    emit_read(e, ind + 1, msg, st)
    emit_write(e, ind + 1, msg, st)


def emit_read(e: Emitter, ind: int, msg: Message, st: Struct) -> None:
    """Emit ``read``. Fixed-width fields and bools are read without a length check (the hot path);
    running off the end of the buffer raises struct.error or IndexError there, which the one
    try block around the body (free unless raised, Python 3.11) turns into DecodeError, so a
    decoder raises nothing else (tools/fuzz_protocol.py checks it)."""
    e(ind, "@classmethod")
    e(ind, "def read(cls, buf, off, version):")
    e(ind + 1, '"""Decode from ``buf`` at ``off``; returns ``(obj, new_off)``. Raises DecodeError."""')
    e(ind + 1, "try:")
    emit_read_body(e, ind + 1, msg, st)
    e(ind + 1, "except TRUNCATED as exc:")
    e(ind + 2, f"raise DecodeError(f'truncated {st.name}: {{exc}}') from None")
    e()


def emit_read_body(e: Emitter, ind: int, msg: Message, st: Struct) -> None:
    e(ind + 1, "self = cls.__new__(cls)")
    e(ind + 1, "self.unknown_tagged_fields = None")
    tagged_fields = []
    for f in st.fields:
        ranges = version_ranges(msg, f)
        first = True
        has_tagged = any(m.kind == "tagged" for _, _, m in ranges)
        if has_tagged:
            tagged_fields.append((f, ranges))
        branches = [(a, b, m) for a, b, m in ranges if m.kind == "regular"]
        others = [(a, b, m) for a, b, m in ranges if m.kind != "regular"]
        if not branches:
            e(ind + 1, f"self.{f.attr} = {default_expr(msg, f)}")
            continue
        if len(branches) == 1 and not others:
            read_value(e, ind + 1, msg, f, branches[0][2], f"self.{f.attr}")
            continue
        for a, b, m in branches:
            e(ind + 1, f"{'if' if first else 'elif'} {cond(msg, a, b)}:")
            first = False
            read_value(e, ind + 2, msg, f, m, f"self.{f.attr}")
        if others:
            e(ind + 1, "else:")
            e(ind + 2, f"self.{f.attr} = {default_expr(msg, f)}")
    flex_lo = first_flexible(msg)
    if flex_lo is not None:
        e(ind + 1, f"if version >= {flex_lo}:")
        e(ind + 2, "nt, off = r_uvarint(buf, off)")
        e(ind + 2, "for _ in range(nt):")
        e(ind + 3, "tag, off = r_uvarint(buf, off)")
        e(ind + 3, "size, off = r_uvarint(buf, off)")
        first = True
        for f, ranges in tagged_fields:
            for a, b, m in ranges:
                if m.kind != "tagged":
                    continue
                c = cond(msg, a, b)
                e(ind + 3, f"{'if' if first else 'elif'} tag == {f.tag}{'' if c == 'True' else ' and ' + c}:")
                first = False
                e(ind + 4, "end = off + size")
                e(ind + 4, "if end > len(buf):")
                e(ind + 5, "raise DecodeError('tagged field exceeds buffer')")
                read_value(e, ind + 4, msg, f, m, f"self.{f.attr}")
                e(ind + 4, "if off != end:")
                e(ind + 5, f"raise DecodeError('tagged field {f.attr} size mismatch')")
        if first:
            e(ind + 3, "self.unknown_tagged_fields, off = r_unknown_tag(buf, off, tag, size, self.unknown_tagged_fields)")
        else:
            e(ind + 3, "else:")
            e(ind + 4, "self.unknown_tagged_fields, off = r_unknown_tag(buf, off, tag, size, self.unknown_tagged_fields)")
    e(ind + 1, "return self, off")


def emit_write(e: Emitter, ind: int, msg: Message, st: Struct) -> None:
    e(ind, "def write(self, out, version):")
    e(ind + 1, '"""Append the encoding of this object at ``version`` to the bytearray ``out``."""')
    tagged_fields = []
    for f in st.fields:
        ranges = version_ranges(msg, f)
        if any(m.kind == "tagged" for _, _, m in ranges):
            tagged_fields.append((f, ranges))
        branches = [(a, b, m) for a, b, m in ranges if m.kind == "regular"]
        if not branches:
            continue
        if len(branches) == 1 and len(ranges) == 1:
            write_value(e, ind + 1, msg, f, branches[0][2], f"self.{f.attr}", "out")
            continue
        first = True
        for a, b, m in branches:
            e(ind + 1, f"{'if' if first else 'elif'} {cond(msg, a, b)}:")
            first = False
            write_value(e, ind + 2, msg, f, m, f"self.{f.attr}", "out")
    flex_lo = first_flexible(msg)
    if flex_lo is not None:
        e(ind + 1, f"if version >= {flex_lo}:")
        if not tagged_fields:
            e(ind + 2, "if self.unknown_tagged_fields:")
            e(ind + 3, "w_tagged(out, sorted(self.unknown_tagged_fields))")
            e(ind + 2, "else:")
            e(ind + 3, "out.append(0)")
        else:
            e(ind + 2, "tagged = list(self.unknown_tagged_fields or ())")
            for f, ranges in tagged_fields:
                for a, b, m in ranges:
                    if m.kind != "tagged":
                        continue
                    c = cond(msg, a, b)
                    d = default_expr(msg, f)
                    if f.default == "STRUCT":
                        # compare with a shared empty instance instead of building one per write
                        d = f"{struct_ref(msg, f.struct)}._EMPTY"
                        EMPTY_STRUCTS.setdefault(msg.name, []).append(struct_ref(msg, f.struct))
                    test = f"self.{f.attr} != {d}" if d not in ("None",) else f"self.{f.attr} is not None"
                    e(ind + 2, f"if {'' if c == 'True' else c + ' and '}{test}:")
                    e(ind + 3, "t = bytearray()")
                    write_value(e, ind + 3, msg, f, m, f"self.{f.attr}", "t")
                    e(ind + 3, f"tagged.append(({f.tag}, t))")
            e(ind + 2, "tagged.sort(key=_tag_of)")
            e(ind + 2, "w_tagged(out, tagged)")
    e()


HEADER = '''# Generated by tools/gen_protocol.py from kafka-specs/{subdir}/{sources}
# (Apache Kafka message specifications, Apache License 2.0). Do not edit: run the generator.
# flake8: noqa
"""{doc}"""

from kcompat.protocol.primitives import (
    DecodeError, TRUNCATED, ZERO_UUID, I8, I16, U16, I32, U32, I64, F64,
    r_uvarint, r_count, r_ccount, r_fixed_array, r_unknown_tag,
    r_str, r_nstr, r_cstr, r_ncstr, r_bytes, r_nbytes, r_cbytes, r_ncbytes,
    r_records, r_nrecords, r_crecords, r_ncrecords, r_uuid,
    w_uvarint, w_count, w_ccount, w_fixed_array, w_tagged,
    w_nstr, w_ncstr, w_nbytes, w_ncbytes, w_nrecords, w_ncrecords, w_uuid,
)
from kcompat.protocol._gen_support import _DEFAULT, Struct, _tag_of, r_bool, w_bool

__all__ = {all!r}
'''


def module_name(msg_name: str) -> str:
    for suffix in ("Request", "Response"):
        if msg_name.endswith(suffix):
            return snake(msg_name[: -len(suffix)])
    return snake(msg_name)


# spec folder -> (package under kcompat/protocol, one module per API?)
TARGETS = {
    "message": ("messages", True),
    "metadata": ("metadata_records", False),
    "storage": ("storage_records", False),
    "group-coordinator": ("group_records", False),
    "transaction-coordinator": ("txn_records", False),
    "raft": ("raft_records", False),
    "share-coordinator": ("share_records", False),
}


def generate(specs: Path) -> dict[str, dict[str, str]]:
    """Return {package: {file name: source}} for every generated module."""
    result = {}
    newer = specs.parent / NEWER_SPECS_DIR
    for subdir, (package, by_api) in TARGETS.items():
        result[package] = generate_dir(spec_files(specs, newer, subdir), subdir, package, by_api)
    return result


def spec_files(specs: Path, newer: Path, subdir: str) -> list[tuple[Path, Path | None]]:
    """The spec files of ``subdir`` as ``(spec, older spec to merge with or None)``: ``specs``'s,
    with those matching :data:`FROM_NEWER_SPECS` taken from (or added from) ``newer`` instead,
    those matching :data:`MERGED_WITH_NEWER_SPECS` taken from ``newer`` merged with ``specs``'s,
    and those matching :data:`SUPERSEDED_BY_NEWER` left out."""
    files = {p.name: (p, None) for p in (specs / subdir).glob("*.json")}
    for pattern in SUPERSEDED_BY_NEWER:
        folder, _, glob = pattern.partition("/")
        if folder == subdir:
            for p in (specs / subdir).glob(glob):
                files.pop(p.name, None)
    for patterns, merge in ((FROM_NEWER_SPECS, False), (MERGED_WITH_NEWER_SPECS, True)):
        for pattern in patterns:
            folder, _, glob = pattern.partition("/")
            if folder == subdir:
                if not newer.is_dir():
                    raise SystemExit(f"{newer} not found (needed for {pattern})")
                files.update({p.name: (p, files[p.name][0] if merge and p.name in files else None)
                              for p in (newer / subdir).glob(glob)})
    return [files[name] for name in sorted(files)]


def generate_dir(paths: list[tuple[Path, Path | None]], subdir: str, package: str,
                 by_api: bool) -> dict[str, str]:
    groups: dict[str, list[Message]] = {}
    for path, older in paths:
        msg = parse_message(path, older)
        if msg.kind == "header":
            mod = "headers"
        elif by_api:
            mod = module_name(msg.name)
        else:
            mod = snake(msg.name)
        groups.setdefault(mod, []).append(msg)
    files: dict[str, str] = {}
    registry = []
    for mod, msgs in sorted(groups.items()):
        msgs.sort(key=lambda m: (m.kind != "request", m.name))
        e = Emitter()
        names = [m.name for m in msgs]
        sources = ", ".join(m.source.split("/")[-1] for m in msgs)
        if mod == "headers":
            doc = "Kafka request and response headers."
        elif by_api and msgs[0].api_key is not None:
            doc = f"Kafka {module_title(msgs[0].name)} API (key {msgs[0].api_key}): {' and '.join(names)}."
        else:
            doc = f"Kafka {' and '.join(names)} ({msgs[0].kind} message, kafka-specs/{subdir})."
        e(0, HEADER.format(subdir=subdir, sources=sources, doc=doc, all=names).rstrip("\n"))
        for m in msgs:
            e()
            e()
            emit_struct(e, 0, m, m.root, True)
            empties = sorted(set(EMPTY_STRUCTS.pop(m.name, [])))
            if empties:
                e()
                for ref in empties:
                    e(0, f"{ref}._EMPTY = {ref}()  # default value of tagged fields of this type")
            if m.api_key is not None and m.kind in ("request", "response"):
                registry.append((m.api_key, m.kind, mod, m.name, module_title(m.name)))
            elif m.api_key is not None:
                registry.append((m.api_key, m.kind, mod, m.name, m.name))
        src = "\n".join(e.lines).rstrip() + "\n"
        src = re.sub(r"\n{3,}(    )", r"\n\n\1", src)
        files[f"{mod}.py"] = src
    if by_api:
        files["__init__.py"] = generate_registry(registry)
    else:
        files["__init__.py"] = generate_record_registry(subdir, package, registry)
    return files


def generate_record_registry(subdir: str, package: str, registry) -> str:
    lines = [
        f"# Generated by tools/gen_protocol.py from kafka-specs/{subdir} (Apache License 2.0).",
        "# Do not edit: run the generator.",
        f'"""Record types of kafka-specs/{subdir}: ``RECORD_TYPES`` maps a record type id (the spec\'s',
        '``apiKey``) to its class."""',
        "",
    ]
    for _key, _kind, mod, name, _title in sorted(registry, key=lambda r: r[3]):
        lines.append(f"from kcompat.protocol.{package}.{mod} import {name}")
    lines += ["", "RECORD_TYPES = {"]
    for key, _kind, _mod, name, _title in sorted(registry):
        lines.append(f"    {key}: {name},")
    lines += ["}", ""]
    return "\n".join(lines)


def module_title(name: str) -> str:
    for suffix in ("Request", "Response"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def generate_registry(registry) -> str:
    by_key: dict[int, dict] = {}
    for key, kind, mod, name, title in registry:
        d = by_key.setdefault(key, {"title": title, "mod": mod})
        d[kind] = name
    lines = [
        "# Generated by tools/gen_protocol.py from kafka-specs/message (Apache License 2.0).",
        "# Do not edit: run the generator.",
        '"""Registry of every Kafka API: key -> (name, request class, response class).',
        "",
        "Modules are imported lazily on first use so that start-up does not pay for ~90 APIs.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import functools",
        "import importlib",
        "",
        "# api key -> (API name, module, request class name, response class name)",
        "API_TABLE = {",
    ]
    for key in sorted(by_key):
        d = by_key[key]
        lines.append(f"    {key}: ({d['title']!r}, {d['mod']!r}, {d.get('request')!r}, {d.get('response')!r}),")
    lines += [
        "}",
        "",
        "API_NAMES = {key: entry[0] for key, entry in API_TABLE.items()}",
        "",
        "",
        "@functools.cache",
        "def api_classes(api_key: int):",
        '    """Return ``(request_class, response_class)`` for ``api_key``; KeyError if unknown. The',
        '    module is imported on the first call for the key (every request asks: then a cache hit)."""',
        "    _title, mod, req, resp = API_TABLE[api_key]",
        "    module = importlib.import_module(f'kcompat.protocol.messages.{mod}')",
        "    return getattr(module, req), getattr(module, resp)",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--specs", type=Path, default=DEFAULT_SPECS)
    ap.add_argument("--check", action="store_true", help="exit 1 if committed files differ")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    if not (args.specs / "message").is_dir():
        print(f"spec directory {args.specs}/message not found", file=sys.stderr)
        return 2
    packages = generate(args.specs)
    base = args.out
    if args.check:
        drift = []
        for package, files in packages.items():
            out_dir = base / package
            for name, src in files.items():
                p = out_dir / name
                if not p.exists() or p.read_text() != src:
                    drift.append(f"{package}/{name}")
            existing = {p.name for p in out_dir.glob("*.py")} if out_dir.exists() else set()
            drift += [f"{package}/{n}" for n in sorted(existing - set(files))]
        if drift:
            print(f"generated protocol modules drifted from the specs: {drift}", file=sys.stderr)
            return 1
        print(f"{sum(len(f) for f in packages.values())} generated modules match the specs")
        return 0
    total = 0
    for package, files in packages.items():
        out_dir = base / package
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, src in files.items():
            (out_dir / name).write_text(src)
        for p in out_dir.glob("*.py"):
            if p.name not in files:
                p.unlink()
        total += len(files)
    print(f"wrote {total} modules under {os.path.relpath(base, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
