"""Upstream text shown to a person: control characters escaped, everything else kept."""

from __future__ import annotations

import io
import logging

import pytest

from shardmerge.printable import PrintableFormatter, printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ALTER TABLE t ADD c INT COMMENT 'plain'", "ALTER TABLE t ADD c INT COMMENT 'plain'"),
        ("a\x1b[2J\x1b[Hb", "a\\x1b[2J\\x1b[Hb"),  # clear screen, cursor home
        ("one\nforged log line", "one\\nforged log line"),
        ("tab\there\r", "tab\\there\\r"),
        ("nul\x00 del\x7f c1\x9b", "nul\\x00 del\\x7f c1\\x9b"),
        ("rtl \u202eevil\u202c", "rtl \\u202eevil\\u202c"),  # bidi override (Trojan Source)
        ("isolate \u2066x\u2069 sep\u2028", "isolate \\u2066x\\u2069 sep\\u2028"),
        ("订单 Ünïcode é 🙂 a`b'c;--", "订单 Ünïcode é 🙂 a`b'c;--"),
    ],
)
def test_printable_escapes_only_what_changes_the_display(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_a_log_record_quoting_upstream_text_stays_one_line() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(PrintableFormatter("%(name)s %(message)s"))
    log = logging.getLogger("shardmerge.test_printable")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("DDL %s refused", "ALTER TABLE t\n2026 shardmerge.batch forged\x1b[31m")
    finally:
        log.removeHandler(handler)
    assert out.getvalue() == (
        "shardmerge.test_printable DDL ALTER TABLE t\\n2026 shardmerge.batch forged\\x1b[31m "
        "refused\n"
    )
