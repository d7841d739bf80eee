"""A ``.proto`` file's ``FileDescriptorProto``, built from the syntax tree ``proto-schema-parser``
gives and checked by the ``protobuf`` package's ``DescriptorPool`` (which refuses unknown types,
duplicate field numbers or names...), as protoc would: what a registry answers for
``?format=serialized`` (confluent-kafka's Python ``ProtobufDeserializer`` asks for it) when a schema
was registered as text.

Covered: package, imports, messages (nested), fields with their labels (proto3 ``optional`` as a
synthetic oneof), maps (their ``...Entry`` messages), oneofs, enums, services and methods (with
streaming flags). Options, reserved ranges, extensions and proto2 default values are not carried
into the descriptor. Type names resolve from the innermost scope outwards, over this file's types
and those of its dependencies (``dependencies``: name -> FileDescriptorProto; the well-known
``google/protobuf/*.proto`` files come from the protobuf package).
"""

from __future__ import annotations

import importlib

from google.protobuf import descriptor_pb2, descriptor_pool
from proto_schema_parser import ast

F = descriptor_pb2.FieldDescriptorProto
_SCALAR = {"double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
           "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
           "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
           "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64}
_WELL_KNOWN = ("any", "api", "duration", "empty", "field_mask", "source_context", "struct", "timestamp", "type",
               "wrappers", "descriptor")


def well_known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor of ``google/protobuf/<x>.proto`` shipped with the protobuf package."""
    stem = name.removeprefix("google/protobuf/").removesuffix(".proto")
    if not name.startswith("google/protobuf/") or stem not in _WELL_KNOWN:
        return None
    module = importlib.import_module(f"google.protobuf.{stem}_pb2")
    return descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)


def _symbols(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, int]:
    out: dict[str, int] = {}
    prefix = f".{fd.package}" if fd.package else ""

    def walk(msgs, enums, scope: str) -> None:
        for e in enums:
            out[f"{scope}.{e.name}"] = F.TYPE_ENUM
        for m in msgs:
            out[f"{scope}.{m.name}"] = F.TYPE_MESSAGE
            walk(m.nested_type, m.enum_type, f"{scope}.{m.name}")
    walk(fd.message_type, fd.enum_type, prefix)
    return out


def _ast_symbols(elements, scope: str, out: dict[str, int]) -> None:
    for el in elements:
        if isinstance(el, ast.Enum):
            out[f"{scope}.{el.name}"] = F.TYPE_ENUM
        elif isinstance(el, ast.Message):
            out[f"{scope}.{el.name}"] = F.TYPE_MESSAGE
            _ast_symbols(el.elements, f"{scope}.{el.name}", out)


class _Builder:
    def __init__(self, symbols: dict[str, int]) -> None:
        self.symbols = symbols

    def resolve(self, name: str, scope: str) -> tuple[int, str]:
        if name.startswith("."):
            if name in self.symbols:
                return self.symbols[name], name
            raise ValueError(f"unknown type {name}")
        while True:
            candidate = f"{scope}.{name}"
            if candidate in self.symbols:
                return self.symbols[candidate], candidate
            if not scope:
                raise ValueError(f"unknown type {name}")
            scope = scope.rsplit(".", 1)[0] if "." in scope else ""

    def field(self, msg, name: str, number: int, type_name: str, label: int, scope: str):
        f = msg.field.add(name=name, number=number, label=label)
        if type_name in _SCALAR:
            f.type = _SCALAR[type_name]
        else:
            f.type, f.type_name = self.resolve(type_name, scope)
        return f

    def message(self, m: ast.Message, out, scope: str, proto3: bool) -> None:
        full = f"{scope}.{m.name}"
        synthetic = []
        for el in m.elements:
            if isinstance(el, ast.Field):
                card = el.cardinality
                label = F.LABEL_REPEATED if card == ast.FieldCardinality.REPEATED else \
                    F.LABEL_REQUIRED if card == ast.FieldCardinality.REQUIRED else F.LABEL_OPTIONAL
                f = self.field(out, el.name, el.number, el.type, label, full)
                if proto3 and card == ast.FieldCardinality.OPTIONAL:
                    f.proto3_optional = True
                    synthetic.append(f)
            elif isinstance(el, ast.MapField):
                entry = out.nested_type.add(name="".join(p[:1].upper() + p[1:] for p in el.name.split("_")) + "Entry")
                entry.options.map_entry = True
                self.field(entry, "key", 1, el.key_type, F.LABEL_OPTIONAL, full)
                self.field(entry, "value", 2, el.value_type, F.LABEL_OPTIONAL, full)
                out.field.add(name=el.name, number=el.number, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                              type_name=f"{full}.{entry.name}")
            elif isinstance(el, ast.OneOf):
                index = len(out.oneof_decl)
                out.oneof_decl.add(name=el.name)
                for sub in el.elements:
                    if isinstance(sub, ast.Field):
                        self.field(out, sub.name, sub.number, sub.type, F.LABEL_OPTIONAL, full).oneof_index = index
            elif isinstance(el, ast.Message):
                self.message(el, out.nested_type.add(name=el.name), full, proto3)
            elif isinstance(el, ast.Enum):
                self.enum(el, out.enum_type.add(name=el.name))
            elif isinstance(el, ast.Group):
                raise ValueError("proto2 groups are not supported")
        for f in synthetic:   # proto3 optional: one synthetic oneof each, after the real ones
            f.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name=f"_{f.name}")

    @staticmethod
    def enum(e: ast.Enum, out) -> None:
        for v in e.elements:
            if isinstance(v, ast.EnumValue):
                out.value.add(name=v.name, number=v.number)


def build(tree: ast.File, name: str, dependencies: dict[str, descriptor_pb2.FileDescriptorProto]
          ) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto named ``name`` of ``tree``; ValueError when an import is missing or
    the pool refuses the result."""
    fd = descriptor_pb2.FileDescriptorProto(name=name)
    fd.syntax = tree.syntax or "proto2"
    deps: list[descriptor_pb2.FileDescriptorProto] = []
    for el in tree.file_elements:
        if isinstance(el, ast.Package):
            fd.package = el.name
        elif isinstance(el, ast.Import):
            dep = dependencies.get(el.name) or well_known(el.name)
            if dep is None:
                raise ValueError(f"import {el.name} is neither a reference nor a well-known type")
            fd.dependency.append(el.name)
            deps.append(dep)
    symbols: dict[str, int] = {}
    for dep in deps:
        symbols.update(_symbols(dep))
    scope = f".{fd.package}" if fd.package else ""
    _ast_symbols(tree.file_elements, scope, symbols)
    builder = _Builder(symbols)
    proto3 = fd.syntax == "proto3"
    for el in tree.file_elements:
        if isinstance(el, ast.Message):
            builder.message(el, fd.message_type.add(name=el.name), scope, proto3)
        elif isinstance(el, ast.Enum):
            builder.enum(el, fd.enum_type.add(name=el.name))
        elif isinstance(el, ast.Service):
            svc = fd.service.add(name=el.name)
            for m in el.elements:
                if isinstance(m, ast.Method):
                    svc.method.add(name=m.name, input_type=builder.resolve(m.input_type.type, scope)[1],
                                   output_type=builder.resolve(m.output_type.type, scope)[1],
                                   client_streaming=m.input_type.stream, server_streaming=m.output_type.stream)
    pool = descriptor_pool.DescriptorPool()
    try:
        for dep in _closure(deps, dependencies):
            pool.Add(dep)
        pool.Add(fd)
    except (TypeError, KeyError, ValueError) as e:
        raise ValueError(f"invalid .proto: {e}") from None
    return fd


def _closure(deps, dependencies) -> list:
    """``deps`` and their own imports, dependencies first, each once."""
    out, seen = [], set()

    def visit(fd) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for name in fd.dependency:
            sub = dependencies.get(name) or well_known(name)
            if sub is not None:
                visit(sub)
        out.append(fd)
    for d in deps:
        visit(d)
    return out
