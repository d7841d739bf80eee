"""The registry's state, rebuilt by replaying the ``_schemas`` topic (:meth:`RegistryState.apply`),
and its operations.

Reads answer from the state. Writes (``plan_*``) validate against the state and return
``(records, result)``: the ``_schemas`` records that make the change (see :mod:`.records`) and
what the REST call answers once they are written; the state changes only when those records are
read back, so every node (the writer included) reaches the same state from the topic alone.
Errors are :class:`~.errors.RegistryError` with Confluent's codes.

Semantics follow Confluent's registry: ids are global and shared by every subject version with the
same schema (type, stored text, references); a new id is one more than the highest id seen;
versions of a subject count up from one more than its highest version (soft-deleted included);
a soft delete keeps the version (``deleted``), a permanent delete (of a soft-deleted version)
writes a tombstone; deleting a subject softly writes DELETE_SUBJECT, permanently tombstones all
its versions.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcompat.schema_registry import errors, records
from kcompat.schema_registry.records import SchemaValue
from kcompat.schema_registry.schemas import DEFAULT_LEVEL, LEVELS, ParsedSchema, incompatibilities, parse_schema

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2 ** 31 - 1
Records = list[tuple[bytes, bytes | None]]


def parse_version(spec) -> int | None:
    """``"latest"`` or ``-1`` -> None (the latest), else the version; 42202 otherwise."""
    s = str(spec)
    if s == "latest" or s == "-1":
        return None
    try:
        v = int(s)
    except ValueError:
        raise errors.invalid_version(spec) from None
    if not 1 <= v <= MAX_VERSION:
        raise errors.invalid_version(spec)
    return v


def _content(schema_type: str, text: str, references) -> tuple:
    return schema_type, text, tuple((r.get("name"), r.get("subject"), r.get("version")) for r in references)


@dataclass
class Writer:
    """The node that writes ``_schemas`` as the last NOOP record announced it."""

    node_id: int
    url: str
    epoch: int


class RegistryState:
    """Subjects, versions, ids, configs and modes; ``writer`` is the last announced writer."""

    def __init__(self) -> None:
        self.versions: dict[str, dict[int, SchemaValue]] = {}
        self.by_id: dict[int, list[SchemaValue]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.writer: Writer | None = None
        self._id_of: dict[tuple, int] = {}      # (type, stored text, references) -> id
        self._parsed: dict[tuple[str, int], ParsedSchema] = {}

    # -- replay ------------------------------------------------------------------------------------

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one ``_schemas`` record; records that cannot be decoded are skipped."""
        decoded = records.decode(key, value)
        if decoded is None:
            return
        k, v = decoded
        kind, subject = k.get("keytype"), k.get("subject")
        try:
            if kind == records.SCHEMA:
                self._apply_schema(str(subject), int(k["version"]), v)
            elif kind == records.CONFIG:
                self._set(self.configs, subject, v.get("compatibilityLevel") if v else None)
            elif kind == records.MODE:
                self._set(self.modes, subject, v.get("mode") if v else None)
            elif kind == records.DELETE_SUBJECT and v is not None:
                for ver, sv in self.versions.get(str(subject), {}).items():
                    if ver <= int(v.get("version", MAX_VERSION)):
                        sv.deleted = True
            elif kind == records.CLEAR_SUBJECT and v is not None:
                for ver in list(self.versions.get(str(subject), {})):
                    self._apply_schema(str(subject), ver, None)
            elif kind == records.NOOP and v is not None and "kcompatWriter" in v:
                self.writer = Writer(int(v["kcompatWriter"]), str(v["url"]), int(v.get("epoch", -1)))
        except (KeyError, TypeError, ValueError, AttributeError):
            return

    @staticmethod
    def _set(d: dict, subject, level) -> None:
        if level is None:
            d.pop(subject, None)
        else:
            d[subject] = str(level)

    def _apply_schema(self, subject: str, version: int, v: dict | None) -> None:
        old = self.versions.get(subject, {}).pop(version, None)
        self._parsed.pop((subject, version), None)
        if old is not None:
            same = self.by_id.get(old.id, [])
            same[:] = [s for s in same if not (s.subject == subject and s.version == version)]
            if not same:
                self.by_id.pop(old.id, None)
                self._id_of.pop(_content(old.schema_type, old.schema, old.references), None)
        if subject in self.versions and not self.versions[subject]:
            del self.versions[subject]
        if v is None:
            return
        sv = SchemaValue.decode(v)
        self.versions.setdefault(subject, {})[version] = sv
        self.by_id.setdefault(sv.id, []).append(sv)
        self._id_of[_content(sv.schema_type, sv.schema, sv.references)] = sv.id
        self.max_id = max(self.max_id, sv.id)

    # -- reads ---------------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        """Subjects with a live version (or any version with ``deleted``), sorted."""
        return sorted(s for s, vs in self.versions.items()
                      if s.startswith(prefix) and any(deleted or not v.deleted for v in vs.values()))

    def version_list(self, subject: str, deleted: bool = False) -> list[int]:
        """Versions of ``subject``; 40401 when it has none."""
        vs = [n for n, v in sorted(self.versions.get(subject, {}).items()) if deleted or not v.deleted]
        if not vs:
            raise errors.subject_not_found(subject)
        return vs

    def get_version(self, subject: str, spec, deleted: bool = False) -> SchemaValue:
        """One version (``spec``: number, ``latest`` or -1); 42202, 40401, 40402."""
        wanted = parse_version(spec)
        vs = self.versions.get(subject)
        if not vs or not any(deleted or not v.deleted for v in vs.values()):
            raise errors.subject_not_found(subject)
        if wanted is None:
            live = [n for n, v in vs.items() if deleted or not v.deleted]
            return vs[max(live)]
        sv = vs.get(wanted)
        if sv is None or (sv.deleted and not deleted):
            raise errors.version_not_found(wanted)
        return sv

    def schema_by_id(self, schema_id: int) -> SchemaValue:
        """The schema of an id; 40403."""
        same = self.by_id.get(schema_id)
        if not same:
            raise errors.schema_not_found(schema_id)
        return same[0]

    def subject_versions_of_id(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """``[(subject, version)]`` using ``schema_id``; 40403 when none."""
        same = self.by_id.get(schema_id)
        if not same:
            raise errors.schema_not_found(schema_id)
        return sorted((s.subject, s.version) for s in same if deleted or not s.deleted)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name ``subject`` ``version``."""
        return sorted({sv.id for vs in self.versions.values() for sv in vs.values() if not sv.deleted
                       and any(r.get("subject") == subject and r.get("version") == version for r in sv.references)})

    def compatibility(self, subject: str | None, default_to_global: bool = True) -> str | None:
        level = self.configs.get(subject)
        if level is None and (subject is None or default_to_global):
            level = self.configs.get(None, DEFAULT_LEVEL)
        return level

    def mode(self, subject: str | None, default_to_global: bool = True) -> str | None:
        m = self.modes.get(subject)
        if m is None and (subject is None or default_to_global):
            m = self.modes.get(None, "READWRITE")
        return m

    def parse(self, schema_type: str, text, references, normalize: bool = False) -> ParsedSchema:
        """Parse a schema given to the REST API with its references resolved; 42201."""
        if not isinstance(text, str) or not text:
            raise errors.invalid_schema("Empty schema")
        if references is None:
            references = []
        if not isinstance(references, list) or not all(
                isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
                and isinstance(r.get("version"), int) for r in references):
            raise errors.invalid_schema("references must be a list of {name, subject, version}")
        try:
            ref_texts = self._reference_texts(references, set())
        except errors.RegistryError as e:
            raise errors.invalid_schema(f"reference not found: {e.message}") from None
        try:
            return parse_schema(schema_type, text, references, ref_texts, normalize)
        except ValueError as e:
            raise errors.invalid_schema(f"{text[:200]!r}, details: {e}") from None

    def _reference_texts(self, references: list[dict], seen: set) -> list[tuple[str, str]]:
        """``(reference name, schema text)`` of ``references`` and theirs, dependencies first."""
        out: list[tuple[str, str]] = []
        for r in references:
            key = (r["subject"], r["version"])
            if key in seen:
                continue
            seen.add(key)
            sv = self.get_version(r["subject"], r["version"], deleted=True)
            out += self._reference_texts(sv.references, seen)
            out.append((r["name"], sv.schema))
        return out

    def parsed(self, sv: SchemaValue) -> ParsedSchema:
        """The parsed form of a stored version (cached)."""
        key = (sv.subject, sv.version)
        p = self._parsed.get(key)
        if p is None:
            p = self._parsed[key] = self.parse(sv.schema_type, sv.schema, sv.references)
        return p

    def schema_text(self, sv: SchemaValue, fmt: str | None = None) -> str:
        """The schema as answered: with ``fmt`` ``serialized`` a PROTOBUF schema is base64 of its
        FileDescriptorProto (as Confluent's ``?format=serialized``), otherwise as stored."""
        if fmt == "serialized" and sv.schema_type == "PROTOBUF":
            return self.parsed(sv).parsed.serialized
        return sv.schema

    def find(self, subject: str, parsed: ParsedSchema, deleted: bool = False) -> SchemaValue | None:
        """The version of ``subject`` holding the same schema (type, text, references), newest first."""
        for n in sorted(self.versions.get(subject, {}), reverse=True):
            sv = self.versions[subject][n]
            if (deleted or not sv.deleted) and self._same(sv, parsed):
                return sv
        return None

    @staticmethod
    def _same(sv: SchemaValue, parsed: ParsedSchema) -> bool:
        return sv.schema_type == parsed.schema_type and sv.schema == parsed.text and \
            tuple(sv.references) == tuple(parsed.references)

    def lookup(self, subject: str, parsed: ParsedSchema, deleted: bool = False) -> SchemaValue:
        """``POST /subjects/{subject}``: the version holding ``parsed``; 40401, 40403."""
        if not self.versions.get(subject):
            raise errors.subject_not_found(subject)
        sv = self.find(subject, parsed, deleted)
        if sv is None:
            raise errors.schema_not_found()
        return sv

    def check(self, subject: str, parsed: ParsedSchema, spec=None) -> list[str]:
        """Incompatibilities of ``parsed`` with ``subject`` at its level: against version ``spec``
        (then as a non-transitive check of that one version), or the live versions (None)."""
        level = self.compatibility(subject) or DEFAULT_LEVEL
        if level == "NONE":
            return []
        if spec is not None:
            previous = [self.get_version(subject, spec)]
            level = level.removesuffix("_TRANSITIVE")
        else:
            previous = [v for _, v in sorted(self.versions.get(subject, {}).items()) if not v.deleted]
        return incompatibilities(level, parsed, [self.parsed(v) for v in previous])

    # -- writes: (records, result) ---------------------------------------------------------------

    def _writable(self, subject: str | None) -> str:
        mode = self.mode(subject)
        if mode == "READONLY":
            raise errors.not_permitted(f"Subject {subject} is in read-only mode" if subject else
                                       "The registry is in read-only mode")
        return mode

    def plan_register(self, subject: str, parsed: ParsedSchema, schema_id: int | None = None,
                      version: int | None = None) -> tuple[Records, dict]:
        """Register ``parsed`` under ``subject``: ``{"id": id}``, with no record if it is already
        there; 409 if incompatible, 42205 when read-only; ``schema_id``/``version`` only in IMPORT
        mode (42205 otherwise)."""
        mode = self._writable(subject)
        if (schema_id is not None or version is not None) and mode != "IMPORT":
            raise errors.not_permitted("Subject is not in import mode; an id or version cannot be given")
        existing = self.find(subject, parsed)
        if existing is not None and schema_id in (None, existing.id):
            return [], {"id": existing.id}
        if mode != "IMPORT":
            messages = self.check(subject, parsed)
            if messages:
                latest = max((v for v in self.versions.get(subject, {}).values() if not v.deleted),
                             key=lambda v: v.version)
                detail = messages + [f"{{oldSchemaVersion: {latest.version}}}", f"{{oldSchema: '{latest.schema}'}}",
                                     f"{{compatibility: '{self.compatibility(subject)}'}}"]
                raise errors.incompatible(f"Schema being registered is incompatible with an earlier schema for "
                                          f"subject \"{subject}\", details: [{', '.join(detail)}]")
        if schema_id is None:
            schema_id = self._id_of.get(_content(parsed.schema_type, parsed.text, parsed.references),
                                        self.max_id + 1)
        else:
            if schema_id < 1:
                raise errors.invalid_schema_id(schema_id)
            same = self.by_id.get(schema_id)
            if same and not self._same(same[0], parsed):
                raise errors.RegistryError(422, 42207, f"Overwrite new schema with id {schema_id} is not permitted.")
        if version is None:
            version = max(self.versions.get(subject, {}), default=0) + 1
        elif version in self.versions.get(subject, {}):
            raise errors.RegistryError(422, 42202, f"Version {version} already exists under subject {subject}")
        sv = SchemaValue(subject=subject, version=version, id=schema_id, schema=parsed.text,
                         schema_type=parsed.schema_type, references=[dict(r) for r in parsed.references])
        return [(records.schema_key(subject, version), sv.encode())], {"id": schema_id}

    def plan_delete_version(self, subject: str, spec, permanent: bool) -> tuple[Records, int]:
        """Delete one version (soft, or permanent after soft); the version number. 40401, 40402,
        40406 (already soft-deleted), 40407 (permanent before soft), 42206 (referenced)."""
        self._writable(subject)
        wanted = parse_version(spec)
        vs = self.versions.get(subject)
        if not vs:
            raise errors.subject_not_found(subject)
        if wanted is None:
            live = [n for n, v in vs.items() if permanent or not v.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            wanted = max(live)
        sv = vs.get(wanted)
        if sv is None:
            raise errors.version_not_found(wanted)
        if self.referenced_by(subject, wanted):
            raise errors.reference_exists(subject, wanted)
        if permanent:
            if not sv.deleted:
                raise errors.version_not_soft_deleted(subject, wanted)
            return [(records.schema_key(subject, wanted), None)], wanted
        if sv.deleted:
            raise errors.version_soft_deleted(subject, wanted)
        gone = SchemaValue(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type, sv.references, True)
        return [(records.schema_key(subject, wanted), gone.encode())], wanted

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[Records, list[int]]:
        """Delete a subject (soft, or permanent after soft); the versions deleted. 40401, 40404,
        40405, 42206."""
        self._writable(subject)
        vs = self.versions.get(subject)
        if not vs:
            raise errors.subject_not_found(subject)
        for n in vs:
            if self.referenced_by(subject, n):
                raise errors.reference_exists(subject, n)
        live = sorted(n for n, v in vs.items() if not v.deleted)
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            out: Records = [(records.schema_key(subject, n), None) for n in sorted(vs)]
            if subject in self.configs:
                out.append((records.config_key(subject), None))
            if subject in self.modes:
                out.append((records.mode_key(subject), None))
            return out, sorted(vs)
        if not live:
            raise errors.subject_soft_deleted(subject)
        return [(records.delete_subject_key(subject), records.delete_subject_value(subject, max(vs)))], live

    def plan_set_config(self, subject: str | None, level) -> tuple[Records, dict]:
        """PUT /config[/{subject}] ``{"compatibility": LEVEL}``; 42203."""
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise errors.invalid_compatibility_level()
        level = level.upper()
        return [(records.config_key(subject), records.config_value(level))], {"compatibility": level}

    def plan_delete_config(self, subject: str | None) -> tuple[Records, dict]:
        """DELETE /config[/{subject}]: back to the global level (or BACKWARD); the level removed.
        40401 / 40408 for a subject without one."""
        if subject is not None and subject not in self.configs:
            if not self.versions.get(subject):
                raise errors.subject_not_found(subject)
            raise errors.subject_config_not_found(subject)
        old = self.compatibility(subject)
        recs = [(records.config_key(subject), None)] if subject in self.configs else []
        return recs, {"compatibilityLevel": old}

    def plan_set_mode(self, subject: str | None, mode, force: bool) -> tuple[Records, dict]:
        """PUT /mode[/{subject}] ``{"mode": MODE}``; 42204; 42205 for IMPORT while schemas exist
        (unless ``force``)."""
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has = self.versions.get(subject) if subject is not None else self.versions
            if has:
                raise errors.not_permitted("Cannot import since found existing subjects")
        return [(records.mode_key(subject), records.mode_value(mode))], {"mode": mode}

    def plan_delete_mode(self, subject: str) -> tuple[Records, dict]:
        """DELETE /mode/{subject}; 40409 when it has none."""
        if subject not in self.modes:
            raise errors.subject_mode_not_found(subject)
        return [(records.mode_key(subject), None)], {"mode": self.modes[subject]}
