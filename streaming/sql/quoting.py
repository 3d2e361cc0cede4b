"""The one way identifiers and values reach Spark SQL text.

Every table path, column name and value that comes from upstream (or from settings) and
ends up in a ``spark.sql`` statement or an ``F.expr`` expression is written by a function
of this module; nothing else builds backticks or quotes. Upstream may name a column
``a`b'c;--`` and store ``O'Brien \\ 😀`` in it.

How Spark 4.2's parser reads what we write (checked against a real session, see
tests/integration/test_quoting.py):

- **Identifiers** are backtick-quoted, a backtick inside doubled (``a``b``). Quoting every
  part also keeps reserved words and dots inside a name (``a.b`` is one column).
- **String literals**: with ``spark.sql.parser.escapedStringLiterals=false`` (the default)
  ``\\'``, ``''`` and ``\\\\`` are escapes; with ``true`` the text between the quotes is
  taken as it is and a quote cannot be written at all. A value free of quotes and
  backslashes reads the same under both, so it is written as ``'...'``; any other value
  is written as its UTF-8 bytes, ``CAST(X'...' AS STRING)``, which no setting reinterprets.
- **Variable substitution** (``spark.sql.variable.substitute``, on by default) rewrites
  ``${name}`` anywhere in the SQL text *before* parsing, inside quotes and backticks too:
  a column called ``${spark.app.name}`` would silently become another name. Values with
  ``${`` take the byte form above; identifiers cannot, so the job's session turns the
  substitution off (:data:`SESSION_CONF`) and :func:`check_session` refuses a session
  that has it on.

This module imports no Spark: it only writes text, and its unit tests need no JVM.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal

from shardmerge.errors import ShardMergeError

__all__ = [
    "SESSION_CONF",
    "QuotingError",
    "check_session",
    "ident",
    "literal",
    "map_get",
    "path",
    "string",
    "table_at",
]

# Settings the job's SparkSession must have for the text written here to mean what it says.
SESSION_CONF = {"spark.sql.variable.substitute": "false"}


class QuotingError(ShardMergeError):
    """A value or a session setting that this module cannot write safely."""


def check_session(conf_get: Callable[[str], str | None]) -> None:
    """Refuse a session whose settings would change the SQL text written here
    (``conf_get``: e.g. ``spark.conf.get``)."""
    for key, wanted in SESSION_CONF.items():
        have = conf_get(key)
        if (have or "").strip().lower() != wanted:
            raise QuotingError(
                f"Spark setting {key} is {have!r}; shardmerge needs {wanted!r} (with "
                "substitution on, a column or value containing ${...} would be rewritten "
                "before parsing). Remove it from the Spark configuration."
            )


def ident(name: str) -> str:
    """One identifier (a column, a field, a view), backtick-quoted."""
    if not isinstance(name, str):
        raise QuotingError(f"an identifier must be text, got {name!r}")
    return "`" + name.replace("`", "``") + "`"


def path(*parts: str) -> str:
    """A multi-part name (``db.table``) or a column path (``struct.field``), each part
    quoted on its own; also what ``F.col`` takes for a name with dots or backticks."""
    if not parts:
        raise QuotingError("a name needs at least one part")
    return ".".join(ident(p) for p in parts)


def table_at(location: str, fmt: str = "delta") -> str:
    """The table stored at a path or URI (``delta.`s3a://bucket/x```)."""
    return f"{fmt}.{ident(location)}"


def string(value: str) -> str:
    """A STRING literal of ``value`` that reads back as exactly ``value``."""
    if not isinstance(value, str):
        raise QuotingError(f"a string literal needs text, got {value!r}")
    if "'" in value or "\\" in value or "${" in value:
        # The one form that neither escapedStringLiterals nor substitution reinterprets.
        return f"CAST(X'{value.encode('utf-8').hex().upper()}' AS STRING)"
    return f"'{value}'"


def map_get(map_expr: str, key: str) -> str:
    """``map_expr[key]`` for a string key."""
    return f"{map_expr}[{string(key)}]"


def literal(value: object, sql_type: str | None = None) -> str:
    """A typed literal of a Python value; ``sql_type`` (a Spark type, e.g.
    ``DECIMAL(5,2)``, ``TIMESTAMP_NTZ``) makes its type explicit, and is needed for NULL
    to have one.

    ``None`` -> ``CAST(NULL AS t)``; ``bool`` -> ``true``/``false``; ``int`` -> digits
    (``L``-suffixed beyond INT); ``float`` -> a DOUBLE (NaN and infinities included);
    ``Decimal`` -> exact; ``str`` -> :func:`string`; ``bytes`` -> ``X'..'``;
    ``date``/``datetime`` -> ``DATE'..'``, ``TIMESTAMP'..'`` (aware) or
    ``TIMESTAMP_NTZ'..'`` (naive)."""
    text = _untyped(value)
    if sql_type is None:
        if value is None:
            raise QuotingError("a NULL literal needs its type")
        return text
    return f"CAST({text} AS {_type(sql_type)})"


def _untyped(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(2**31) <= value < 2**31 else f"{value}L"
    if isinstance(value, float):
        if math.isfinite(value):
            return f"{value!r}D"
        name = "NaN" if math.isnan(value) else ("-" if value < 0 else "") + "Infinity"
        return f"CAST('{name}' AS DOUBLE)"
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise QuotingError(f"no DECIMAL literal for {value}")
        return f"{format(value, 'f')}BD"
    if isinstance(value, str):
        return string(value)
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex().upper()}'"
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return f"TIMESTAMP_NTZ'{value.isoformat(sep=' ')}'"
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    raise QuotingError(f"no Spark SQL literal for {type(value).__name__} {value!r}")


def _type(sql_type: str) -> str:
    """A type name from our own mapping; refuse anything that could end the expression."""
    if not sql_type or any(ch in sql_type for ch in "'`;\\\"") or "--" in sql_type:
        raise QuotingError(f"not a Spark SQL type: {sql_type!r}")
    return sql_type
