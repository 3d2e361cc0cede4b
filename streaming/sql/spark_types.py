"""MySQL column types in Spark and Delta: the Delta column type of each MySQL type, and the
Spark SQL expression that turns a row image value (text, as decoded) into it.

Row images are decoded as ``map<string,string>`` (one schema for every shard), so every
value arrives as text: numbers as their digits, DECIMAL as a decimal string (Debezium's
``decimal.handling.mode=string``, or decoded from base64), and temporal values in
Debezium's encodings (``io.debezium.time.Date`` days, ``Timestamp`` ms, ``MicroTimestamp``
µs, ``ZonedTimestamp`` ISO text).
"""

from __future__ import annotations

import re

from schemas.debezium_enum import value_map
from schemas.model import SPATIAL_TYPES, ColumnType, TableSchema, string_value
from schemas.storage import (
    BASE64,
    JSON_ARRAY,
    JSON_BLANK,
    JSON_CONTROL,
    JSON_ESCAPES,
    JSON_NUL,
    JSON_NUMBER,
    JSON_OBJECT,
    JSON_PATTERNS,
    JSON_SCALAR,
    JSON_STRING,
    PG_NUMERIC_DIGITS,
    PG_NUMERIC_EXPONENT,
    PG_NUMERIC_SCALE,
    PLAIN_DECIMAL,
    TEMPORAL_COUNT,
    TEMPORAL_COUNTS,
    TEMPORAL_TEXT,
    TIME_COUNT,
    TIME_COUNT_DIGITS,
    TIME_TEXT,
    ZERO_DATE,
    Limit,
    literal_bytes,
)
from streaming.sql.quoting import ident, literal, string

__all__ = ["debezium_member_expr", "delta_type", "limit_sql", "value_expr", "widens_in_place"]

_INT_SIGNED = {
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "MEDIUMINT": "INT",
    "INT": "INT",
    "BIGINT": "BIGINT",
}
_INT_UNSIGNED = {
    "TINYINT": "SMALLINT",
    "SMALLINT": "INT",
    "MEDIUMINT": "INT",
    "INT": "BIGINT",
    "BIGINT": "DECIMAL(20,0)",
}


def delta_type(t: ColumnType) -> str:
    """The Spark/Delta SQL type a MySQL column is stored as."""
    if t.base in _INT_SIGNED:
        return (_INT_UNSIGNED if t.unsigned else _INT_SIGNED)[t.base]
    if t.base == "DECIMAL":
        precision, scale = t.length or 10, t.scale or 0
        # Spark decimals stop at 38 digits; wider MySQL decimals are kept as text.
        return f"DECIMAL({precision},{scale})" if precision <= 38 else "STRING"
    if t.base == "FLOAT":
        return "FLOAT"
    if t.base == "DOUBLE":
        return "DOUBLE"
    if t.base == "DATE":
        return "DATE"
    if t.base == "DATETIME":
        return "TIMESTAMP_NTZ"
    if t.base == "TIMESTAMP":
        return "TIMESTAMP"
    if t.base == "YEAR":
        return "INT"
    if t.base in ("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "BIT"):
        return "BINARY"
    if t.base in SPATIAL_TYPES or t.base == "VECTOR":
        return "BINARY"  # WKB; MariaDB's VECTOR is packed floats
    return "STRING"


# A character past Unicode's basic plane (Java's regex reads code points).
_PAST_BMP = r"[^\x{0000}-\x{FFFF}]"


def limit_sql(bound: Limit, value: str) -> str:
    """A condition on ``value`` (SQL of a column's projected value: a string, the bytes of
    a byte column, a number): it is past ``bound`` (``schemas.storage.Limit``), as
    ``Limit.admits`` judges it; false for NULL."""
    terms = []
    if bound.chars is not None:
        terms.append(f"char_length({value}) > {int(bound.chars)}")
    if bound.lo is not None and bound.hi is not None:

        def number(b: int) -> str:  # any integer a bound names, BIGINT UNSIGNED's too
            return f"CAST({string(str(int(b)))} AS DECIMAL(38,0))"

        outside = f"{value} < {number(bound.lo)} OR {value} > {number(bound.hi)}"
        if bound.also:
            outside = f"({outside}) AND {value} NOT IN ({', '.join(map(number, bound.also))})"
        terms.append(outside)
    if bound.max_bytes is not None:  # a string's UTF-8, or a byte column's bytes
        terms.append(f"octet_length({value}) > {int(bound.max_bytes)}")
    if bound.bmp:
        terms.append(f"{value} RLIKE {string(_PAST_BMP)}")
    if bound.members is not None:
        members = ", ".join(string(m) for m in bound.members) or "NULL"
        terms.append(f"NOT array_contains(array({members}), {value})")
    if bound.temporal is not None and bound.moments is not None:
        if bound.temporal == "DATE":
            at = f"CAST(unix_date({value}) AS BIGINT) * 86400000000"
        elif bound.temporal == "TIMESTAMP":
            at = f"unix_micros({value})"
        else:  # a DATETIME (TIMESTAMP_NTZ): its wall clock as if UTC
            at = f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {value})"
        first, last = (int(m) for m in bound.moments)
        terms.append(f"{at} < {first} OR {at} > {last}")
    if bound.time_us is not None:
        terms.append(_time_past(bound, value))
    if bound.nul:  # a NUL character, and in a JSON text its escape
        terms.append(f"instr({value}, chr(0)) > 0")
        if bound.json:
            terms.append(f"{value} RLIKE {string(JSON_NUL.pattern)}")
    if bound.finite is not None:  # NaN or an infinity (MySQL's FLOAT and DOUBLE have none)
        terms.append(f"isnan({value}) OR abs({value}) = CAST('Infinity' AS DOUBLE)")
    if bound.wide is not None:
        terms.append(_wide_decimal_past(value, *bound.wide))
    if bound.outside is not None:  # a character the column's character set cannot encode
        terms.append(f"{value} RLIKE {string(bound.outside)}")
    if bound.cs_bytes is not None:  # its bytes in the column's character set
        counted = [f"char_length({value})"] + [
            f"(char_length({value}) - char_length(regexp_replace({value}, {string(p)}, '')))"
            for p in bound.cs_wider
        ]
        terms.append(f"{' + '.join(counted)} > {int(bound.cs_bytes)}")
    if bound.json_depth is not None:
        terms.append(_json_deeper(value, int(bound.json_depth)))
    if bound.json_valid is not None:
        terms.append(_json_invalid(value, JSON_ESCAPES[bound.json_valid]))
    if bound.pg_numbers:
        terms.append(_json_numbers_past(value, JSON_ESCAPES["rfc"]))
    if bound.bits is not None:  # a BIT's bytes (most significant first): its bits counted
        digits = f"TRIM(LEADING '0' FROM hex({value}))"
        terms.append(
            f"CASE WHEN length({digits}) > 16 THEN true "
            f"ELSE length(TRIM(LEADING '0' FROM conv({digits}, 16, 2))) > {int(bound.bits)} END"
        )
    if bound.set_members is not None:
        members = ", ".join(string(m) for m in bound.set_members) or "NULL"
        terms.append(
            f"{value} <> '' AND NOT forall(split({value}, ',', -1), "
            f"m -> array_contains(array({members}), m))"
        )
    return "coalesce(" + " OR ".join(f"({t})" for t in terms) + ", false)" if terms else "false"


def _wide_decimal_past(value: str, precision: int, scale: int) -> str:
    """A ``DECIMAL`` wider than Spark's (its value text) that its column does not hold, as
    ``schemas.storage.wide_decimal_fits`` judges it."""
    plain = string(f"^{PLAIN_DECIMAL.pattern}$")
    whole = f"TRIM(LEADING '0' FROM regexp_extract({value}, {plain}, 1))"
    fraction = f"regexp_extract({value}, {plain}, 2)"
    carry = (
        f"length({fraction}) > {scale} AND substr({fraction}, {scale + 1}, 1) >= '5' "
        f"AND NOT concat({whole}, substr({fraction}, 1, {scale})) RLIKE '[^9]'"
    )
    digits = f"length({whole}) + IF({carry}, 1, 0)"
    return (
        f"CASE WHEN {value} RLIKE {plain} AND {value} RLIKE '[0-9]' "
        f"THEN {digits} > {precision - scale} ELSE true END"
    )


def _strings_out(value: str, escapes: str) -> str:
    """A JSON text with its valid ``escapes`` flattened, then each string made U+0001
    (``schemas.storage._strings_out``)."""
    flat = f"regexp_replace({value}, {string(escapes)}, '_')"
    return f"regexp_replace({flat}, {string(JSON_STRING)}, {string(chr(1))})"


def _json_invalid(value: str, escapes: str) -> str:
    """A text that is not one JSON value, as ``schemas.storage.json_valid`` reads it: its
    control characters, then its valid ``escapes`` (a pattern), strings, scalars and
    whitespace replaced, then its innermost arrays and objects as many times as it opens
    one (``aggregate``); JSON when one string or scalar is left."""
    text, scalar = string(chr(1)), string(chr(2))
    flat = _strings_out(value, escapes)
    for pattern, by in ((JSON_SCALAR, scalar), (JSON_BLANK, "''")):
        flat = f"regexp_replace({flat}, {string(pattern)}, {by})"
    step = (
        f"regexp_replace(regexp_replace(_j, {string(JSON_OBJECT)}, {scalar}), "
        f"{string(JSON_ARRAY)}, {scalar})"
    )
    opens = "length(_f) - length(translate(_f, '[{', ''))"
    reduced = f"aggregate(sequence(1, {opens}), _f, (_j, _i) -> {step})"
    left = f"transform(array({flat}), _f -> {reduced})[0]"
    return f"{value} RLIKE {string(JSON_CONTROL)} OR NOT ({left} IN ({text}, {scalar}))"


def _json_numbers_past(value: str, escapes: str) -> str:
    """A JSON text with a number PostgreSQL's NUMERIC does not hold, as
    ``schemas.storage.json_numbers_fit`` reads it. Only a text with an exponent after a
    digit, or longer than the fraction digits NUMERIC holds, can have one: the rest are
    judged by a regex, without a lambda."""
    number = string(JSON_NUMBER)
    # each number's parts, read once: integer digits, fraction digits, exponent
    parts = ", ".join(
        f"'{name}', regexp_extract(_n, {number}, {i})" for name, i in (("w", 2), ("f", 3), ("x", 4))
    )
    numbers = f"transform(regexp_extract_all({_strings_out(value, escapes)}, {number}, 0), "
    numbers += f"_n -> named_struct({parts}))"
    whole, fraction, exponent = "_p.w", "_p.f", "_p.x"
    digits = f"TRIM(LEADING '0' FROM regexp_replace({exponent}, '^[+-]', ''))"
    e = f"CAST(IF({exponent} = '', '0', {exponent}) AS BIGINT)"
    past = (
        f"CASE WHEN length({digits}) > 10 THEN true "
        f"WHEN abs({e}) >= {PG_NUMERIC_EXPONENT} THEN true "
        f"WHEN length({fraction}) - {e} > {PG_NUMERIC_SCALE} THEN true "
        f"WHEN {whole} <> '0' THEN length({whole}) - 1 + {e} >= {PG_NUMERIC_DIGITS} "
        f"WHEN {fraction} RLIKE '[1-9]' THEN length(TRIM(LEADING '0' FROM {fraction})) "
        f"- length({fraction}) - 1 + {e} >= {PG_NUMERIC_DIGITS} ELSE false END"
    )
    suspect = f"{value} RLIKE '[0-9][eE]' OR length({value}) > {PG_NUMERIC_SCALE}"
    return f"CASE WHEN {suspect} THEN exists({numbers}, _p -> {past}) ELSE false END"


def _json_deeper(value: str, most: int) -> str:
    """A JSON text nested deeper than ``most``, as ``schemas.storage.json_depth`` reads it.
    Only a text with more than ``most`` opening brackets (in strings or not) can be: the
    rest are judged by two ``translate`` calls, without a regex or a lambda."""
    escape, text, other = (string(p) for p in JSON_PATTERNS)
    brackets = (
        f"regexp_replace(regexp_replace(regexp_replace({value}, {escape}, ''), {text}, ''), "
        f"{other}, '')"
    )
    step = "IF(_c IN ('[', '{'), 1, -1)"
    deepest = (
        f"aggregate(split({brackets}, ''), named_struct('d', 0, 'm', 0), "
        f"(_a, _c) -> named_struct('d', _a.d + {step}, 'm', greatest(_a.m, _a.d + {step})), "
        "_a -> _a.m)"
    )
    openers = f"length({value}) - length(translate({value}, '[{{', ''))"
    return f"CASE WHEN {openers} > {most} THEN {deepest} > {most} ELSE false END"


# The forms schemas.storage reads, as Java regexes (the same text: ASCII digits, no
# Python-only syntax); TIME_TEXT's groups: sign, hours, minutes, seconds, fraction.
_TIME_COUNT_SQL = string(f"^{TIME_COUNT.pattern}$")
_TIME_TEXT_SQL = string(f"^{TIME_TEXT.pattern}$")


def _time_past(bound: Limit, value: str) -> str:
    """A TIME's text past ``bound`` (``time_us``, ``clock``), as ``schemas.storage.
    Limit.admits`` judges it: a count or ``[-]h:mm:ss[.ffffff]``; another form false."""
    most = int(bound.time_us or 0)

    def group(i: int) -> str:  # one of TIME_TEXT's groups ('' when absent)
        return f"regexp_extract({value}, {_TIME_TEXT_SQL}, {i})"

    def number(i: int) -> str:  # hours at most 12 digits where it is read (below)
        return f"try_cast({group(i)} AS DECIMAL(38,0))"

    fraction = f"CAST(rpad({group(5)}, 6, '0') AS DECIMAL(38,0))"
    micros = f"((({number(2)} * 60 + {number(3)}) * 60 + {number(4)}) * 1000000 + {fraction})"
    clock = f"{number(3)} > 59 OR {number(4)} > 59 OR " if bound.clock else ""
    return (
        f"CASE WHEN {value} RLIKE {_TIME_COUNT_SQL} THEN "
        f"length(ltrim('-', {value})) > {TIME_COUNT_DIGITS} "
        f"OR abs(try_cast({value} AS DECIMAL(38,0))) > {most} "
        f"WHEN {value} RLIKE {_TIME_TEXT_SQL} THEN "
        f"{clock}length({group(2)}) > 12 OR {micros} > {most} "
        "ELSE false END"
    )


def value_expr(t: ColumnType, text: str, fmt: str | None = None) -> str:
    """A Spark SQL expression converting the text value ``text`` (an expression) to
    :func:`delta_type` of ``t``. ``fmt``: an expression naming the CDC format the text
    came in (``debezium``, ``canal``, ``maxwell``: the event's ``format``), for the types
    whose text differs by tool (bytes, BIT, spatial); None: Debezium's forms."""
    target = delta_type(t)
    if t.base in ("DATE", "DATETIME", "TIMESTAMP"):
        return _temporal_expr(t, text)
    if t.base in SPATIAL_TYPES:
        # Debezium sends a geometry as {"wkb": base64, "srid": n}: the WKB is the value.
        debezium = _unbase64(f"coalesce(get_json_object({text}, '$.wkb'), {text})")
        # Canal: MySQL's own value (a 4-byte SRID, then the WKB), a character per byte;
        # Maxwell sends WKT text, which is not read (NULL: unfit, a dead letter).
        canal = (
            f"CASE WHEN length({text}) > 4 AND {text} RLIKE {_LATIN1_SQL} "
            f"THEN substring(encode({text}, 'ISO-8859-1'), 5) END"
        )
        return _by_format(fmt, debezium, canal=canal, maxwell="CAST(NULL AS BINARY)")
    if t.base == "BIT":
        # Debezium sends BIT(1) as a JSON boolean and BIT(n) as base64 of the value's
        # bytes, least significant first (io.debezium.data.Bits); stored as MySQL's own
        # bytes of the value, most significant first (what CAST(b AS BINARY) gives there,
        # and what a MariaDB or MySQL BIT(n) column takes).
        # Text that is not base64 is NULL (unfit), as _unbase64 has it.
        debezium = (
            f"CASE WHEN {text} = 'true' THEN X'01' WHEN {text} = 'false' THEN X'00' "
            f"WHEN {text} RLIKE {_BASE64_SQL} "
            f"THEN unhex(concat_ws('', reverse(regexp_extract_all(hex(unbase64({text})), "
            f"{string('..')}, 0)))) END"
        )
        # Canal and Maxwell send the value as a number (text, a JSON number): its bytes
        # as MySQL keeps them, n / 8 of them rounded up; a number the column cannot hold
        # is unfit (Maxwell writes values from 2^31 on wrongly, some negative).
        bits = t.length or 1
        number = (
            f"CASE WHEN {text} RLIKE {_DIGITS_SQL} "
            f"AND try_cast({text} AS DECIMAL(20,0)) < {2**bits} "
            f"THEN unhex(lpad(conv({text}, 10, 16), {2 * ((bits + 7) // 8)}, '0')) END"
        )
        return _by_format(fmt, debezium, canal=number, maxwell=number)
    if target == "BINARY":
        # Canal sends bytes as text, a character per byte (ISO-8859-1); Debezium and
        # Maxwell as base64.
        canal = f"CASE WHEN {text} RLIKE {_LATIN1_SQL} THEN encode({text}, 'ISO-8859-1') END"
        return _by_format(fmt, _unbase64(text), canal=canal)
    if target == "STRING":
        return text
    if target in _INTEGRAL:
        # A DOUBLE/DECIMAL shard column feeding an integer target writes "2.0": integral
        # values are taken; anything else does not fit (NULL here, a dead letter upstream).
        return f"try_cast(regexp_replace({text}, '[.]0+$', '') AS {target})"
    return f"try_cast({text} AS {target})"


def _by_format(fmt: str | None, debezium: str, **others: str) -> str:
    """``debezium``, or, for a record of a tool in ``others``, that tool's expression."""
    if fmt is None:
        return debezium
    cases = " ".join(f"WHEN {fmt} = {string(tool)} THEN {sql}" for tool, sql in others.items())
    return f"CASE {cases} ELSE {debezium} END"


_INTEGRAL = {"TINYINT", "SMALLINT", "INT", "BIGINT"}


# schemas.storage.BASE64 over the whole text (``\z``: Java's ``$`` would also match before a
# final line break).
_BASE64_SQL = string(f"^{BASE64.pattern}\\z")
# An unsigned number of up to 20 digits (a BIT value from Canal or Maxwell).
_DIGITS_SQL = string("^[0-9]{1,20}\\z")
# Text whose every character is one byte in ISO-8859-1 (Canal's bytes).
_LATIN1_SQL = string("^[\\x00-\\xFF]*+\\z")


def _unbase64(text: str) -> str:
    """The bytes of base64 ``text`` (an expression), NULL when it is not base64 as CDC
    tools write it (``schemas.storage.Bytes``): unfit, a dead letter."""
    return f"CASE WHEN {text} RLIKE {_BASE64_SQL} THEN unbase64({text}) END"


def _temporal_expr(t: ColumnType, text: str) -> str:
    """A DATE, DATETIME or TIMESTAMP value from its text, or NULL where
    ``schemas.storage.Temporal`` does not admit it (and for MySQL's zero date, which it
    does: :func:`zero_date_sql`). Only the forms it reads reach a cast, and every cast is a
    ``try_`` one: no text fails the batch."""
    count = string(f"^{TEMPORAL_COUNT}\\z")
    iso = string(f"^{TEMPORAL_TEXT}\\z")
    target = delta_type(t)
    if t.base == "DATE":
        lo, hi = TEMPORAL_COUNTS["DATE"]
        days = f"try_cast({text} AS INT)"
        counted = (
            f"CASE WHEN {days} BETWEEN {lo} AND {hi} THEN date_add(DATE'1970-01-01', {days}) END"
        )
    elif t.base == "DATETIME":
        micros = (t.length or 0) > 3
        lo, hi = TEMPORAL_COUNTS["us" if micros else "ms"]
        unit = "timestamp_micros" if micros else "timestamp_millis"
        n = f"try_cast({text} AS BIGINT)"
        counted = f"CASE WHEN {n} BETWEEN {lo} AND {hi} THEN CAST({unit}({n}) AS TIMESTAMP_NTZ) END"
    else:
        counted = f"CAST(NULL AS {target})"
    return (
        f"CASE WHEN {zero_date_sql(text)} THEN CAST(NULL AS {target}) "
        f"WHEN {text} RLIKE {count} THEN {counted} "
        f"WHEN {text} RLIKE {iso} THEN try_cast({text} AS {target}) END"
    )


def zero_date_sql(text: str) -> str:
    """Whether ``text`` is MySQL's zero date (``0000-00-00...``): a temporal value with no
    value downstream, written as NULL and not a value that does not fit."""
    return f"startswith({text}, {string(ZERO_DATE)})"


def debezium_member_expr(t: ColumnType, text: str, binlog: str) -> str:
    """``text`` (an ENUM or SET value, as text) with the member Debezium named by its own
    parse of the DDL mapped back to the member itself, where ``binlog`` (a condition) says
    the value is such a name: a Debezium row read from the binlog, not a snapshot row
    (``schemas.debezium_enum``). A SET value is its members joined by commas (a SET
    member has none), each mapped. ``text`` itself when no member of ``t`` needs it (no
    backslash, quote, double quote, comma or control character MySQL escapes), and for
    every other type: nothing is added to a row's work then."""
    mapping = value_map(t.members) if t.base in ("ENUM", "SET") else {}
    if not mapping:
        return text
    whens = " ".join(f"WHEN {string(k)} THEN {string(v)}" for k, v in mapping.items())
    if t.base == "ENUM":
        mapped = f"CASE {text} {whens} ELSE {text} END"
    else:
        mapped = (
            f"array_join(transform(split({text}, ','), _em -> CASE _em {whens} ELSE _em END), ',')"
        )
    return f"CASE WHEN {binlog} THEN {mapped} ELSE {text} END"


def literal_expr(t: ColumnType, sql_literal: str) -> str:
    """A MySQL literal (a default or the implicit value, as ``schemas`` normalises it:
    ``NULL``, ``CURRENT_TIMESTAMP``, a number, a quoted string) as a Spark SQL
    expression of the column's Delta type."""
    if sql_literal.upper() == "NULL":
        return literal(None, delta_type(t))
    if sql_literal.upper().startswith("CURRENT_TIMESTAMP"):
        return f"CAST(current_timestamp() AS {delta_type(t)})"
    raw = literal_bytes(t, sql_literal)
    if raw is not None:  # a BIT, BINARY or BLOB value: its bytes, known here
        return f"X'{raw.hex()}'"
    quoted = len(sql_literal) >= 2 and sql_literal[0] == sql_literal[-1] == "'"
    text = string_value(sql_literal) if quoted else sql_literal
    if t.base in ("DATE", "DATETIME", "TIMESTAMP"):
        if text.startswith(ZERO_DATE):
            # MySQL's zero date has no Spark value: NULL is the closest honest value.
            return literal(None, delta_type(t))
        # A default the server took (``'2024-1-1'`` too): Spark's own cast, which fails
        # loudly on what it cannot read rather than fill every row with NULL.
        return f"CAST({string(text)} AS {delta_type(t)})"
    return value_expr(t, string(text))


def schema_ddl(schema: TableSchema) -> str:
    """The column list of a CREATE TABLE for Delta: ``id INT, a STRING, ...``."""
    return ", ".join(f"{ident(c.name)} {delta_type(c.type)}" for c in schema.columns)


# Delta 4.x type widening ("Delta type widening", docs.delta.io): the changes
# ALTER COLUMN ... TYPE makes in place, without rewriting data files.
_WIDER = {
    "TINYINT": {"SMALLINT", "INT", "BIGINT", "DOUBLE"},
    "SMALLINT": {"INT", "BIGINT", "DOUBLE"},
    "INT": {"BIGINT", "DOUBLE"},
    "FLOAT": {"DOUBLE"},
    "DATE": {"TIMESTAMP_NTZ"},
}
# An integer becomes a decimal with at least this many integer digits (the docs' "minimum
# target": DECIMAL(10,0) for byte, short and int, DECIMAL(20,0) for long).
_INTEGER_DIGITS = {"TINYINT": 10, "SMALLINT": 10, "INT": 10, "BIGINT": 20}
_DECIMAL = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


def widens_in_place(current: str, wanted: str) -> bool:
    """Whether Delta changes a column of type ``current`` to ``wanted`` in place (both
    Spark SQL type names, as :func:`delta_type` writes them). DECIMAL(p, s) goes to
    DECIMAL(p + k1, s + k2) only when k1 >= k2 >= 0: never fewer integer digits, never
    less scale; so DECIMAL(5,2) -> DECIMAL(5,3) needs a rewrite."""
    current, wanted = current.replace(" ", "").upper(), wanted.replace(" ", "").upper()
    if wanted in _WIDER.get(current, ()):
        return True
    to = _DECIMAL.match(wanted)
    if to is None:
        return False
    precision, scale = int(to.group(1)), int(to.group(2))
    if current in _INTEGER_DIGITS:
        return precision - scale >= _INTEGER_DIGITS[current]
    was = _DECIMAL.match(current)
    if was is None:
        return False
    p0, s0 = int(was.group(1)), int(was.group(2))
    return scale >= s0 and precision - scale >= p0 - s0
