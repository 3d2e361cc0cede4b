"""The SQL text the job builds: identifiers, string literals and source positions.

Every identifier and literal from upstream that the batch protocol puts into Spark SQL
goes through here (backticks doubled; quotes and backslashes escaped as Spark's parser
reads them), so that any name and any value is safe.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ident", "okey_literal", "string"]


def ident(name: str) -> str:
    """A Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def string(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def okey_literal(position: list[Any]) -> str:
    """A source position as an ``_okey`` struct literal (see ``streaming.control``)."""
    f, p, r, t, o = position
    return (
        f"named_struct('f', {string(str(f))}, 'p', {int(p)}L, 'r', {int(r)}, "
        f"'t', {int(t)}L, 'o', {int(o)}L)"
    )
