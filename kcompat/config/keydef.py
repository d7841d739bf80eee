"""One config definition (Kafka's ``ConfigDef.ConfigKey`` plus its dynamic update mode)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .types import NO_DEFAULT, ConfigType, UpdateMode, format_value, parse_value

BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT, ConfigType.LONG,
    ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD,
)
RO, PB, CW = UpdateMode.READ_ONLY, UpdateMode.PER_BROKER, UpdateMode.CLUSTER_WIDE

Validator = Callable[[str, Any], None]


@dataclass(frozen=True)
class ConfigKey:
    """A broker (or topic) config definition.

    Attributes:
        name: Kafka's config name.
        type: :class:`ConfigType` (DescribeConfigs numbering).
        default: the typed default (``None`` = Kafka's null default; ``NO_DEFAULT`` = required).
            Lists are tuples here and come back from :meth:`parse` as lists.
        validator: extra check on the typed value, or ``None``.
        doc: a short description with units.
        update_mode: how it may be changed at runtime (Kafka docs "Update Mode").
        implemented: kcompat acts on it; ``False`` = accepted for compatibility with no effect.
        internal: defined but undocumented in Kafka (``defineInternal``); hidden from describe
            unless set explicitly.
    """

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None
    doc: str
    update_mode: UpdateMode = RO
    implemented: bool = False
    internal: bool = False

    @property
    def sensitive(self) -> bool:
        """PASSWORD configs are never shown (DescribeConfigs value null, ``is_sensitive``)."""
        return self.type is ConfigType.PASSWORD

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    @property
    def default_str(self) -> str | None:
        """The default as Kafka's documentation / DescribeConfigs DEFAULT_CONFIG shows it."""
        if not self.has_default:
            return None
        return format_value(self.type, self.default)

    @property
    def valid_values(self) -> str:
        """The "Valid Values" column of Kafka's docs ("" when unconstrained)."""
        return "" if self.validator is None else str(self.validator)

    def parse(self, raw: Any) -> Any:
        """Parse ``raw`` to the typed value and validate it; raise ``ConfigError`` naming the key."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value

    def typed_default(self) -> Any:
        """The default as a fresh typed value (lists copied), ``None`` if none."""
        if not self.has_default or self.default is None:
            return None
        if self.type is ConfigType.LIST:
            return list(self.default)
        return self.default


def define(name: str, ctype: ConfigType, default: Any, validator: Validator | None, mode: UpdateMode,
           implemented: bool, doc: str, *, internal: bool = False) -> ConfigKey:
    """Build a :class:`ConfigKey`; LIST defaults given as "a,b" strings are split."""
    if ctype is ConfigType.LIST and isinstance(default, str):
        default = tuple(parse_value(name, ctype, default))
    elif ctype is ConfigType.LIST and isinstance(default, list):
        default = tuple(default)
    return ConfigKey(name, ctype, default, validator, doc, mode, implemented, internal)
