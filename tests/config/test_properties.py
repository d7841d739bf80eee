"""server.properties syntax: java.util.Properties.load semantics."""

from __future__ import annotations

import pytest

from kcompat.config import ConfigError, load_properties, parse_properties
from kcompat.config.properties import parse_override


def test_three_separators():
    props = parse_properties("a=1\nb: 2\nc 3\nd\t4\ne\f5\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}


def test_whitespace_around_separator_and_leading_whitespace():
    props = parse_properties("   key   =   value\n\t  other :x\n")
    assert props == {"key": "value", "other": "x"}


def test_trailing_whitespace_of_value_kept_like_java():
    assert parse_properties("k=v  \n")["k"] == "v  "


def test_separator_after_whitespace_is_consumed_once():
    # "key = = v": the first '=' after whitespace is the separator, the second is value text
    assert parse_properties("key = = v")["key"] == "= v"
    assert parse_properties("key  v = w")["key"] == "v = w"


def test_comments_and_blank_lines():
    text = "# comment\n! also comment\n   # indented comment\n\n   \nkey=v # not a comment\n"
    assert parse_properties(text) == {"key": "v # not a comment"}


def test_backslash_continuation_strips_leading_whitespace():
    text = "listeners=PLAINTEXT://:9092,\\\n           CONTROLLER://:9093\nnext=1\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "next": "1"}


def test_even_backslashes_do_not_continue():
    text = "path=c:\\\\\nnext=1\n"
    assert parse_properties(text) == {"path": "c:\\", "next": "1"}


def test_comment_line_does_not_continue():
    text = "# a comment ending with a backslash \\\nkey=v\n"
    assert parse_properties(text) == {"key": "v"}


def test_continuation_line_may_start_with_hash():
    assert parse_properties("k=a\\\n  #b\n") == {"k": "a#b"}


def test_continuation_ends_at_blank_line_and_eof():
    assert parse_properties("k=a\\\n\nj=b\\") == {"k": "a", "j": "b"}


def test_crlf_and_cr_line_endings():
    assert parse_properties("a=1\r\nb=2\rc=3") == {"a": "1", "b": "2", "c": "3"}


def test_escapes_in_keys_and_values():
    props = parse_properties("my\\ key\\=x = tab\\there\\u0041\\q\n")
    assert props == {"my key=x": "tab\there" + "A" + "q"}


def test_escaped_colon_in_key():
    assert parse_properties("a\\:b=c") == {"a:b": "c"}


def test_malformed_unicode_escape():
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("k=\\u12G4")


def test_duplicate_key_last_wins():
    assert parse_properties("k=1\nk=2\n") == {"k": "2"}


def test_empty_value_and_key_only():
    assert parse_properties("k=\nj\n") == {"k": "", "j": ""}


def test_load_file_utf8_and_bom(tmp_path):
    p = tmp_path / "s.properties"
    p.write_bytes(b"\xef\xbb\xbfbroker.rack=z\xc3\xbcrich\n")
    assert load_properties(p) == {"broker.rack": "zürich"}


def test_load_file_latin1_fallback(tmp_path):
    p = tmp_path / "s.properties"
    p.write_bytes(b"broker.rack=z\xfcrich\n")
    assert load_properties(p) == {"broker.rack": "zürich"}


def test_missing_file():
    with pytest.raises(ConfigError, match="Cannot read config file"):
        load_properties("/nonexistent/server.properties")


def test_parse_override():
    assert parse_override("a=b=c") == ("a", "b=c")
    assert parse_override("flag") == ("flag", "")
    with pytest.raises(ConfigError):
        parse_override("=x")
