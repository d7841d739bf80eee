"""The principal of a TLS client certificate: its subject DN as Java prints it, mapped by
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``, KIP-371).

Kafka's ``DefaultKafkaPrincipalBuilder`` gives a connection on an SSL listener the principal
``User:<name>`` where ``<name>`` is the client certificate's subject distinguished name in
RFC 2253 form (Java's ``X500Principal.getName()``: ``CN=alice,OU=eng,O=Acme,C=US``, most specific
RDN first) passed through the mapping rules; no client certificate is ``User:ANONYMOUS``.

Rules (comma-separated, tried in order, the first that matches wins):

* ``DEFAULT``: the DN unchanged.
* ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` after the last slash (lower- or
  upper-case the result): applies when the Java regex ``pattern`` matches the *whole* DN; the
  result is ``DN.replaceAll(pattern, replacement)`` with Java's ``$1`` group references.

No rule matching is :class:`NoMatchingRule` (Kafka fails the authentication and closes).

:func:`subject_dn` reads the subject from the DER certificate (``SSLObject.getpeercert(True)``)
with a minimal DER walk (no crypto here): known attribute types get Java's keywords (CN, C, L, ST,
O, OU, STREET, DC, UID), others the dotted OID and ``#`` + the hex of the value's DER encoding,
exactly as ``X500Principal.getName()`` writes them.
"""

from __future__ import annotations

import ipaddress
import re

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")

DEFAULT_RULES = "DEFAULT"


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a DN."""


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str | None = None, lower: bool = False,
                 upper: bool = False) -> None:
        self.is_default = pattern is None
        self.source = pattern
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.replacement = replacement
        self.lower, self.upper = lower, upper

    def apply(self, dn: str) -> str | None:
        if self.is_default:
            return dn
        assert self.pattern is not None and self.replacement is not None
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        replacement = _escape_literal_back_references(self.replacement, groups)
        result = self.pattern.sub(lambda m: _java_replacement(replacement, m), dn)
        if self.lower:
            result = result.lower()
        elif self.upper:
            result = result.upper()
        return result

    def __repr__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        suffix = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.source}/{self.replacement}{suffix}"


def _escape_literal_back_references(value: str, groups: int) -> str:
    """Kafka's ``escapeLiteralBackReferences``: ``$n`` naming a group the pattern lacks (after
    dropping trailing digits down to one) becomes the literal text ``$n``."""
    if groups == 0:
        return value
    pos = 0
    while True:
        m = _BACK_REFERENCE.search(value, pos)
        if m is None:
            return value
        pos = m.end()
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            value = value[:m.start()] + "\\" + value[m.start():]
            pos += 1


def _java_replacement(replacement: str, m: re.Match) -> str:
    """Java's ``Matcher.appendReplacement`` syntax: ``\\x`` is ``x``, ``$n`` a group (extra
    digits taken while the number stays a group), ``${name}`` a named group."""
    out: list[str] = []
    i, n = 0, len(replacement)
    groups = m.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{":
            end = replacement.index("}", i)
            out.append(m.group(replacement[i + 2:end]) or "")
            i = end + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            index = int(replacement[i + 1])
            i += 2
            while i < n and replacement[i].isdigit() and index * 10 + int(replacement[i]) <= groups:
                index = index * 10 + int(replacement[i])
                i += 1
            if index > groups:
                raise ValueError(f"No group {index}")
            out.append(m.group(index) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """``SslPrincipalMapper(rules)``: ``get_name(dn) -> str``. ``ValueError`` (Kafka's
    ``IllegalArgumentException``) for an invalid rule, e.g. ``Invalid rule: `RULE:^CN=(.*)$/$1/X``."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        self.rules = [r for r in (self._parse(s) for s in self._split(rules)) if r is not None]

    @staticmethod
    def _split(rules: str | None) -> list[str]:
        text = (rules if rules is not None else DEFAULT_RULES).strip()
        out, pos = [], 0
        while pos <= len(text):
            m = _RULE_SPLITTER.search(text, pos)
            if m is None:
                break
            out.append(m.group(1))
            pos = m.end() if m.end() > pos else pos + 1   # Java's find() steps past an empty match
        return out

    @staticmethod
    def _parse(rule: str) -> _Rule | None:
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise ValueError(f"Invalid rule: {rule}")
        if m.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`")
        if m.group(1) is not None:
            return _Rule()
        if m.group(2) is not None:
            return _Rule(m.group(2), m.group(4), m.group(6) == "L", m.group(6) == "U")
        return None   # empty rules are ignored

    def get_name(self, dn: str) -> str:
        """The principal name for ``dn``; :class:`NoMatchingRule` when no rule applies."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = {self.rules})"


# ---------------------------------------------------------------------------- the subject DN

_KEYWORDS = {  # X500Principal.getName() (RFC 2253) keywords, by OID
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
_STRING_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1E: "utf-16-be", 0x1C: "utf-32-be"}


def _tlv(der: bytes, off: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at ``off``; ValueError if cut."""
    if off + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[off], der[off + 1]
    off += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or off + count > len(der):
            raise ValueError("bad DER length")
        length = int.from_bytes(der[off:off + count], "big")
        off += count
    if off + length > len(der):
        raise ValueError("truncated DER")
    return tag, off, off + length


def _oid(body: bytes) -> str:
    parts, value = [], 0
    for b in body:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    first = min(parts[0] // 40, 2)
    return ".".join(str(x) for x in [first, parts[0] - 40 * first, *parts[1:]])


def _escape(value: str) -> str:
    """RFC 2253 escaping as Java's ``AVA.toRFC2253String``."""
    out = []
    for i, ch in enumerate(value):
        if ch in ',=+<>#;"\\' and not (ch == "#" and i > 0):
            out.append("\\" + ch)
        elif ch == " " and (i == 0 or i == len(value) - 1):
            out.append("\\ ")
        else:
            out.append(ch)
    return "".join(out)


def _subject_offset(der_cert: bytes) -> tuple[int, int]:
    """(offset of the subject Name, end of the TBSCertificate)."""
    _, off, _end = _tlv(der_cert, 0)                 # Certificate
    _, off, tbs_end = _tlv(der_cert, off)            # TBSCertificate
    tag, start, end = _tlv(der_cert, off)
    if tag == 0xA0:                                  # [0] version
        off = end
    for _ in range(4):                               # serial, signature, issuer, validity
        _, _start, off = _tlv(der_cert, off)
    return off, tbs_end


def subject_alt_names(der_cert: bytes) -> frozenset[str]:
    """The certificate's subject alternative names: ``DNS:host``, ``IP:1.2.3.4`` (IPv4 and IPv6),
    other kinds as ``<context tag>:<hex>``; empty without the extension. ValueError if malformed."""
    off, tbs_end = _subject_offset(der_cert)
    _, _start, off = _tlv(der_cert, off)             # subject
    _, _start, off = _tlv(der_cert, off)             # subjectPublicKeyInfo
    while off < tbs_end:
        tag, start, end = _tlv(der_cert, off)
        off = end
        if tag != 0xA3:                              # [1] issuerUniqueID, [2] subjectUniqueID
            continue
        _, pos, exts_end = _tlv(der_cert, start)     # Extensions
        while pos < exts_end:
            _, ext_pos, ext_end = _tlv(der_cert, pos)
            pos = ext_end
            _, oid_start, oid_end = _tlv(der_cert, ext_pos)
            if _oid(der_cert[oid_start:oid_end]) != "2.5.29.17":
                continue
            vtag, vstart, vend = _tlv(der_cert, oid_end)
            if vtag == 0x01:                         # critical BOOLEAN
                vtag, vstart, vend = _tlv(der_cert, vend)
            _, gpos, gend = _tlv(der_cert, vstart)   # GeneralNames
            names = set()
            while gpos < gend:
                gtag, gstart, g_end = _tlv(der_cert, gpos)
                gpos = g_end
                value = der_cert[gstart:g_end]
                if gtag == 0x82:
                    names.add("DNS:" + value.decode("ascii", "replace"))
                elif gtag == 0x87 and len(value) in (4, 16):
                    names.add("IP:" + str(ipaddress.ip_address(value)))
                else:
                    names.add(f"{gtag & 0x1F}:{value.hex()}")
            return frozenset(names)
    return frozenset()


def subject_dn(der_cert: bytes) -> str:
    """The subject of a DER X.509 certificate as Java's ``X500Principal.getName()`` (RFC 2253):
    RDNs last-to-first joined with ``,``, multi-valued RDNs with ``+``. ValueError if malformed."""
    off, _tbs_end = _subject_offset(der_cert)
    _, pos, name_end = _tlv(der_cert, off)           # subject Name
    rdns: list[str] = []
    while pos < name_end:
        _, set_pos, set_end = _tlv(der_cert, pos)
        pos = set_end
        avas = []
        while set_pos < set_end:
            _, ava_pos, ava_end = _tlv(der_cert, set_pos)
            set_pos = ava_end
            _, oid_start, oid_end = _tlv(der_cert, ava_pos)
            oid = _oid(der_cert[oid_start:oid_end])
            vtag, vstart, vend = _tlv(der_cert, oid_end)
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and vtag in _STRING_TAGS:
                avas.append(f"{keyword}={_escape(der_cert[vstart:vend].decode(_STRING_TAGS[vtag], 'replace'))}")
            else:
                avas.append(f"{keyword or oid}=#{der_cert[oid_end:vend].hex()}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))
