"""A parser for the JAAS configuration strings of ``sasl.jaas.config`` (Kafka's ``JaasConfig``).

Kafka accepts one or more login module entries, each
``<login module class> <flag> [<option>=<value>]... ;`` where the flag is ``required``,
``requisite``, ``sufficient`` or ``optional`` and a value is a bare word or a double-quoted
string (``\\"`` and ``\\\\`` escape inside quotes, as Java's ``StreamTokenizer`` reads them).
Examples::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="pw";

``parse_jaas_config`` returns the entries; ``plain_users`` reads the ``user_<name>="<password>"``
options of ``PlainLoginModule`` (Kafka's ``PlainServerCallbackHandler``). Errors are ValueError
with a message that never repeats option values (they are secrets).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:(?P<q>"(?:[^"\\]|\\.)*")|(?P<eq>=)|(?P<semi>;)|(?P<word>[^\s=;"]+))', re.S)


@dataclass
class JaasEntry:
    """One login module entry: class name, control flag, ``{option: value}``."""

    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str):
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                return
            raise ValueError(f"unexpected character at position {pos} in a JAAS configuration")
        pos = m.end()
        if m.group("q") is not None:
            yield "str", re.sub(r"\\(.)", r"\1", m.group("q")[1:-1])
        elif m.group("eq"):
            yield "=", "="
        elif m.group("semi"):
            yield ";", ";"
        elif m.group("word") is not None:
            yield "word", m.group("word")
        else:   # only whitespace was left
            return


def parse_jaas_config(text: str | None) -> list[JaasEntry]:
    """Parse a ``sasl.jaas.config`` value into its entries (an empty list for None or blank).

    Raises ValueError for a malformed value: a missing flag, an option without ``=value``, an
    entry without its closing ``;`` (Kafka: "JAAS config entry not terminated by semi-colon")."""
    if text is None or not text.strip():
        return []
    toks = list(_tokens(text))
    entries: list[JaasEntry] = []
    i = 0
    while i < len(toks):
        kind, value = toks[i]
        if kind != "word":
            raise ValueError("a JAAS configuration entry must start with a login module class name")
        if i + 1 >= len(toks) or toks[i + 1][0] != "word" or toks[i + 1][1].lower() not in FLAGS:
            raise ValueError(f"login module control flag not specified in the JAAS configuration of {value}")
        entry = JaasEntry(value, toks[i + 1][1].lower())
        i += 2
        while i < len(toks) and toks[i][0] != ";":
            if toks[i][0] not in ("word", "str") or i + 2 >= len(toks) or toks[i + 1][0] != "=" \
                    or toks[i + 2][0] not in ("word", "str"):
                raise ValueError(f"malformed option in the JAAS configuration of {entry.module}")
            entry.options[toks[i][1]] = toks[i + 2][1]
            i += 3
        if i >= len(toks):
            raise ValueError("JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(entry)
    return entries


def first_entry(text: str | None) -> JaasEntry | None:
    """The first login module entry of a JAAS configuration, or None when there is none."""
    entries = parse_jaas_config(text)
    return entries[0] if entries else None


def plain_users(entry: JaasEntry | None) -> dict[str, str]:
    """``{user: password}`` from the ``user_<name>="<password>"`` options of a PlainLoginModule
    entry (Kafka's ``PlainServerCallbackHandler``); empty for None or another module."""
    if entry is None:
        return {}
    return {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")}
