"""Internal: maxwell-json in Spark SQL; mirrors :mod:`tests.oracle.maxwell`.

How each quirk is decoded in the JVM:

- ``ts`` is seconds for DML and ms in DDL: below 10^11 it is multiplied by 1000
  (``try_multiply``), as the reference does;
- ``position`` ``"file:offset"``: ``regexp_extract`` at the last ``:``;
- ``old`` holds only changed columns: before = ``data`` with ``old`` laid over it;
- DML carries no column types and the reference keeps a fractional number's literal
  digits as a string (``1234.50`` -> ``"1234.50"``, a DECIMAL). Spark's JSON reader
  re-prints numbers (``1234.5``), so the literal is taken from the raw value with a regex
  on ``"column": <number>`` (the first occurrence with the same numeric value);
- ``bootstrap-start``/``-complete`` are markers: no event, no error.
"""

from __future__ import annotations

from streaming.source._decode.sql import (
    EVENT_TYPE,
    Stage,
    case,
    diagnose_json,
    event,
    first,
    lit,
    pyrepr,
    wrong_type,
)

__all__ = ["PARSE_SCHEMA", "events_sql", "reason_sql", "stages"]

PARSE_SCHEMA = (
    "`database` string, `table` string, type string, ts string, xid string, xoffset string, "
    "`commit` string, position string, gtid string, server_id string, thread_id string, "
    "data map<string,variant>, old map<string,variant>, `def` string, `sql` string, "
    "_corrupt string"
)
_DML = {"insert": "c", "update": "u", "delete": "d", "bootstrap-insert": "r"}
_MARKERS = ("bootstrap-start", "bootstrap-complete")
_DDL = tuple(f"{k}-{a}" for k in ("database", "table") for a in ("create", "alter", "drop"))
_POSITION = r"^([\s\S]+):([0-9]+)$"
_NUMBER = r"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
_AFTER_KEY = r'"\s*:\s*' + _NUMBER
_RQ, _RE, _RE_ESCAPED = r"\Q", r"\E", r"\E\\E\Q"
_INTS = ("ts", "xid", "xoffset", "server_id", "thread_id")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(lit(v) for v in values)


def stages(source_map: str) -> list[Stage]:
    return [(_prepare(source_map), ())]


def _prepare(source_map: str) -> list[tuple[str, str]]:
    return [
        ("_src", f"{source_map}[topic]"),
        ("_ts", "try_cast(_j.ts AS BIGINT)"),
        ("_data", _literal_numbers("_j.data")),
        ("_old", _literal_numbers("_j.old")),
    ]


def _literal_numbers(m: str) -> str:
    """``m`` with each fractional number replaced by its literal text (a string)."""
    # The column name as a literal regex: \Q...\E, with any \E inside it escaped.
    inner = f"replace(k, {lit(_RE)}, {lit(_RE_ESCAPED)})"
    quoted = f"concat({lit(_RQ)}, {inner}, {lit(_RE)})"
    pattern = f"concat('\"', {quoted}, {lit(_AFTER_KEY)})"
    found = first(
        f"filter(regexp_extract_all(_v, {pattern}, 1), "
        "x -> try_cast(x AS DOUBLE) = try_variant_get(v, '$', 'double'))"
    )
    is_fraction = (
        "(schema_of_variant(v) = 'DOUBLE' OR "
        "(startswith(schema_of_variant(v), 'DECIMAL') "
        "AND NOT endswith(schema_of_variant(v), ',0)')))"
    )
    literal = (
        f"CASE WHEN {found} IS NOT NULL "
        f"THEN IF({found} rlike '[.eE]', CAST({found} AS VARIANT), v) "
        f"WHEN {is_fraction} THEN CAST(CAST(v AS STRING) AS VARIANT) ELSE v END"
    )
    numeric = "(schema_of_variant(v) = 'DOUBLE' OR startswith(schema_of_variant(v), 'DECIMAL'))"
    return f"transform_values({m}, (k, v) -> IF({numeric}, {literal}, v))"


def reason_sql() -> str:
    diagnose = diagnose_json(
        "_v",
        wrong_type(
            [("$.data", "data", "object"), ("$.old", "old", "object"), ("$.def", "def", "object")]
        ),
    )
    checks = [
        (
            "_src IS NULL",
            "concat('no source configured for topic ', " + pyrepr("topic") + ", ' at topic')",
        ),
        ("NOT is_valid_utf8(_v)", "'bad JSON (not UTF-8) at value'"),
        ("_j IS NULL OR _j._corrupt IS NOT NULL", diagnose),
        ("_j.type IS NULL", "'missing type at type'"),
        *[
            (
                f"_j.{f} IS NOT NULL AND try_cast(_j.{f} AS BIGINT) IS NULL",
                f"concat('not an integer: ', {pyrepr(f'_j.{f}')}, ' at {f}')",
            )
            for f in _INTS
        ],
        (
            "_j.`commit` IS NOT NULL AND lower(_j.`commit`) NOT IN "
            "('true', 'false', '1', '0', 'yes', 'no', 'on', 'off', 't', 'f', 'y', 'n')",
            f"concat('not a boolean: ', {pyrepr('_j.`commit`')}, ' at commit')",
        ),
        (f"_j.type IN ({_in(_MARKERS)})", "NULL"),
        ("coalesce(_j.`database`, '') = ''", "'missing database at database'"),
        (
            f"_j.position IS NOT NULL AND NOT _j.position rlike {lit(_POSITION)}",
            "concat('position \"', _j.position, '\" is not \"file:offset\" at position')",
        ),
        (
            f"_j.type IN ({_in(_DDL)}) AND coalesce(_j.`sql`, '') = ''",
            "concat('missing sql for \"', _j.type, '\" at sql')",
        ),
        (
            f"_j.type NOT IN ({_in(_DDL)}) AND _j.type NOT IN ({_in(tuple(_DML))})",
            "concat('unknown type \"', _j.type, '\" at type')",
        ),
        (
            f"_j.type IN ({_in(tuple(_DML))}) AND coalesce(_j.`table`, '') = ''",
            "'missing table at table'",
        ),
        (
            f"_j.type IN ({_in(tuple(_DML))}) AND _j.data IS NULL",
            "concat('missing data for \"', _j.type, '\" at data')",
        ),
    ]
    return case(checks)


def events_sql() -> str:
    common = {
        "source": "_src",
        "db": "_j.`database`",
        "pos_file": f"nullif(regexp_extract(_j.position, {lit(_POSITION)}, 1), '')",
        "pos": f"try_cast(regexp_extract(_j.position, {lit(_POSITION)}, 2) AS BIGINT)",
        "pos_row": "try_cast(_j.xoffset AS INT)",
        "gtid": "nullif(_j.gtid, '')",
        "ts_ms": "IF(_ts >= 100000000000, _ts, try_multiply(_ts, 1000))",
    }
    whens = " ".join(f"WHEN {lit(k)} THEN {lit(v)}" for k, v in _DML.items())
    op = f"CASE _j.type {whens} END"
    over = (
        "map_concat(transform_values(_data, (k, v) -> IF(map_contains_key(_old, k), _old[k], v)), "
        "map_filter(_old, (k, v) -> NOT map_contains_key(_data, k)))"
    )
    row = event(
        **common,
        tbl="_j.`table`",
        op=op,
        before="CASE _j.type WHEN 'update' THEN to_json(IF(_old IS NULL, _data, "
        f"{over})) WHEN 'delete' THEN to_json(_data) END",
        after="IF(_j.type = 'delete', NULL, to_json(_data))",
        snapshot="_j.type = 'bootstrap-insert'",
    )
    ddl = event(
        **common, tbl="coalesce(_j.`table`, '')", op="'ddl'", ddl="_j.`sql`", snapshot="false"
    )
    return (
        f"CASE WHEN _j.type IN ({_in(_MARKERS)}) THEN CAST(array() AS {EVENT_TYPE}) "
        f"WHEN _j.type IN ({_in(_DDL)}) THEN array({ddl}) ELSE array({row}) END"
    )
