"""Texts the KIP-848 consumer group coordinator produces as Kafka 4.3.1 does: member ids that the
coordinator makes up, and the description of a bad ``SubscribedTopicRegex``.

Kafka checks regexes with RE2J (com.google.re2j 1.8, a port of Go's regexp/syntax) and answers
``SubscribedTopicRegex `<regex>` is not a valid regular expression: <description>.`` with
``PatternSyntaxException.getDescription()``; kcompat parses with RE2 (the ``re2`` module), whose
error text is ``<code text>[: <culprit>]`` with RE2's own wording for the same errors."""

from __future__ import annotations

import base64
import uuid

# RE2 (re2/regexp.cc kErrorStrings) code text -> RE2J (Parser.ERR_*) description.
_RE2J_DESCRIPTIONS = {
    "missing )": "missing closing )",
    "unexpected )": "regexp/syntax: internal error",   # RE2J's parseRightParen: ERR_INTERNAL_ERROR
    "missing ]": "missing closing ]",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


def regex_error_description(error: BaseException) -> str:
    """RE2J's description of the syntax error that ``re2.compile`` raised as ``error`` (the text
    before RE2's ``: culprit``; wordings RE2J shares, e.g. "invalid escape sequence", pass as is)."""
    arg = error.args[0] if error.args else ""
    text = arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
    code, _, culprit = text.partition(": ")
    if code == "invalid perl operator" and culprit.startswith("(?<"):
        return "invalid named capture"     # RE2J reads (?< as the start of a named group
    return _RE2J_DESCRIPTIONS.get(code, code)


def new_member_id() -> str:
    """A member id as Kafka's ``Uuid.randomUuid().toString()``: 22 characters of url-safe base64
    without padding, never starting with ``-`` (Uuid.randomUuid draws again then)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text
