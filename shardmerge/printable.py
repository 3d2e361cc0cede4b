"""Text from upstream shown to a person, made safe for a terminal and a log line.

Names, statements, column COMMENTs and the messages that quote them come from the
upstream databases: an escape sequence in a COMMENT could rewrite what ``shardmerge locks``
prints, a newline could forge a log line, a bidirectional override could make a statement
read differently from what it is. :func:`printable` escapes every control character (C0,
DEL, C1), the line and paragraph separators and the bidirectional controls as ``\\n``,
``\\r``, ``\\t``, ``\\xNN`` or ``\\uNNNN``; everything else, other scripts included,
is kept. Machine-readable output (``--json``) is JSON, which escapes control characters
itself.
"""

from __future__ import annotations

import logging
import re

__all__ = ["PrintableFormatter", "printable", "setup_logging"]

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    char = m.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``str(text)`` with every character that could change how it is displayed escaped."""
    return _UNSAFE.sub(_escape, str(text))


class PrintableFormatter(logging.Formatter):
    """A formatter whose message part is :func:`printable`: one record, one line (the
    traceback of an exception, our own text, follows as usual). Its default format is the
    job's: time, logger name, message."""

    def __init__(self, fmt: str = "%(asctime)s %(name)s %(message)s") -> None:
        super().__init__(fmt)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)


def setup_logging(level: int = logging.INFO) -> None:
    """The job's and the CLI's logging: time, logger name, message; upstream text escaped.
    Like ``logging.basicConfig``, it leaves a root logger that has handlers alone (called
    twice, or where the host process configured logging)."""
    handler = logging.StreamHandler()
    handler.setFormatter(PrintableFormatter())
    logging.basicConfig(level=level, handlers=[handler])
