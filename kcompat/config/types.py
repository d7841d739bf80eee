"""Config value types, validators and Kafka's string forms of values.

Mirrors ``org.apache.kafka.common.config.ConfigDef`` closely enough that a value accepted or
rejected by Kafka 3.9 is accepted or rejected here with the same message:

* :class:`ConfigType` numbers are the DescribeConfigs ``ConfigType`` field (KIP-569): 1 BOOLEAN,
  2 STRING, 3 INT, 4 SHORT, 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD (0 UNKNOWN).
* :func:`parse_value` follows ``ConfigDef.parseType`` (trim, Java integer ranges, ``true``/``false``
  case-insensitively, lists split on commas with surrounding whitespace removed).
* :func:`format_value` follows ``ConfigDef.convertToString`` (lists joined by ``,``, doubles as
  Java's ``Double.toString``), which is how DescribeConfigs shows values.
* Validators follow ``ConfigDef.Range``, ``ValidString``, ``ValidList`` and print the "Valid
  Values" column of Kafka's documentation.
"""

from __future__ import annotations

import enum
import re
from decimal import Decimal
from typing import Any, Callable, Iterable, Sequence

from .errors import ConfigError, invalid_value

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java Double.MAX_VALUE


class ConfigType(enum.IntEnum):
    """``ConfigDef.Type``, numbered as DescribeConfigs reports it (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class UpdateMode(str, enum.Enum):
    """The "Update Mode" column of Kafka's broker config documentation (KIP-226)."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class ConfigSource(enum.IntEnum):
    """``DescribeConfigsResponse.ConfigSource`` as sent on the wire (DescribeConfigs v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8
    TOPIC_CONFIG = 1  # Kafka's server-side name for DYNAMIC_TOPIC_CONFIG


_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DOUBLE_RE = re.compile(
    r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?))[fFdD]?", re.ASCII
)
_LIST_SPLIT_RE = re.compile(r"\s*,\s*")
_JAVA_WS = "".join(chr(i) for i in range(0x21))  # String.trim() removes every char <= U+0020


def java_trim(s: str) -> str:
    """``String.trim()``: strips every char <= U+0020 from both ends."""
    return s.strip(_JAVA_WS)


def _parse_int(name: str, raw: str, lo: int, hi: int, type_name: str) -> int:
    t = java_trim(raw)
    if not _INT_RE.fullmatch(t):
        raise invalid_value(name, raw, f"Not a number of type {type_name}")
    v = int(t)
    if not lo <= v <= hi:
        raise invalid_value(name, raw, f"Not a number of type {type_name}")
    return v


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """Parse ``raw`` (a string from a properties file or request) into the typed Python value.

    BOOLEAN -> bool, STRING/CLASS/PASSWORD -> str, INT/SHORT/LONG -> int (range-checked as Java),
    DOUBLE -> float, LIST -> list[str]. ``None`` stays ``None`` (Kafka's null). Raises
    :class:`ConfigError` naming ``name`` on a malformed value.
    """
    if raw is None:
        return None
    if not isinstance(raw, str):  # already typed (defaults); normalise lists
        if ctype is ConfigType.LIST and not isinstance(raw, list):
            return list(raw)
        return raw
    if ctype is ConfigType.BOOLEAN:
        t = java_trim(raw).lower()
        if t == "true":
            return True
        if t == "false":
            return False
        raise invalid_value(name, raw, "Expected value to be either true or false")
    if ctype in (ConfigType.STRING, ConfigType.CLASS):
        return java_trim(raw)
    if ctype is ConfigType.PASSWORD:
        return raw
    if ctype is ConfigType.INT:
        return _parse_int(name, raw, INT_MIN, INT_MAX, "INT")
    if ctype is ConfigType.SHORT:
        return _parse_int(name, raw, SHORT_MIN, SHORT_MAX, "SHORT")
    if ctype is ConfigType.LONG:
        return _parse_int(name, raw, LONG_MIN, LONG_MAX, "LONG")
    if ctype is ConfigType.DOUBLE:
        t = java_trim(raw)
        if not _DOUBLE_RE.fullmatch(t):
            raise invalid_value(name, raw, "Not a number of type DOUBLE")
        t = t.rstrip("fFdD")
        return float(t.replace("Infinity", "inf"))
    if ctype is ConfigType.LIST:
        t = java_trim(raw)
        if not t:
            return []
        return _LIST_SPLIT_RE.split(t)
    raise ConfigError(name, f"Unknown type {ctype!r} for configuration {name}")


def java_double_str(x: float) -> str:
    """Java's ``Double.toString``: ``0.5``, ``1.0E7``, ``1.7976931348623157E308``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    sign = "-" if str(x).startswith("-") else ""
    a = abs(x)
    if a == 0:
        return sign + "0.0"
    _, digits, exp = Decimal(repr(a)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    sci_exp = len(digits) + exp - 1  # exponent of the first significant digit
    if 1e-3 <= a < 1e7:
        point = sci_exp + 1  # digits before the decimal point
        if point <= 0:
            return f"{sign}0.{'0' * -point}{ds}"
        if point >= len(ds):
            return f"{sign}{ds}{'0' * (point - len(ds))}.0"
        return f"{sign}{ds[:point]}.{ds[point:]}"
    mant = ds[0] + "." + (ds[1:] or "0")
    return f"{sign}{mant}E{sci_exp}"


def format_value(ctype: ConfigType, value: Any) -> str | None:
    """``ConfigDef.convertToString``: the string Kafka shows for a typed value (``None`` -> None)."""
    if value is None:
        return None
    if isinstance(value, bool) or ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        if isinstance(value, str):
            return value
        return ",".join(str(v) for v in value)
    if ctype is ConfigType.DOUBLE:
        return java_double_str(float(value))
    return str(value)


# --------------------------------------------------------------------------------------------
# Validators. Each is callable (name, typed value) -> None and raises ConfigError; str() gives the
# "Valid Values" text of Kafka's documentation.
# --------------------------------------------------------------------------------------------


def _num_str(v: float | int) -> str:
    return java_double_str(v) if isinstance(v, float) else str(v)


class Range:
    """``ConfigDef.Range``: ``at_least(min)`` or ``between(min, max)``; ``None`` passes."""

    def __init__(self, lo: float | int | None = None, hi: float | int | None = None) -> None:
        self.lo, self.hi = lo, hi

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.lo is not None and value < self.lo:
            raise invalid_value(name, _fmt_any(value), f"Value must be at least {_num_str(self.lo)}")
        if self.hi is not None and value > self.hi:
            raise invalid_value(name, _fmt_any(value), f"Value must be no more than {_num_str(self.hi)}")

    def __str__(self) -> str:
        if self.lo is None:
            return f"[...,{self.hi}]"
        if self.hi is None:
            return f"[{self.lo},...]"
        return f"[{self.lo},...,{self.hi}]"


def at_least(lo: float | int) -> Range:
    return Range(lo, None)


def between(lo: float | int, hi: float | int) -> Range:
    return Range(lo, hi)


class ValidString:
    """``ConfigDef.ValidString.in`` (case-sensitive) or ``CaseInsensitiveValidString.in``."""

    def __init__(self, values: Sequence[str], case_insensitive: bool = False) -> None:
        self.values = list(values)
        self.case_insensitive = case_insensitive

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.case_insensitive:
            ok = value.upper() in {v.upper() for v in self.values}
        else:
            ok = value in self.values
        if not ok:
            raise invalid_value(name, value, "String must be one of: " + ", ".join(self.values))

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


class ValidList:
    """``ConfigDef.ValidList.in``: every element must be one of ``values`` (empty list passes)."""

    def __init__(self, values: Sequence[str]) -> None:
        self.values = list(values)
        self._elem = ValidString(values)

    def __call__(self, name: str, value: Any) -> None:
        for elem in value or ():
            self._elem(name, elem)

    def __str__(self) -> str:
        return str(self._elem)


class Custom:
    """A named validator: ``check(name, value)`` raises :class:`ConfigError`; ``text`` is its doc."""

    def __init__(self, check: Callable[[str, Any], None], text: str) -> None:
        self.check, self.text = check, text

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            self.check(name, value)

    def __str__(self) -> str:
        return self.text


def one_of_or_range(allowed: Iterable[int], rng: Range) -> Custom:
    """E.g. ``compression.gzip.level``: ``[1,...,9] or -1``."""
    extra = list(allowed)

    def check(name: str, value: Any) -> None:
        if value in extra:
            return
        rng(name, value)

    return Custom(check, f"{rng} or {', '.join(map(str, extra))}")


def _fmt_any(value: Any) -> str:
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


class NoDefault:
    """Marker for a config with no default at all (Kafka's ``NO_DEFAULT_VALUE``)."""

    def __repr__(self) -> str:  # pragma: no cover - cosmetic
        return "NO_DEFAULT"


NO_DEFAULT = NoDefault()
