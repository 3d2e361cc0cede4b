"""Internal: small builders of Spark SQL expression text shared by the format decoders.

Everything here returns SQL *text* that Spark parses once per query, so the decoding runs
as Catalyst expressions in the JVM (whole-stage codegen), never as Python per row.
Spark 4 runs in ANSI mode: an out-of-range ``arr[i]`` or a failing ``CAST`` raises and
would fail the whole micro-batch, so only ``try_element_at``/``try_cast``/``try_*``
arithmetic are used on data.
"""

from __future__ import annotations

from collections.abc import Sequence

# String literals are written by the one quoting module; decoders import it from here.
from streaming.sql.quoting import string as lit

__all__ = [
    "EVENT_TYPE",
    "Stage",
    "case",
    "diagnose_json",
    "event",
    "first",
    "json_kind",
    "let",
    "lit",
    "pyrepr",
    "strip",
]

# One projection: the columns it adds (name, SQL) and the columns it drops afterwards.
# Dropping wide intermediates (the parsed value) keeps each projection under Spark's
# spark.sql.codegen.maxFields (100 nested fields), past which whole-stage codegen is off
# and every projection copies its rows.
Stage = tuple[list[tuple[str, str]], tuple[str, ...]]

# The per-event struct each format builds (the Kafka coordinates and the format are added
# once per record afterwards); same names and types as contract.EVENT_SCHEMA.
EVENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("source", "STRING"),
    ("db", "STRING"),
    ("tbl", "STRING"),
    ("op", "STRING"),
    ("before", "STRING"),
    ("after", "STRING"),
    ("ddl", "STRING"),
    ("pos_file", "STRING"),
    ("pos", "BIGINT"),
    ("pos_row", "INT"),
    ("gtid", "STRING"),
    ("ts_ms", "BIGINT"),
    ("schema_fp", "STRING"),
    ("row_schema", "STRING"),
    ("snapshot", "BOOLEAN"),
)
EVENT_TYPE = "array<struct<" + ",".join(f"{n}:{t}" for n, t in EVENT_FIELDS) + ">>"


def case(branches: Sequence[tuple[str, str]], default: str = "NULL") -> str:
    """``CASE WHEN c1 THEN v1 ... ELSE default END``; the first true condition wins, and
    later conditions are not evaluated for that row (expensive checks go last)."""
    if not branches:
        return default
    body = " ".join(f"WHEN {c} THEN {v}" for c, v in branches)
    return f"(CASE {body} ELSE {default} END)"


def let(expr: str, var: str, body: str) -> str:
    """Bind ``expr`` to the lambda variable ``var`` in ``body`` (evaluated once)."""
    return f"try_element_at(transform(array({expr}), {var} -> {body}), 1)"


def first(array_expr: str) -> str:
    """The first element, or NULL for an empty/NULL array."""
    return f"try_element_at({array_expr}, 1)"


_EDGE_SPACE = r"(?U)^\s+|\s+$"
_Q, _BS = "'", "\\"


def strip(expr: str) -> str:
    """Python's ``str.strip()`` (Unicode whitespace at both ends)."""
    return f"regexp_replace({expr}, {lit(_EDGE_SPACE)}, '')"


def pyrepr(expr: str) -> str:
    """Python's ``repr()`` of a string, for reasons that quote a value like the reference
    decoder does (``'seven'``; double quotes when the text holds a ``'`` and no ``"``)."""
    quote, backslash = lit(_Q), lit(_BS)
    escaped = f"replace({expr}, {backslash}, {lit(_BS * 2)})"
    return (
        f"(CASE WHEN instr({expr}, {quote}) > 0 AND instr({expr}, '\"') = 0 "
        f"THEN concat('\"', {escaped}, '\"') "
        f"ELSE concat({quote}, replace({escaped}, {quote}, {lit(_BS + _Q)}), {quote}) END)"
    )


def json_kind(variant: str) -> str:
    """How the reference decoder names a non-object JSON value: ``an array``, ``a string``..."""
    return (
        f"(CASE WHEN is_variant_null({variant}) THEN 'null' "
        f"WHEN startswith(schema_of_variant({variant}), 'ARRAY') THEN 'an array' "
        f"WHEN schema_of_variant({variant}) = 'STRING' THEN 'a string' "
        f"WHEN schema_of_variant({variant}) = 'BOOLEAN' THEN 'a boolean' "
        f"WHEN startswith(schema_of_variant({variant}), 'OBJECT') THEN 'an object' "
        "ELSE 'a number' END)"
    )


def diagnose_json(v: str, rest: str) -> str:
    """Why the value ``v`` (text) did not parse into the format's envelope (evaluated for
    such rows only): not JSON, or JSON but not an object; ``rest`` handles a JSON object
    whose fields have the wrong JSON types."""
    parsed = f"try_parse_json({v})"
    return (
        f"(CASE WHEN {parsed} IS NULL THEN 'bad JSON (not parseable) at value' "
        f"WHEN NOT startswith(schema_of_variant({parsed}), 'OBJECT') "
        f"THEN concat('expected a JSON object, got ', {json_kind(parsed)}, ' at value') "
        f"ELSE {rest} END)"
    )


def event(**fields: str) -> str:
    """A ``named_struct`` with every event field; fields not given are typed NULLs."""
    unknown = set(fields) - {n for n, _ in EVENT_FIELDS}
    if unknown:
        raise ValueError(f"not event fields: {sorted(unknown)}")
    parts = []
    for name, sql_type in EVENT_FIELDS:
        value = fields.get(name, "NULL")
        parts.append(f"'{name}', CAST({value} AS {sql_type})")
    return "named_struct(" + ", ".join(parts) + ")"


def wrong_type(checks: Sequence[tuple[str, str, str]], v: str = "_v") -> str:
    """The first JSON field whose type is not what the envelope needs, as a reason.

    ``checks`` are ``(json_path, reason_path, kind)`` with kind ``object`` or ``array``;
    ``get_json_object`` gives the field's JSON text (NULL when absent or null)."""
    branches = []
    for json_path, reason_path, kind in checks:
        opener = "{" if kind == "object" else "["
        text = f"get_json_object({v}, {lit(json_path)})"
        branches.append(
            (
                f"{text} IS NOT NULL AND NOT startswith(ltrim({text}), {lit(opener)})",
                lit(f"expected a JSON {kind} at {reason_path}"),
            )
        )
    return case(branches, lit("value does not fit the envelope at value"))
