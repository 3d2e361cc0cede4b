"""Internal: sqlglot column types and literals as normalised model values.

One MySQL type has many spellings; these functions give each meaning one value, so that
equal meaning compares equal (``INT(11)`` is ``INT``, ``NUMERIC`` is ``DECIMAL(10,0)``,
``utf8`` is ``utf8mb3``). Type names follow
https://dev.mysql.com/doc/refman/8.0/en/data-types.html.
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from schemas.model import (
    CHARSET_TYPES,
    FLOAT_TYPES,
    INTEGER_TYPES,
    TIME_TYPES,
    ColumnType,
    sql_string,
    string_value,
)

__all__ = [
    "CURRENT_TIMESTAMP",
    "charset_name",
    "collation_name",
    "column_type",
    "default_literal",
    "inherit_charset",
    "literal_for",
]

CURRENT_TIMESTAMP = "CURRENT_TIMESTAMP"
# The collation of ``CHAR(n) BINARY`` until the charset it is the binary collation of is
# known (never left in a schema: inherit_charset resolves it).
BINARY_COLLATION = "_bin"
DT = exp.DType

# sqlglot's type -> (MySQL base name, unsigned, charset the type implies).
_BASES: dict[DT, tuple[str, bool, str | None]] = {
    DT.TINYINT: ("TINYINT", False, None),
    DT.UTINYINT: ("TINYINT", True, None),
    DT.BOOLEAN: ("TINYINT", False, None),
    DT.SMALLINT: ("SMALLINT", False, None),
    DT.USMALLINT: ("SMALLINT", True, None),
    DT.MEDIUMINT: ("MEDIUMINT", False, None),
    DT.UMEDIUMINT: ("MEDIUMINT", True, None),
    DT.INT: ("INT", False, None),
    DT.UINT: ("INT", True, None),
    DT.BIGINT: ("BIGINT", False, None),
    DT.UBIGINT: ("BIGINT", True, None),
    DT.DECIMAL: ("DECIMAL", False, None),
    DT.UDECIMAL: ("DECIMAL", True, None),
    DT.FLOAT: ("FLOAT", False, None),
    DT.DOUBLE: ("DOUBLE", False, None),
    DT.UDOUBLE: ("DOUBLE", True, None),
    DT.BIT: ("BIT", False, None),
    DT.CHAR: ("CHAR", False, None),
    DT.NCHAR: ("CHAR", False, "utf8mb3"),
    DT.VARCHAR: ("VARCHAR", False, None),
    DT.NVARCHAR: ("VARCHAR", False, "utf8mb3"),
    DT.BINARY: ("BINARY", False, None),
    DT.VARBINARY: ("VARBINARY", False, None),
    DT.TINYTEXT: ("TINYTEXT", False, None),
    DT.TEXT: ("TEXT", False, None),
    DT.MEDIUMTEXT: ("MEDIUMTEXT", False, None),
    DT.LONGTEXT: ("LONGTEXT", False, None),
    DT.TINYBLOB: ("TINYBLOB", False, None),
    DT.BLOB: ("BLOB", False, None),
    DT.MEDIUMBLOB: ("MEDIUMBLOB", False, None),
    DT.LONGBLOB: ("LONGBLOB", False, None),
    DT.DATE: ("DATE", False, None),
    DT.DATETIME: ("DATETIME", False, None),
    DT.TIMESTAMP: ("TIMESTAMP", False, None),
    DT.TIMESTAMPTZ: ("TIMESTAMP", False, None),  # sqlglot's MySQL TIMESTAMP
    DT.TIME: ("TIME", False, None),
    DT.YEAR: ("YEAR", False, None),
    DT.JSON: ("JSON", False, None),
    DT.ENUM: ("ENUM", False, None),
    DT.SET: ("SET", False, None),
    DT.GEOMETRY: ("GEOMETRY", False, None),
}

# Types whose length MySQL defaults to 1 when none is written (CHAR is CHAR(1)).
_LENGTH_ONE = ("CHAR", "BINARY", "BIT")
_BINARY_OF = {
    "CHAR": "BINARY",
    "VARCHAR": "VARBINARY",
    "TINYTEXT": "TINYBLOB",
    "TEXT": "BLOB",
    "MEDIUMTEXT": "MEDIUMBLOB",
    "LONGTEXT": "LONGBLOB",
}
NUMERIC_TYPES = (*INTEGER_TYPES, *FLOAT_TYPES, "DECIMAL", "BIT", "YEAR")


class UnsupportedType(ValueError):
    """A type sqlglot parsed that has no MySQL meaning here; the caller names the statement."""


def charset_name(name: str) -> str:
    """``utf8`` is ``utf8mb3`` (MySQL 8 reports it so); names are case-insensitive."""
    name = name.lower()
    return "utf8mb3" if name == "utf8" else name


def collation_name(name: str) -> str:
    name = name.lower()
    return "utf8mb3" + name[4:] if name.startswith("utf8_") else name


def charset_of(collation: str) -> str:
    """The charset a collation belongs to (``utf8mb4_bin`` -> ``utf8mb4``)."""
    return collation.split("_", 1)[0]


def column_type(kind: exp.DataType, constraints: list[exp.Expression]) -> ColumnType:
    """The normalised type of a sqlglot type and its column constraints.

    Charset/collation here are only the ones written on the column (or implied by a
    COLLATE, or by NCHAR); :func:`inherit_charset` adds the table's.
    """
    if kind.this not in _BASES:
        raise UnsupportedType(f"unsupported type {kind.sql(dialect='mysql')}")
    base, unsigned, charset = _BASES[kind.this]
    params = [p.this if isinstance(p, exp.DataTypeParam) else p for p in kind.expressions]
    members: tuple[str, ...] = ()
    length = scale = None
    if base in ("ENUM", "SET"):
        members = tuple(_string(p) for p in params)
    else:
        numbers = [_int(p) for p in params]
        length = numbers[0] if numbers else None
        scale = numbers[1] if len(numbers) > 1 else None
    if base in INTEGER_TYPES or base in ("YEAR", "DOUBLE") or base.endswith(("TEXT", "BLOB")):
        # Display widths, DOUBLE(M,D) and TEXT(M) do not change what a column holds here.
        length = scale = None
    elif base == "FLOAT":
        base = "DOUBLE" if length is not None and scale is None and length > 24 else base
        length = scale = None
    elif base == "DECIMAL":
        length, scale = (10 if length is None else length), (scale or 0)
    elif base in TIME_TYPES and length == 0:
        length = None
    elif base in _LENGTH_ONE and length is None:
        length = 1
    zerofill = any(isinstance(c, exp.ZeroFillColumnConstraint) for c in constraints)
    collation = None
    for c in constraints:
        if isinstance(c, exp.CharacterSetColumnConstraint):
            charset = charset_name(c.this.name)
        elif isinstance(c, exp.CollateColumnConstraint):
            collation = collation_name(c.this.name)
    if collation and not charset:
        charset = charset_of(collation)
    if any(isinstance(c, exp.BinaryColumnConstraint) for c in constraints) and collation is None:
        # ``VARCHAR(n) BINARY`` is the binary collation of the column's charset (the table's
        # when the column names none: resolved by inherit_charset).
        collation = f"{charset}_bin" if charset else BINARY_COLLATION
    if charset == "binary" and base in _BINARY_OF:
        # CHARACTER SET binary makes the binary type (CHAR(3) -> BINARY(3)), as MySQL does.
        base, charset, collation = _BINARY_OF[base], None, None
    if base not in CHARSET_TYPES and charset is not None:
        raise UnsupportedType(f"{base} has no character set")
    return ColumnType(
        base=base,
        length=length,
        scale=scale if base == "DECIMAL" else None,
        unsigned=unsigned or zerofill,  # ZEROFILL implies UNSIGNED in MySQL
        zerofill=zerofill,
        charset=charset,
        collation=collation,
        members=members,
    )


def inherit_charset(ctype: ColumnType, charset: str | None, collation: str | None) -> ColumnType:
    """A character type without its own charset takes the table's, as MySQL stores it;
    the BINARY attribute takes that charset's binary collation. Without a table charset
    (the database default, not known here) BINARY is dropped."""
    if ctype.base not in CHARSET_TYPES or ctype.charset is not None:
        return ctype
    if ctype.collation == BINARY_COLLATION:
        collation = f"{charset}_bin" if charset else None
    return dataclasses.replace(ctype, charset=charset, collation=collation if charset else None)


def _int(node: exp.Expr) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit():
        return int(node.name)
    raise UnsupportedType(f"expected a number, got {node.sql(dialect='mysql')}")


def _string(node: exp.Expr) -> str:
    if isinstance(node, exp.Literal) and node.is_string:
        return node.name
    raise UnsupportedType(f"expected a string, got {node.sql(dialect='mysql')}")


def default_literal(node: exp.Expression) -> str | None:
    """A default expression as normalised SQL text; None for ``NULL``."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Literal):
        return sql_string(node.name) if node.is_string else _number(node.name)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return _number("-" + node.this.name)
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, exp.National):
        return sql_string(node.name)
    if isinstance(node, exp.Introducer):
        return default_literal(node.expression)
    if isinstance(node, exp.CurrentTimestamp | exp.Localtime | exp.Localtimestamp) or (
        isinstance(node, exp.Anonymous) and node.name.upper() == "NOW"
    ):
        args = [
            a for a in (node.args.get("this"), *node.expressions) if isinstance(a, exp.Expression)
        ]
        fsp = _int(args[0]) if args else 0
        return f"{CURRENT_TIMESTAMP}({fsp})" if fsp else CURRENT_TIMESTAMP
    return node.sql(dialect="mysql")


def _number(text: str) -> str:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return text
    if value == 0:
        return "0"
    return format(value.normalize(), "f")


def literal_for(text: str | None, ctype: ColumnType) -> str | None:
    """A default literal as the column's type stores it: ``'5'`` on an INT is ``5``, ``5``
    on a VARCHAR is ``'5'`` (MySQL converts a default to the column's type)."""
    if text is None:
        return None
    quoted = text.startswith("'") and text.endswith("'") and len(text) >= 2
    if ctype.base == "YEAR":
        year = _year(text[1:-1] if quoted else text, quoted)
        if year is not None:
            return year
    if ctype.base == "TIME":
        clock = _time(string_value(text) if quoted else text)
        if clock is not None:
            return sql_string(clock)
    if ctype.base == "SET" and quoted:
        members = _set(string_value(text), ctype.members)
        if members is not None:
            return sql_string(members)
    if ctype.base in ("DATE", "DATETIME", "TIMESTAMP"):
        written = _temporal(text[1:-1] if quoted else _padded(text), ctype)
        if written is not None:
            return sql_string(written)
    if ctype.base in NUMERIC_TYPES and ctype.base != "BIT" and quoted:
        return _number(text[1:-1]) if _is_number(text[1:-1]) else text
    if ctype.base not in NUMERIC_TYPES and not quoted and _is_number(text):
        return sql_string(text)
    return text


# MySQL's date and time literals: any punctuation between the parts ('2024/1/5',
# '2024-01-05T10.30.00', '24-1-5'), or none ('20240105', '240105', '20240105103000',
# '240105103000'), a fraction after a dot. A two-digit year is 2000-2069 for 00-69 and
# 1970-1999 for 70-99, as the server reads it ("Date and Time Literals", MySQL manual).
_P = r"[!-/:-@\[-`{-~]"  # one ASCII punctuation character
_RELAXED = re.compile(
    rf"(\d{{4}}|\d{{2}}){_P}(\d{{1,2}}){_P}(\d{{1,2}})"
    rf"(?:[ T](\d{{1,2}}){_P}(\d{{1,2}}){_P}(\d{{1,2}})(?:\.(\d*))?)?"
)
_COMPACT = re.compile(r"(\d{4}|\d{2})(\d{2})(\d{2})(?:(\d{2})(\d{2})(\d{2})(?:\.(\d*))?)?")
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def day_exists(year: int, month: int, day: int) -> bool:
    """Whether the day is one of the proleptic Gregorian calendar (year 0 a leap year)."""
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= day <= _MONTH_DAYS[month - 1] + (month == 2 and leap)


def _parts(value: str) -> tuple[str, str | None, str] | None:
    """``value`` as ``('YYYY-MM-DD', 'hh:mm:ss' or None, fraction)``, for a literal of
    a day (and time) that exists; None for anything else."""
    m = _RELAXED.fullmatch(value) or _COMPACT.fullmatch(value)
    if m is None:
        return None
    y, mo, d = (int(g) for g in m.group(1, 2, 3))
    if len(m.group(1)) == 2:
        y += 2000 if y < 70 else 1900
    if not day_exists(y, mo, d):
        return None
    day = f"{y:04d}-{mo:02d}-{d:02d}"
    if m.group(4) is None:
        return day, None, ""
    h, mi, sec = (int(g) for g in m.group(4, 5, 6))
    if h > 23 or mi > 59 or sec > 59:
        return None
    return day, f"{h:02d}:{mi:02d}:{sec:02d}", m.group(7) or ""


def _temporal(value: str, ctype: ColumnType) -> str | None:
    """A DATE, DATETIME or TIMESTAMP default as the server stores and prints it, for the
    forms whose reading is certain: zero (``DEFAULT 0``) is the zero date; a day (and
    time), its parts apart by any punctuation or by none (``'2024/1/5'``, ``20240105``,
    ``'24-1-5'``, ``240105``: a two-digit year is 2000-2069 or 1970-1999), is written
    ``2024-01-05``; a DATETIME or TIMESTAMP
    of a day alone is its midnight; and a fraction shorter than the column's is padded
    with zeros (``DATETIME(3) DEFAULT '2020-01-01'`` is ``'2020-01-01 00:00:00.000'``).
    None for any other value: it stays as written."""
    digits = ctype.length or 0
    zero = _is_number(value) and Decimal(value) == 0
    parts = None if zero else _parts(value)
    if ctype.base == "DATE":
        if zero:
            return "0000-00-00"
        return parts[0] if parts is not None else None
    if zero:
        moment, fraction = "0000-00-00 00:00:00", ""
    elif parts is not None:
        moment, fraction = f"{parts[0]} {parts[1] or '00:00:00'}", parts[2]
    else:
        return None
    if len(fraction) > digits:
        return None  # the server rounds it: left as written
    return f"{moment}.{fraction.ljust(digits, '0')}" if digits else moment


# The ranges of a number MySQL reads as a day, or a day and time (number_to_datetime in
# its sql-common/my_time.c): each padded with zeros to the digits of its form (YYMMDD,
# YYYYMMDD, YYMMDDhhmmss, YYYYMMDDhhmmss); a number between them is no date.
_NUMBER_FORMS = (
    (101, 691231, 6),
    (700101, 991231, 6),
    (10000101, 99999999, 8),
    (101000000, 691231235959, 12),
    (700101000000, 991231235959, 12),
    (10000101000000, 99991231235959, 14),
)


def _padded(text: str) -> str:
    """A number given as a temporal default, with the leading zeros of the form MySQL
    reads it in (``10105`` is ``010105``, 2001-01-05); anything else as it is."""
    digits, dot, fraction = text.partition(".")
    if not digits.isdigit() or not digits.isascii() or (dot and not fraction.isdigit()):
        return text
    n = int(digits)
    for lo, hi, width in _NUMBER_FORMS:
        if lo <= n <= hi:
            return f"{n:0{width}d}{dot}{fraction}"
    return text


def _year(value: str, quoted: bool) -> str | None:
    """A YEAR of one or two digits as the server reads it: 1-69 is 2001-2069 and 70-99
    is 1970-1999; 0 is the year 0 (0000) as a number and 2000 as a string ('0', '00').
    None for any other value: it stays as written."""
    if not re.fullmatch(r"[0-9]{1,2}", value):
        return None
    n = int(value)
    if n == 0 and not quoted:
        return "0"
    return str(2000 + n if n < 70 else 1900 + n)


# MySQL's TIME literals that are not already h:mm:ss: [-]D hh:mm[:ss[.f]] and hh:mm (a
# day is 24 hours; hh:mm has no seconds), and digits alone, [-][h...]hmmss[.f] (the last
# two digits seconds, the two before them minutes): "Date and Time Literals".
_TIME_DAYS = re.compile(r"(-?)(?:([0-9]+) +)?([0-9]+):([0-9]{1,2})(?::([0-9]{1,2})(\.[0-9]*)?)?")
_TIME_DIGITS = re.compile(r"(-?)([0-9]+)(\.[0-9]*)?")


def _time(value: str) -> str | None:
    """A TIME default in a form other than ``[-]h:mm:ss[.f]`` as the server stores and
    prints it (``101010`` and ``'10:10:10'`` are ``10:10:10``, ``'1 02:00'``
    ``26:00:00``); its fraction as written. None for ``[-]h:mm:ss[.f]`` itself, for a
    value past MySQL's 838:59:59 and for any other form: it stays as written."""
    m = _TIME_DAYS.fullmatch(value)
    if m is not None:
        sign, days, h, mi, sec, fraction = m.groups()
        if days is None and sec is not None:
            return None  # h:mm:ss already
        hours, minutes, seconds = int(h) + 24 * int(days or 0), int(mi), int(sec or 0)
    else:
        m = _TIME_DIGITS.fullmatch(value)
        if m is None:
            return None
        sign, digits, fraction = m.groups()
        n = int(digits)
        hours, minutes, seconds = n // 10_000, n // 100 % 100, n % 100
    if minutes > 59 or seconds > 59 or hours > 838:
        return None
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}{fraction or ''}"


def _set(value: str, members: tuple[str, ...]) -> str | None:
    """A SET default as the server stores it: its members in the column's order, each
    once (``'b,a'`` is ``'a,b'``). None when a part is not a member as written (the
    server compares by the column's collation): it stays as written."""
    parts = value.split(",") if value else []
    if any(p not in members for p in parts):
        return None
    return ",".join(m for m in members if m in parts)


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
    except InvalidOperation:
        return False
    return True
