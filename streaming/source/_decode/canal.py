"""Internal: canal-json (FlatMessage) in Spark SQL; mirrors :mod:`tests.oracle.canal`.

How each quirk is decoded in the JVM:

- every value is a string: ``data``/``old`` are parsed as ``array<map<string,string>>``
  (numbers, should a fork send some, become their text), and each value is converted by
  the base of its ``mysqlType`` (``regexp_extract``) into a VARIANT: integer types ->
  BIGINT (DECIMAL(38,0) past 2^63), float/double/real -> DOUBLE, decimal -> kept as its
  validated text, anything else -> the string. ``to_json`` of the ``map<string,variant>``
  then writes numbers as numbers;
- several rows per message: ``transform`` over ``data`` with the row index (``pos_row``),
  exploded later by the caller;
- ``old`` holds only changed columns: before = the data row with ``old`` laid over it
  (``transform_values`` + ``map_concat`` of old-only columns, so no duplicate keys);
- TRUNCATE (isDdl true) is op ``t``; every other non-DML type is op ``ddl`` with ``sql``.
"""

from __future__ import annotations

from coordinator.routing import SHADOW_TABLE
from streaming.source._decode.sql import (
    Stage,
    case,
    diagnose_json,
    event,
    first,
    let,
    lit,
    pyrepr,
    wrong_type,
)

__all__ = ["PARSE_SCHEMA", "events_sql", "reason_sql", "stages"]

PARSE_SCHEMA = (
    "id string, `database` string, `table` string, isDdl string, type string, es string, "
    "ts string, `sql` string, gtid string, mysqlType map<string,string>, "
    "data array<map<string,string>>, old array<map<string,string>>, _corrupt string"
)
_DML = ("INSERT", "UPDATE", "DELETE")
_INT_TYPES = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_FLOAT_TYPES = ("float", "double", "real", "double precision")
_DECIMAL_TYPES = ("decimal", "numeric", "dec", "fixed")
_BASE = r"(?i)^\s*([a-z ]+?)\s*(\(|$|\s)"
# Possessive digit runs: see _ID_PART in debezium.py (Java recurses per group repetition).
_INT = r"^\s*[+-]?[0-9]++(?:_[0-9]++)*+\s*$"
_DECIMAL = (
    r"(?i)^\s*[+-]?(?:[0-9]++(?:_[0-9]++)*+(?:\.(?:[0-9]++(?:_[0-9]++)*+)?)?"
    r"|\.[0-9]++(?:_[0-9]++)*+)(?:e[+-]?[0-9]++(?:_[0-9]++)*+)?\s*$"
    r"|^\s*[+-]?(?:inf|infinity|s?nan[0-9]*)\s*$"
)
_SPACE_OR_UNDERSCORE = r"[\s_]"
_TRUE = ("true", "1", "yes", "on", "t", "y")
_FALSE = ("false", "0", "no", "off", "f", "n")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(lit(v) for v in values)


def stages(source_map: str) -> list[Stage]:
    return [(_prepare(source_map), ())]


def _prepare(source_map: str) -> list[tuple[str, str]]:
    return [
        ("_src", f"{source_map}[topic]"),
        ("_kind", "upper(_j.type)"),
        (
            "_isddl",
            f"CASE WHEN lower(_j.isDdl) IN ({_in(_TRUE)}) THEN true "
            f"WHEN lower(_j.isDdl) IN ({_in(_FALSE)}) THEN false END",
        ),
        (
            "_fp",
            "CASE WHEN size(_j.mysqlType) > 0 THEN "
            "substr(sha1(to_json(map_from_entries(array_sort(map_entries(_j.mysqlType))))), 1, 16) "
            "END",
        ),
        # The shadow's schema for a cut-over whose CREATE was never read: its columns'
        # MySQL types, in order (online-DDL shadow tables only).
        (
            "_rsch",
            f"CASE WHEN _j.`table` rlike {lit(SHADOW_TABLE.pattern)} AND size(_j.mysqlType) > 0 "
            "THEN to_json(transform(map_entries(_j.mysqlType), e -> array(e.key, e.value))) END",
        ),
        ("_rows", _rows()),
    ]


def _convert(text: str, mysql_type: str, at: str) -> str:
    """``struct(v variant, err string)``: ``canal_value(text, mysql_type)``."""
    base = (
        f"lower(coalesce(nullif(regexp_extract({mysql_type}, {lit(_BASE)}, 1), ''), {mysql_type}))"
    )
    digits = f"regexp_replace({text}, {lit(_SPACE_OR_UNDERSCORE)}, '')"
    as_int = (
        f"coalesce(CAST(try_cast({digits} AS BIGINT) AS VARIANT), "
        f"CAST(try_cast({digits} AS DECIMAL(38,0)) AS VARIANT))"
    )
    as_float = f"CAST(try_cast(trim({text}) AS DOUBLE) AS VARIANT)"
    value = case(
        [
            (f"{text} IS NULL", "CAST(NULL AS VARIANT)"),
            (f"{mysql_type} IS NULL", f"CAST({text} AS VARIANT)"),
            (f"_base IN ({_in(_INT_TYPES)})", f"IF({text} rlike {lit(_INT)}, {as_int}, NULL)"),
            (f"_base IN ({_in(_FLOAT_TYPES)})", as_float),
            (
                f"_base IN ({_in(_DECIMAL_TYPES)})",
                f"IF({text} rlike {lit(_DECIMAL)}, CAST({text} AS VARIANT), NULL)",
            ),
        ],
        f"CAST({text} AS VARIANT)",
    )
    body = (
        f"named_struct('v', _cv, 'err', IF(_cv IS NULL AND {text} IS NOT NULL, "
        f"concat('cannot read ', {pyrepr(text)}, ' as ', {mysql_type}, ' at ', {at}), NULL))"
    )
    return let(base, "_base", let(value, "_cv", body))


def _row(m: str, at: str) -> str:
    """A row map -> ``array<struct<k, v variant, err>>`` in column order (NULL stays NULL)."""
    conv = _convert("e.value", "_j.mysqlType[e.key]", f"concat({at}, '.', e.key)")
    item = let(conv, "_c", "named_struct('k', e.key, 'v', _c.v, 'err', _c.err)")
    return f"transform(map_entries({m}), e -> {item})"


def _rows() -> str:
    old = "try_element_at(_j.old, i + 1)"
    data_at, old_at = "concat('data[', i, ']')", "concat('old[', i, ']')"
    return (
        "transform(_j.data, (r, i) -> named_struct("
        f"'d', {_row('r', data_at)}, "
        f"'o', IF(upper(_j.type) = 'UPDATE', {_row(old, old_at)}, NULL)))"
    )


def reason_sql() -> str:
    diagnose = diagnose_json(
        "_v",
        wrong_type(
            [
                ("$.mysqlType", "mysqlType", "object"),
                ("$.data", "data", "array"),
                ("$.old", "old", "array"),
            ]
        ),
    )
    row_errors = (
        "flatten(transform(_rows, (r, i) -> concat("
        "IF(r.d IS NULL, array(concat('expected a JSON object at data[', i, ']')), "
        "transform(r.d, c -> c.err)), "
        "IF(_kind = 'UPDATE' AND r.o IS NULL, "
        "array(concat('expected a JSON object at old[', i, ']')), "
        "coalesce(transform(r.o, c -> c.err), array())))))"
    )
    first_error = first(f"filter({row_errors}, e -> e IS NOT NULL)")

    def not_int(field: str) -> tuple[str, str]:
        return (
            f"_j.{field} IS NOT NULL AND try_cast(_j.{field} AS BIGINT) IS NULL",
            f"concat('not an integer: ', {pyrepr(f'_j.{field}')}, ' at {field}')",
        )

    non_dml = [
        ("NOT _isddl", "concat('unknown type \"', _j.type, '\" (isDdl is false) at type')"),
        ("_kind = 'TRUNCATE' AND coalesce(_j.`table`, '') = ''", "'missing table at table'"),
        (
            "_kind != 'TRUNCATE' AND coalesce(_j.`sql`, '') = ''",
            "concat('missing sql for DDL type \"', _j.type, '\" at sql')",
        ),
    ]
    dml = [
        ("coalesce(_j.`table`, '') = ''", "'missing table at table'"),
        ("coalesce(size(_j.data), 0) = 0", "concat('missing data for ', _kind, ' at data')"),
        (
            "_kind = 'UPDATE' AND coalesce(size(_j.old), 0) != size(_j.data)",
            "concat('old has ', coalesce(size(_j.old), 0), ' row(s), data has ', "
            "size(_j.data), ' at old')",
        ),
        (f"{first_error} IS NOT NULL", first_error),
    ]
    checks = [
        (
            "_src IS NULL",
            "concat('no source configured for topic ', " + pyrepr("topic") + ", ' at topic')",
        ),
        ("NOT is_valid_utf8(_v)", "'bad JSON (not UTF-8) at value'"),
        ("_j IS NULL OR _j._corrupt IS NOT NULL", diagnose),
        not_int("id"),
        ("_j.`database` IS NULL", "'missing database at database'"),
        ("_j.isDdl IS NULL", "'missing isDdl at isDdl'"),
        ("_isddl IS NULL", f"concat('not a boolean: ', {pyrepr('_j.isDdl')}, ' at isDdl')"),
        ("_j.type IS NULL", "'missing type at type'"),
        not_int("es"),
        not_int("ts"),
        ("_j.`database` = ''", "'missing database at database'"),
        (f"_kind NOT IN ({_in(_DML)})", case(non_dml)),
    ]
    return case(checks, case(dml))


def events_sql() -> str:
    common = {
        "source": "_src",
        "db": "_j.`database`",
        "gtid": "nullif(_j.gtid, '')",
        "ts_ms": "try_cast(_j.es AS BIGINT)",
    }
    d = "map_from_entries(transform(r.d, c -> struct(c.k, c.v)))"
    o = "map_from_entries(transform(r.o, c -> struct(c.k, c.v)))"
    over = (
        f"map_concat(transform_values({d}, (k, v) -> IF(map_contains_key({o}, k), {o}[k], v)), "
        f"map_filter({o}, (k, v) -> NOT map_contains_key({d}, k)))"
    )
    row = event(
        **common,
        tbl="_j.`table`",
        op="CASE _kind WHEN 'INSERT' THEN 'c' WHEN 'UPDATE' THEN 'u' ELSE 'd' END",
        before=f"CASE _kind WHEN 'UPDATE' THEN to_json({over}) WHEN 'DELETE' THEN to_json({d}) END",
        after=f"IF(_kind = 'DELETE', NULL, to_json({d}))",
        pos_row="i",
        schema_fp="_fp",
        row_schema="_rsch",
        snapshot="false",
    )
    truncate = event(**common, tbl="_j.`table`", op="'t'", snapshot="false")
    ddl = event(
        **common, tbl="coalesce(_j.`table`, '')", op="'ddl'", ddl="_j.`sql`", snapshot="false"
    )
    return (
        f"CASE WHEN _kind IN ({_in(_DML)}) THEN transform(_rows, (r, i) -> {row}) "
        f"WHEN _kind = 'TRUNCATE' THEN array({truncate}) ELSE array({ddl}) END"
    )
