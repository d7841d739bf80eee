"""A reader for Kafka's ``server.properties`` format: ``java.util.Properties.load`` semantics.

* A logical line is one natural line (ended by ``\\n``, ``\\r`` or ``\\r\\n``), or several joined by
  an odd number of backslashes at the end; leading whitespace (space, tab, form feed) of every
  natural line is dropped, so continuation lines can be indented.
* Blank lines and lines whose first non-blank character is ``#`` or ``!`` are comments (only at
  the start of a logical line; a comment does not continue onto the next line).
* The key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around the separator
  is skipped, so ``key=value``, ``key: value`` and ``key value`` are all ``key`` -> ``value``.
  Trailing whitespace of the value is kept, as Java does (typed parsing trims it later).
* Escapes in keys and values: ``\\t \\n \\r \\f``, ``\\uXXXX``, and ``\\x`` -> ``x`` for any other char.
* A later duplicate key replaces an earlier one.

Kafka reads the file as ISO-8859-1; kcompat decodes UTF-8 first (falling back to ISO-8859-1), so
non-ASCII values written by a UTF-8 editor come out as written.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ConfigError

_WS = " \t\f"
_NATURAL_LINES = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _odd_trailing_backslashes(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, logical line) pairs, comments and blank lines removed."""
    natural = _NATURAL_LINES.split(text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        lineno = i + 1
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _odd_trailing_backslashes(line):
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_WS)
            i += 1
        out.append((lineno, line))
    return out


def _unescape(s: str, where: str) -> str:
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:
            break  # a lone trailing backslash is dropped
        c = s[i]
        i += 1
        if c == "u":
            hexdigits = s[i:i + 4]
            if len(hexdigits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", hexdigits):
                raise ConfigError(None, f"Malformed \\uxxxx encoding at {where}")
            out.append(chr(int(hexdigits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    key_end = len(line)
    value_start = len(line)
    has_sep = False
    backslash = False
    for idx, c in enumerate(line):
        if c in "=:" and not backslash:
            key_end, value_start, has_sep = idx, idx + 1, True
            break
        if c in _WS and not backslash:
            key_end, value_start = idx, idx + 1
            break
        backslash = (not backslash) if c == "\\" else False
    while value_start < len(line):
        c = line[value_start]
        if c not in _WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse properties text into an insertion-ordered ``{key: value}`` dict.

    Raises :class:`ConfigError` only for a malformed ``\\uXXXX`` escape.
    """
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        where = f"{source}:{lineno}"
        key = _unescape(raw_key, where)
        props.pop(key, None)  # a redefinition moves to the end, like a fresh put
        props[key] = _unescape(raw_value, where)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read and parse a properties file; ``ConfigError`` if it cannot be read."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ConfigError(None, f"Cannot read config file {p}: {e.strerror or e}") from e
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, str(p))


def parse_override(arg: str) -> tuple[str, str]:
    """``key=value`` from ``--override`` (Kafka's ``parseKeyValueArgs``: split at the first ``=``;
    a bare ``key`` means an empty value)."""
    key, sep, value = arg.partition("=")
    key = key.strip()
    if not key:
        raise ConfigError(None, f"Invalid --override {arg!r}: expected key=value")
    return key, value if sep else ""
