"""PROTOBUF schemas: ``.proto`` text parsed by ``proto-schema-parser`` (an ANTLR grammar of the
protobuf language; syntax errors are turned into errors instead of printed) and compiled into a
``FileDescriptorProto`` checked by the protobuf package's descriptor pool
(:mod:`.protobuf_descriptor`), or a base64 ``FileDescriptorProto`` (what confluent-kafka's Python
``ProtobufSerializer`` registers). The descriptor becomes a :class:`ProtoModel` that the
compatibility rules compare.

Compatibility by Confluent's rules for Protobuf (differences named as in its ``Difference.Type``),
``reader`` reading data written with ``writer``:

- PACKAGE_CHANGED, MESSAGE_REMOVED (a message of the writer missing from the reader);
- per field number: FIELD_KIND_CHANGED (scalar / message or enum / map), FIELD_SCALAR_KIND_CHANGED
  outside the wire-compatible groups {int32, uint32, int64, uint64, bool}, {sint32, sint64},
  {fixed32, sfixed32}, {fixed64, sfixed64}, {string, bytes}; FIELD_NAMED_TYPE_CHANGED;
  FIELD_LABEL_CHANGED (repeated <-> singular); REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED
  (proto2); FIELD_MOVED_TO_EXISTING_ONEOF; MULTIPLE_FIELDS_MOVED_TO_ONEOF.
- Compatible: fields added or removed (not required), renamed fields, enum constants changed,
  messages added.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.generator import Generator
from proto_schema_parser.parser import Parser

from kcompat.schema_registry.protobuf_descriptor import build

_GROUPS = [{"int32", "uint32", "int64", "uint64", "bool"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
           {"fixed64", "sfixed64"}, {"string", "bytes"}]
_DESCRIPTOR_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
                     8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
                     17: "sint32", 18: "sint64"}
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


@dataclass(frozen=True)
class ProtoField:
    """``kind``: scalar, named (message or enum) or map; ``type``: scalar name, the last component
    of the named type, or ``map<k,v>``; ``label``: repeated, required or single."""

    name: str
    kind: str
    type: str
    label: str
    oneof: str | None = None


@dataclass
class ProtoModel:
    """A .proto file: package and messages by full name (``Outer.Inner``) -> field number ->
    :class:`ProtoField`."""

    package: str = ""
    messages: dict[str, dict[int, ProtoField]] = field(default_factory=dict)
    serialized: str = ""   # base64 of its FileDescriptorProto (``?format=serialized``)


class _Raise(ErrorListener):
    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):  # noqa: N802 (ANTLR's name)
        raise ValueError(f"line {line}:{column} {msg}")


def _quiet(recognizer) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def _from_descriptor_message(msg, prefix: str, model: ProtoModel) -> None:
    full = f"{prefix}{msg.name}"
    entries = {n.name: n for n in msg.nested_type if n.options.map_entry}
    fields: dict[int, ProtoField] = {}
    model.messages[full] = fields
    for f in msg.field:
        oneof = None
        if f.HasField("oneof_index") and not f.proto3_optional:
            oneof = msg.oneof_decl[f.oneof_index].name
        label = {1: "single", 2: "required", 3: "repeated"}[f.label]
        last = f.type_name.rsplit(".", 1)[-1]
        entry = entries.get(last) if f.type == 11 and f.type_name.endswith(f"{full}.{last}") else None
        if entry is not None:
            k, v = entry.field[0], entry.field[1]
            vt = _DESCRIPTOR_TYPES.get(v.type) or v.type_name.rsplit(".", 1)[-1]
            kt = _DESCRIPTOR_TYPES.get(k.type)
            fields[f.number] = ProtoField(f.name, "map", f"map<{kt},{vt}>", "repeated", oneof)
        elif f.type in _DESCRIPTOR_TYPES:
            fields[f.number] = ProtoField(f.name, "scalar", _DESCRIPTOR_TYPES[f.type], label, oneof)
        else:
            fields[f.number] = ProtoField(f.name, "named", f.type_name.rsplit(".", 1)[-1], label, oneof)
    for n in msg.nested_type:
        if not n.options.map_entry:
            _from_descriptor_message(n, f"{full}.", model)


def _descriptor(text: str, name: str, dependencies: dict) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of ``text``: base64 of a serialized one, or .proto source built by
    :func:`.protobuf_descriptor.build` (named ``name``; imports among ``dependencies``)."""
    if _BASE64.match(text) and " " not in text.strip():
        try:
            fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode("".join(text.split()), validate=True))
            if fd.message_type or fd.enum_type or fd.name:
                return fd
        except (binascii.Error, ValueError, DecodeError):
            pass
    try:
        tree = Parser(setup_lexer=_quiet, setup_parser=_quiet).parse(text)
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"invalid .proto: {e}") from None
    if not tree.file_elements:
        raise ValueError("invalid .proto: empty")
    return build(tree, name, dependencies)


def parse(text: str, references: list[tuple[str, str]]) -> ProtoModel:
    """The :class:`ProtoModel` of ``text`` (.proto source, or base64 of a serialized
    FileDescriptorProto) importing the ``references`` (``(import name, schema text)``,
    dependencies first); ValueError when it does not parse or compile."""
    deps: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, ref in references:
        deps[name] = _descriptor(ref, name, deps)
    fd = _descriptor(text, "default", deps)
    model = ProtoModel(package=fd.package, serialized=base64.b64encode(fd.SerializeToString()).decode())
    for m in fd.message_type:
        _from_descriptor_message(m, "", model)
    return model


def canonical(text: str, parsed: ProtoModel, normalize: bool, has_references: bool) -> str:
    """The text as given (trimmed), or with ``normalize`` .proto text written back by
    proto-schema-parser's generator without comments (one layout whatever the spacing); serialized
    descriptors stay base64 (not converted to .proto)."""
    if normalize and not (_BASE64.match(text) and " " not in text.strip()):
        tree = Parser(setup_lexer=_quiet, setup_parser=_quiet).parse(text)
        return Generator().generate(_without_comments(tree)).strip()
    return text.strip()


def _without_comments(node):
    for attr in ("file_elements", "elements"):
        items = getattr(node, attr, None)
        if isinstance(items, list):
            setattr(node, attr, [_without_comments(e) for e in items if not isinstance(e, ast.Comment)])
    return node


def serialized(parsed: ProtoModel) -> str:
    """``?format=serialized``: base64 of the schema's FileDescriptorProto."""
    return parsed.serialized


def _msg(kind: str, path: str) -> str:
    return f"{{errorType:'{kind}', description:'The new schema has a {kind} difference at {path}'}}"


def _same_group(a: str, b: str) -> bool:
    return a == b or any(a in g and b in g for g in _GROUPS)


def check(reader: ProtoModel, writer: ProtoModel) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty: compatible)."""
    out: list[str] = []
    if reader.package != writer.package:
        out.append(_msg("PACKAGE_CHANGED", "#/"))
    for name, w_fields in writer.messages.items():
        r_fields = reader.messages.get(name)
        if r_fields is None:
            out.append(_msg("MESSAGE_REMOVED", f"#/{name}"))
            continue
        moved_to_new_oneof: dict[str, int] = {}
        w_oneofs = {f.oneof for f in w_fields.values() if f.oneof}
        for number, wf in w_fields.items():
            path = f"#/{name}/{number}"
            rf = r_fields.get(number)
            if rf is None:
                if wf.label == "required":
                    out.append(_msg("REQUIRED_FIELD_REMOVED", path))
                continue
            if rf.kind != wf.kind:
                out.append(_msg("FIELD_KIND_CHANGED", path))
            elif rf.kind == "scalar" and not _same_group(rf.type, wf.type):
                out.append(_msg("FIELD_SCALAR_KIND_CHANGED", path))
            elif rf.kind != "scalar" and rf.type != wf.type:
                out.append(_msg("FIELD_NAMED_TYPE_CHANGED", path))
            if (rf.label == "repeated") != (wf.label == "repeated"):
                out.append(_msg("FIELD_LABEL_CHANGED", path))
            elif rf.label == "required" and wf.label != "required":
                out.append(_msg("REQUIRED_FIELD_ADDED", path))
            if rf.oneof and not wf.oneof:
                if rf.oneof in w_oneofs:
                    out.append(_msg("FIELD_MOVED_TO_EXISTING_ONEOF", path))
                else:
                    moved_to_new_oneof[rf.oneof] = moved_to_new_oneof.get(rf.oneof, 0) + 1
        for oneof, n in moved_to_new_oneof.items():
            if n > 1:
                out.append(_msg("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"#/{name}/{oneof}"))
        for number, rf in r_fields.items():
            if number not in w_fields and rf.label == "required":
                out.append(_msg("REQUIRED_FIELD_ADDED", f"#/{name}/{number}"))
    return out
