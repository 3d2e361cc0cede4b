"""What the downstream can store in a column, as data: the *domain* of the Delta type each
MySQL type is stored as, and whether a row's value falls inside it.

A value outside its column's domain does not fit: the streaming job makes its row a dead
letter (``streaming/batch/rows.py``, ``_unfit``: the text of the value, as the job reads it from
the row image, did not convert to the column's Delta type in
``streaming.sql.spark_types.value_expr``); the memory engine does the same with
:func:`unfit`. The job's rules are the reference, so the domains are the Delta types', not
MySQL's: ``TINYINT UNSIGNED`` is stored as ``SMALLINT`` (300 fits), ``MEDIUMINT`` as ``INT``,
and ``VARCHAR(3)``, ``ENUM`` and ``SET`` as ``STRING``: a longer string or a value no
member names is written as it is. A temporal value is read in the forms CDC tools write
(:class:`Temporal`); any other text, or a day or time that does not exist, does not fit
(before, Spark's ANSI cast raised and failed the batch again and again).
``tests/unit/test_storage.py`` checks that :func:`storage` names the type ``delta_type``
does for every type; ``tests/integration/test_value_fit.py`` checks :meth:`Domain.admits`
against Spark's casts.

The domains:

- :class:`Integral`: a Spark integer type between ``lo`` and ``hi``; the text of an integer
  (a trailing ``.0`` taken off first, as a DOUBLE or DECIMAL shard column writes ``2.0``);
- :class:`Fixed`: ``DECIMAL(p, s)``: a decimal number, rounded half up to ``s`` places,
  with at most ``p`` digits;
- :class:`Floating`: ``FLOAT``/``DOUBLE``: any number Java parses (too large is infinity,
  not unfit), ``NaN`` and ``Infinity`` included;
- :class:`Temporal`: ``DATE``, ``TIMESTAMP_NTZ`` (DATETIME) and ``TIMESTAMP``: a count
  since the epoch (days; milliseconds or microseconds) within years 0 .. 9999, or ISO text
  (``2024-02-29``, ``2024-02-29 10:00:00.5``, ``2024-02-29T10:00:00Z``, an offset up to
  18 hours) naming a day and time that exist; MySQL's zero date is admitted and written
  as NULL (it has no value downstream);
- :class:`Bytes`: ``BINARY``, from a CDC tool's base64 text (:data:`BASE64`: the standard
  alphabet, padded; Debezium's ``binary.handling.mode=bytes``): a text that is not such
  base64 is unfit, never decoded leniently nor a failed batch. A ``BIT`` value may also be
  Debezium's ``true``/``false`` (BIT(1)), and a spatial one a ``{"wkb": ...}`` object;
- :class:`Free`: strings: every value.

**A database sink holds less than Delta does** (``sink: {kind: jdbc}``): a MariaDB or
MySQL table keeps the shard's own types, so ``VARCHAR(3)`` refuses a fourth character and
``TINYINT UNSIGNED`` refuses 300 or -1 (strict mode: the statement fails, which would fail
the batch again and again); PostgreSQL's ``VARCHAR(n)`` and ``CHAR(n)`` refuse longer
strings too (its integers are the next wider signed type: what Delta holds, but for
``YEAR``, a ``SMALLINT`` there). :func:`limit` gives, per dialect, what a column of the
table refuses, or would store changed, beyond its Delta domain (:class:`Limit`): at most
``chars`` characters; an integer between ``lo`` and ``hi`` (MySQL's unsigned and
``MEDIUMINT`` ranges, ``YEAR``'s 1901 .. 2155 and 0); on MariaDB and MySQL the byte
limits of ``TINYTEXT``/``TEXT``/``MEDIUMTEXT`` (UTF-8 bytes under a ``utf8*`` character
set, a byte a character under ``latin1``/``ascii``), of ``TINYBLOB``/``BLOB``/
``MEDIUMBLOB`` and of ``BINARY(n)``/``VARBINARY(n)`` (the bytes of the base64 text),
no character past U+FFFF under ``utf8mb3`` or ``ucs2``, only characters ``latin1`` or
``ascii`` encode under those, an ``ENUM`` value one of the members as written, a ``SET``
value naming only members, a ``DECIMAL`` wider than 38 digits (text on Delta) a plain
decimal number the column holds, a ``FLOAT`` or ``DOUBLE`` a number (no NaN, no infinity:
Spark's ``FLOAT`` past its range is one), a ``JSON`` text that is JSON (RFC 8259:
:func:`json_valid`; on PostgreSQL too), nested at most 31 deep on MariaDB (its JSON
check) and 100 on MySQL. A value past it
is unfit as well, with the same reason (the job: ``streaming.batch.rows``, from the
sink's dialect). A string is judged by its characters, trailing spaces included (the
databases would drop excess spaces silently: the row is a dead letter instead, never
changed on the way). Characters a column's character set cannot encode are judged for
the character sets of :func:`repertoire` (the single-byte ones with a Python codec of
the same table, and the multi-byte ``gbk``, ``gb2312``, ``big5``, ``euckr``, ``sjis``,
``cp932``, ``ujis``, ``eucjpms``; checked against MariaDB for every code point of the
basic plane), and a ``TEXT`` type's byte limit in them and in ``ucs2``, ``utf16``,
``utf16le``, ``utf32`` (:func:`wider`: each character's bytes, checked likewise). Not
judged yet (a value past them fails the batch and names the column): the single-byte
sets no Python codec has (``dec8``, ``hp8``, ``swe7``, ``armscii8``, ``keybcs2``,
``geostd8``), and a number in a JSON text that MySQL's JSON (a DOUBLE) does not hold
(MariaDB's JSON is text; PostgreSQL's numbers are judged: :func:`json_numbers_fit`).
A shorter ``BINARY(n)`` value is stored padded with zero bytes, as upstream pads it.
"""

from __future__ import annotations

import binascii
import datetime as dt
import decimal
import functools
import json
import math
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from schemas._apply import TEXT_BYTES
from schemas._types import day_exists
from schemas.dialects import DEFAULT_CHARSET, mysql_family
from schemas.model import SPATIAL_TYPES, Column, ColumnType, string_value

__all__ = [
    "BASE64",
    "CHARSETS",
    "JSON_ARRAY",
    "JSON_BLANK",
    "JSON_CONTROL",
    "JSON_DEPTH",
    "JSON_ESCAPES",
    "JSON_NUMBER",
    "JSON_OBJECT",
    "JSON_PATTERNS",
    "JSON_SCALAR",
    "JSON_STRING",
    "PG_NUMERIC_DIGITS",
    "PG_NUMERIC_EXPONENT",
    "PG_NUMERIC_SCALE",
    "PLAIN_DECIMAL",
    "TEMPORAL_COUNT",
    "TEMPORAL_COUNTS",
    "TEMPORAL_TEXT",
    "TIME_COUNT",
    "TIME_COUNT_DIGITS",
    "TIME_TEXT",
    "ZERO_DATE",
    "Bytes",
    "Domain",
    "Fixed",
    "Floating",
    "Free",
    "Integral",
    "Limit",
    "Temporal",
    "bit_length",
    "characters",
    "charset_bytes",
    "floating",
    "json_depth",
    "json_numbers_fit",
    "json_valid",
    "limit",
    "literal_bytes",
    "moment",
    "pg_numeric_fits",
    "repertoire",
    "storage",
    "time_micros",
    "unfit",
    "value_text",
    "wide_decimal_fits",
    "wider",
]

# Java's String.trim and Spark's UTF8String.trimAll drop these around a number.
_SPACE = "".join(chr(c) for c in range(0x21))
# java.math.BigDecimal's grammar (what Spark's string -> DECIMAL cast parses).
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
# Double.parseDouble's decimal grammar: a type suffix allowed (no hex floats here).
_FLOATING = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)", re.ASCII)
# Spark's own spellings of the special values (Cast.processFloatingPointSpecialLiterals).
_SPECIAL = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_TRAILING_ZEROS = re.compile(r"[.]0+$")  # value_expr's regexp_replace


@dataclass(frozen=True)
class Integral:
    """A Spark integer type: ``try_cast(regexp_replace(text, '[.]0+$', '') AS sql)``."""

    sql: str
    lo: int
    hi: int

    def admits(self, text: str) -> bool:
        digits = _TRAILING_ZEROS.sub("", text).strip(_SPACE)
        return _INTEGER.fullmatch(digits) is not None and self.lo <= int(digits) <= self.hi


@dataclass(frozen=True)
class Fixed:
    """``DECIMAL(precision, scale)``: ``try_cast(text AS DECIMAL(p,s))``, which rounds half
    up to the scale and gives NULL past the precision."""

    precision: int
    scale: int

    @property
    def sql(self) -> str:
        return f"DECIMAL({self.precision},{self.scale})"

    def admits(self, text: str) -> bool:
        text = text.strip(_SPACE)
        if _NUMBER.fullmatch(text) is None:
            return False
        value = Decimal(text)
        if value and value.adjusted() >= 38:
            return False  # more integer digits than any Spark decimal has (and Spark stops)
        with decimal.localcontext() as ctx:
            ctx.prec = 2 * 38 + 2
            rounded = value.quantize(Decimal(1).scaleb(-self.scale), decimal.ROUND_HALF_UP)
        return len(rounded.as_tuple().digits) <= self.precision


@dataclass(frozen=True)
class Floating:
    """``FLOAT``/``DOUBLE``: ``try_cast(text AS FLOAT)`` (Java's parse, then Spark's
    spellings of infinity and NaN)."""

    sql: str

    def admits(self, text: str) -> bool:
        return floating(text, self.sql) is not None


def floating(text: str, sql: str) -> float | None:
    """The number a ``FLOAT``/``DOUBLE`` (``sql``) value's text is in Spark, as
    :class:`Floating` reads it (past a FLOAT's range, infinity); None if it is none."""
    text = text.strip(_SPACE)
    if text.lower() in _SPECIAL:
        return math.nan if "nan" in text.lower() else -math.inf if text[0] == "-" else math.inf
    if _FLOATING.fullmatch(text) is None:
        return None
    value = float(text.rstrip("fFdD"))
    if sql == "FLOAT" and math.isfinite(value):
        try:  # the nearest float, as Java's parse rounds (infinity past the largest)
            (value,) = struct.unpack("f", struct.pack("f", value))
        except OverflowError:  # where struct refuses instead
            return math.copysign(math.inf, value)
    return value


@dataclass(frozen=True)
class Free:
    """A type every value the job reads converts to (strings)."""

    sql: str

    def admits(self, text: str) -> bool:
        return True


# Base64 as CDC tools write bytes: the standard alphabet, padded, nothing else (Java's
# decoder that Spark's unbase64 uses would skip other characters and fail on a short last
# unit: the job judges the text first). Possessive: the same text is a Java regex, which
# would otherwise recurse once per group of four.
BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


@dataclass(frozen=True)
class Bytes:
    """``BINARY`` from base64 text (:data:`BASE64`). ``kind``: ``bit`` also takes
    Debezium's ``true``/``false`` of a BIT(1); ``spatial`` reads the base64 of a
    ``{"wkb": ..., "srid": ...}`` object's ``wkb`` (as Spark's ``get_json_object``), or of
    the text itself."""

    sql: str = "BINARY"
    kind: str = "bytes"

    def admits(self, text: str) -> bool:
        if self.kind == "bit" and text in ("true", "false"):
            return True
        if self.kind == "spatial":
            text = _wkb(text)
        return BASE64.fullmatch(text) is not None


def _wkb(text: str) -> str:
    """The ``wkb`` member of a JSON object (its JSON text when not a string), else the
    text: ``coalesce(get_json_object(text, '$.wkb'), text)``."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict) or value.get("wkb") is None:
        return text
    wkb = value["wkb"]
    return wkb if isinstance(wkb, str) else json.dumps(wkb, separators=(",", ":"))


# The forms a temporal value is read in: a count since the epoch (Debezium's DATE in days,
# DATETIME in milliseconds, or microseconds past three fraction digits), or ISO text as
# Debezium (TIMESTAMP), Canal and Maxwell write it, a day with an optional time of day, its
# fraction and, with the time, its zone. The job matches them with Java's regex (``\z``:
# the very end, as Python's fullmatch), so both engines read the same texts.
TEMPORAL_COUNT = r"-?[0-9]+"
_CLOCK = r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.][0-9]{1,9})?"
TEMPORAL_TEXT = (
    rf"[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}(?:[ T]{_CLOCK}(?:Z|[+-][0-9]{{2}}:[0-9]{{2}})?)?"
)
# MySQL's zero date (``0000-00-00``, ``0000-00-00 00:00:00``): no value downstream, NULL
# (as a zero-date default is), not a dead letter.
ZERO_DATE = "0000-00-00"
# The counts the job takes: years 0 .. 9999, what a four-digit year of the text names.
_FIRST_DAY, _LAST_DAY = -719528, 2932896  # 0000-01-01 and 9999-12-31, in days since 1970
_FIRST_MS, _LAST_MS = _FIRST_DAY * 86_400_000, (_LAST_DAY + 1) * 86_400_000 - 1
TEMPORAL_COUNTS = {
    "DATE": (_FIRST_DAY, _LAST_DAY),
    "ms": (_FIRST_MS, _LAST_MS),
    "us": (_FIRST_MS * 1000, _LAST_MS * 1000 + 999),
}
# TEMPORAL_TEXT's parts: day, time, fraction, zone sign, hours and minutes
_MOMENT = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.]([0-9]+))?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))?)?"
)


@dataclass(frozen=True)
class Temporal:
    """``DATE``, ``TIMESTAMP_NTZ`` (a DATETIME; ``micros``: its count is in microseconds)
    or ``TIMESTAMP``: a count since the epoch (not for a TIMESTAMP) within years 0 .. 9999,
    or :data:`TEMPORAL_TEXT` naming a real day (the proleptic Gregorian calendar), time of
    day and zone offset (at most 18 hours), as Spark's casts read them (a DATE reads the
    day and leaves the rest); the zero date is admitted (it is NULL downstream)."""

    sql: str
    micros: bool = False

    def admits(self, text: str) -> bool:
        if text.startswith(ZERO_DATE):
            return True
        if re.fullmatch(TEMPORAL_COUNT, text):
            if self.sql == "TIMESTAMP":
                return False
            kind = "DATE" if self.sql == "DATE" else ("us" if self.micros else "ms")
            lo, hi = TEMPORAL_COUNTS[kind]
            return lo <= int(text) <= hi
        m = _MOMENT.fullmatch(text)
        if m is None or not re.fullmatch(TEMPORAL_TEXT, text):
            return False
        if not day_exists(*(int(g) for g in m.group(1, 2, 3))):
            return False
        if self.sql == "DATE" or m.group(4) is None:
            return True
        hour, minute, second = (int(g) for g in m.group(4, 5, 6))
        if hour > 23 or minute > 59 or second > 59:
            return False
        if m.group(8) is not None:
            oh, om = int(m.group(9)), int(m.group(10))
            return om <= 59 and oh * 60 + om <= 18 * 60
        return True


Domain = Integral | Fixed | Floating | Bytes | Free | Temporal


def _days(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian day (year 0 included)."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def moment(text: str, kind: str) -> int | None:
    """The microseconds since 1970-01-01 00:00 a temporal value names (UTC for a zoned
    text; the wall clock as if UTC otherwise), for a value :class:`Temporal` admits:
    ``kind`` is how a count is read (``DATE``: days, ``ms``, ``us``; ``TIMESTAMP``: no
    count). None for the zero date."""
    if text.startswith(ZERO_DATE):
        return None
    if re.fullmatch(TEMPORAL_COUNT, text):
        return int(text) * {"DATE": 86_400_000_000, "ms": 1000, "us": 1}[kind]
    m = _MOMENT.fullmatch(text)
    if m is None:
        return None
    y, mo, d = (int(g) for g in m.group(1, 2, 3))
    micros = _days(y, mo, d) * 86_400_000_000
    if kind == "DATE" or m.group(4) is None:
        return micros
    h, mi, sec = (int(g) for g in m.group(4, 5, 6))
    micros += ((h * 60 + mi) * 60 + sec) * 1_000_000 + int((m.group(7) or "0")[:6].ljust(6, "0"))
    if m.group(8) is not None:
        offset = (int(m.group(9)) * 60 + int(m.group(10))) * 60_000_000
        micros -= offset if m.group(8) == "+" else -offset
    return micros


_INTEGRAL = {
    "TINYINT": Integral("TINYINT", -(2**7), 2**7 - 1),
    "SMALLINT": Integral("SMALLINT", -(2**15), 2**15 - 1),
    "INT": Integral("INT", -(2**31), 2**31 - 1),
    "BIGINT": Integral("BIGINT", -(2**63), 2**63 - 1),
}
# As streaming.sql.spark_types stores them: an unsigned type in the next wider signed one.
_SIGNED = {"TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "MEDIUMINT": "INT", "INT": "INT",
           "BIGINT": "BIGINT"}  # fmt: skip
_UNSIGNED: dict[str, Domain] = {
    "TINYINT": _INTEGRAL["SMALLINT"],
    "SMALLINT": _INTEGRAL["INT"],
    "MEDIUMINT": _INTEGRAL["INT"],
    "INT": _INTEGRAL["BIGINT"],
    "BIGINT": Fixed(20, 0),
}
_BYTES = ("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "BIT", "VECTOR")


def storage(t: ColumnType) -> Domain:
    """The domain of the Delta type a column of type ``t`` is stored as (its ``sql`` is
    ``streaming.sql.spark_types.delta_type(t)``)."""
    if t.base in _SIGNED:
        return _UNSIGNED[t.base] if t.unsigned else _INTEGRAL[_SIGNED[t.base]]
    if t.base == "DECIMAL":
        precision, scale = t.length or 10, t.scale or 0
        # Spark decimals stop at 38 digits; wider MySQL decimals are kept as text.
        return Fixed(precision, scale) if precision <= 38 else Free("STRING")
    if t.base in ("FLOAT", "DOUBLE"):
        return Floating(t.base)
    if t.base == "YEAR":
        return _INTEGRAL["INT"]
    if t.base == "DATE":
        return Temporal("DATE")
    if t.base == "DATETIME":
        return Temporal("TIMESTAMP_NTZ", micros=(t.length or 0) > 3)
    if t.base == "TIMESTAMP":
        return Temporal("TIMESTAMP")
    if t.base == "BIT":
        return Bytes(kind="bit")
    if t.base in SPATIAL_TYPES:
        return Bytes(kind="spatial")
    if t.base in _BYTES:
        return Bytes()
    return Free("STRING")


@dataclass(frozen=True)
class Limit:
    """What a database column refuses beyond its Delta domain (each None or empty: no such
    bound): a string of more than ``chars`` characters; an integer outside ``lo`` ..
    ``hi`` but for those in ``also``; more than ``max_bytes`` bytes (a string's in UTF-8,
    or, with ``base64``, the bytes its base64 text holds); with ``bmp``, a character
    outside Unicode's basic plane (MySQL's three-byte ``utf8mb3``); with ``members``, a
    string that is not one of them as written (ENUM: the database would refuse it, or
    store the member its collation matches); with ``set_members``, a comma-separated
    list naming anything else (SET; the database keeps a set's members in its own order,
    each once: the same set); with ``outside``, a character its pattern finds (one a
    column's character set cannot encode, :func:`repertoire`); with ``cs_bytes``, more
    bytes than that in the column's character set (:func:`charset_bytes`); with
    ``json_depth``, a JSON text nested deeper than that (:func:`json_depth`)."""

    chars: int | None = None
    lo: int | None = None
    hi: int | None = None
    also: tuple[int, ...] = ()
    max_bytes: int | None = None
    base64: bool = False
    bmp: bool = False
    members: tuple[str, ...] | None = None
    set_members: tuple[str, ...] | None = None
    # a temporal value: how its count is read (``moment``'s kind) and the first and last
    # moment the column holds, in microseconds since 1970 (UTC for a TIMESTAMP)
    temporal: str | None = None
    moments: tuple[int, int] | None = None
    # a TIME (kept as the text the CDC tool sent): the largest magnitude it holds, in
    # microseconds, and with ``clock``, minutes and seconds below 60 (:func:`time_micros`)
    time_us: int | None = None
    clock: bool = False
    # with ``nul``, a NUL character (PostgreSQL's text types hold none); with ``json`` too,
    # the JSON escape ``\u0000`` (its jsonb refuses it, as its text would hold a NUL)
    nul: bool = False
    json: bool = False
    outside: str | None = None
    json_depth: int | None = None
    # ``FLOAT``/``DOUBLE`` (the Delta type): no NaN and no infinity (MySQL's have none)
    finite: str | None = None
    # a ``DECIMAL(p, s)`` wider than Spark's (kept as text on Delta, a decimal column in a
    # database): ``(p, s)``, the text a plain decimal number with at most ``p - s``
    # integer digits once rounded half up to ``s`` places (:func:`wide_decimal_fits`)
    wide: tuple[int, int] | None = None
    # a ``BIT(n)`` value: no more than ``bits`` significant bits (:func:`bit_length`)
    bits: int | None = None
    # a ``JSON`` value: valid JSON with these escapes (:func:`json_valid`'s ``escapes``)
    json_valid: str | None = None
    # a ``JSON`` value downstream of PostgreSQL: every number one its NUMERIC holds
    # (:func:`json_numbers_fit`)
    pg_numbers: bool = False
    # a string of more than ``cs_bytes`` bytes in a column's character set, counted as
    # :func:`charset_bytes` counts them with :func:`wider`'s classes, ``cs_wider``
    cs_bytes: int | None = None
    cs_wider: tuple[str, ...] = ()

    def admits(self, text: str) -> bool:
        """Whether the value, as its Delta domain admitted it, is inside the limit."""
        if self.time_us is not None:
            m = TIME_TEXT.fullmatch(text)
            if m is not None and self.clock and (int(m[3]) > 59 or int(m[4]) > 59):
                return False
            us = time_micros(text)
            return us is None or abs(us) <= self.time_us  # _PAST is past every bound
        if self.temporal is not None and self.moments is not None:
            at = moment(text, self.temporal)
            return at is None or self.moments[0] <= at <= self.moments[1]
        if self.chars is not None and len(text) > self.chars:
            return False
        if self.lo is not None and self.hi is not None:
            digits = _TRAILING_ZEROS.sub("", text).strip(_SPACE)
            if _INTEGER.fullmatch(digits):
                n = int(digits)
                if not self.lo <= n <= self.hi and n not in self.also:
                    return False
        if self.max_bytes is not None and _bytes(text, self.base64) > self.max_bytes:
            return False
        if self.bmp and any(ord(c) > 0xFFFF for c in text):
            return False
        if self.members is not None and text not in self.members:
            return False
        if self.nul and ("\x00" in text or (self.json and JSON_NUL.search(text))):
            return False
        if self.finite is not None:
            number = floating(text, self.finite)
            if number is not None and not math.isfinite(number):
                return False
        if self.wide is not None and not wide_decimal_fits(text, *self.wide):
            return False
        if self.outside is not None and re.search(self.outside, text):
            return False
        if self.cs_bytes is not None and charset_bytes(text, self.cs_wider) > self.cs_bytes:
            return False
        if self.json_depth is not None and json_depth(text) > self.json_depth:
            return False
        if self.json_valid is not None and not json_valid(text, self.json_valid):
            return False
        if self.pg_numbers and not json_numbers_fit(text):
            return False
        if self.bits is not None and bit_length(text) > self.bits:
            return False
        if self.set_members is not None and text:  # the empty set is a value
            return all(part in self.set_members for part in text.split(","))
        return True


# A plain decimal number (what MySQL, and CDC tools from it, write for a DECIMAL): its
# integer and fraction digits. The same text is a Java regex (Spark's RLIKE).
PLAIN_DECIMAL = re.compile(r"[+-]?([0-9]*)(?:[.]([0-9]*))?")


def wide_decimal_fits(text: str, precision: int, scale: int) -> bool:
    """Whether a ``DECIMAL(precision, scale)`` column stores ``text`` (a plain decimal
    with a digit), rounded half up to ``scale`` places as MariaDB, MySQL and PostgreSQL
    round it: at most ``precision - scale`` integer digits, a carry out of nines counted."""
    m = PLAIN_DECIMAL.fullmatch(text)
    if m is None or not (m[1] or m[2]):
        return False
    whole, fraction = m[1].lstrip("0"), m[2] or ""
    carry = len(fraction) > scale and fraction[scale] >= "5"
    carry = carry and not (whole + fraction[:scale]).strip("9")
    return len(whole) + (1 if carry else 0) <= precision - scale


def _class(chars: list[int]) -> str:
    """A regex class of every character but ``chars`` (code points of the basic plane), as
    ``\\uXXXX`` escapes and ranges: the same text in Python's regexes and in Java's."""
    runs: list[list[int]] = []
    for c in sorted(set(chars)):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    parts = (f"\\u{a:04X}" if a == b else f"\\u{a:04X}-\\u{b:04X}" for a, b in runs)
    return "[^" + "".join(parts) + "]"


# MySQL's character sets whose repertoire the job judges: the Python codec of the same
# table, and the code points MariaDB maps otherwise (more, fewer). Checked against
# MariaDB 10.11 for every code point of the basic plane (the database's conversion from
# utf8mb4 keeps the character, or makes it ``?``), and each character's bytes:
# tests/integration/test_dialects_on_databases.py. MySQL's latin1 is Windows-1252, whose
# five unassigned bytes MariaDB reads as the C1 controls of the same number; its euckr is
# Windows' code page 949 (the Unified Hangul Code), its big5 and sjis differ from the
# codecs in a few characters (sjis keeps the backslash as 0x815F, two bytes).
_CODECS: dict[str, tuple[str, tuple[int, ...], tuple[int, ...]]] = {
    "ascii": ("ascii", (), ()),
    "latin1": ("cp1252", (0x81, 0x8D, 0x8F, 0x90, 0x9D), ()),
    "latin2": ("iso8859_2", (), ()),
    "latin5": ("iso8859_9", (), ()),
    "latin7": ("iso8859_13", (), ()),
    "cp1250": ("cp1250", (), ()),
    "cp1251": ("cp1251", (), ()),
    "cp1256": ("cp1256", (), (0x0679, 0x0688, 0x0691, 0x06A9, 0x06BA, 0x06BE, 0x06C1, 0x06D2)),
    "cp1257": ("cp1257", (), ()),
    "cp850": ("cp850", (), ()),
    "cp852": ("cp852", (), ()),
    "cp866": ("cp866", (0x00B2, 0x207F), (0x00A4, 0x2116)),
    "greek": ("iso8859_7", (0x02BC, 0x02BD), (0x037A, 0x2018, 0x2019, 0x20AC, 0x20AF)),
    "hebrew": ("iso8859_8", (0x203E,), (0x00AF,)),
    "koi8r": ("koi8_r", (), ()),
    "koi8u": ("koi8_u", (0x2022,), (0x2219,)),
    "macroman": ("mac_roman", (), ()),
    "macce": ("mac_latin2", (), ()),
    "tis620": ("tis_620", (0xFFFD,), ()),
    "gbk": ("gbk", (), ()),
    "gb2312": ("gb2312", (), ()),
    "big5": (
        "big5",
        (0x58BB, 0x5AFA, 0x6052, 0x7881, 0x7CA7, 0x88CF, 0x92B9, 0xFFFD),
        (0x02CD, 0x2574, 0xFFE3),
    ),
    "euckr": ("cp949", (0x3164,), ()),
    "sjis": ("shift_jis", (0x5C,), (0xFF3C,)),
    "cp932": ("cp932", (), (0x80, 0xF8F0, 0xF8F1, 0xF8F2, 0xF8F3)),
    "ujis": ("euc_jp", (), (0xFF3C,)),
}
# Unicode's private use characters U+E000..U+E757 are the user-defined rows of the
# Japanese EUC sets (ujis, eucjpms): the first 940 in two bytes, the rest in three.
_EUC_USER = range(0xE000, 0xE758)
_EUC_USER_3 = 0xE3AC
# the character sets :func:`repertoire` judges (eucjpms: cp932's characters as the
# Japanese EUC writes them, and the three-byte JIS X 0212 rows of ujis)
CHARSETS = (*_CODECS, "eucjpms")
_BMP = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]


def _encoded(codec: str) -> dict[int, int]:
    """The characters of the basic plane ``codec`` encodes and decodes back, with their
    bytes."""
    held: dict[int, int] = {}
    for c in _BMP:
        try:
            b = chr(c).encode(codec)
        except UnicodeEncodeError:
            continue
        if b.decode(codec, "replace") == chr(c):
            held[c] = len(b)
    return held


def _eucjpms() -> dict[int, int]:
    """eucjpms, the Japanese EUC of Windows: cp932's characters (ASCII in a byte, its
    JIS X 0208 rows, NEC's row 13 and half-width katakana in two, IBM's extensions in
    three), ujis' JIS X 0212 rows in three, and the user-defined rows, as MariaDB has it
    (measured: it lacks U+00A6, which Python's cp932 encodes)."""
    cp932, euc = characters("cp932"), _encoded("euc_jp")
    held = {c: 3 for c, n in euc.items() if n == 3}
    for c in cp932:
        b = chr(c).encode("cp932")
        two = len(b) == 1 or b[0] not in (0xED, 0xEE, 0xFA, 0xFB, 0xFC)
        held[c] = 1 if c < 0x80 else 2 if two or euc.get(c) == 2 else 3
    held.update((c, 2 if c < _EUC_USER_3 else 3) for c in _EUC_USER)
    held.pop(0xA6, None)
    return held


@functools.cache
def characters(charset: str) -> dict[int, int]:
    """Every character of the basic plane a column of ``charset`` (one of ``CHARSETS``)
    holds, with the bytes it takes there."""
    if charset == "eucjpms":
        return _eucjpms()
    codec, more, fewer = _CODECS[charset]
    held = _encoded(codec)
    single = max(held.values()) == 1
    held.update((c, 1 if single else 2) for c in more)
    if charset == "ujis":
        held.update((c, 2 if c < _EUC_USER_3 else 3) for c in _EUC_USER)
    for c in fewer:
        held.pop(c, None)
    return held


@functools.cache
def repertoire(charset: str) -> str | None:
    """A regex (Python's and Java's: Spark's RLIKE) that finds a character a column of
    MySQL's ``charset`` cannot encode (MariaDB and MySQL refuse it in strict mode); None
    for a character set the job does not judge."""
    if charset not in CHARSETS:
        return None
    return _class(sorted(characters(charset)))


# the UTF-16 and UTF-32 character sets: their characters of two bytes and more, three,
# four (``(?s).``: every character; the class: every one past the basic plane)
_PAST_PLANE = "[^\\u0000-\\uFFFF]"
_WIDE_UNICODE = {
    "ucs2": ("(?s).",),
    "utf16": ("(?s).", _PAST_PLANE, _PAST_PLANE),
    "utf16le": ("(?s).", _PAST_PLANE, _PAST_PLANE),
    "utf32": ("(?s).", "(?s).", "(?s)."),
}


@functools.cache
def wider(charset: str) -> tuple[str, ...] | None:
    """How many bytes a text takes in ``charset``: regexes (Python's and Java's) of the
    characters of two bytes or more, of three or more, ...; a text takes a byte per
    character and one more for each character each finds. () for a character set of a
    byte a character; None for one the job does not judge (and UTF-8, judged as such)."""
    if charset in _WIDE_UNICODE:
        return _WIDE_UNICODE[charset]
    if charset not in CHARSETS:
        return None
    held = characters(charset)
    classes = []
    for n in range(2, max(held.values()) + 1):
        # the characters of n bytes or more, as a class of every character but the narrower
        classes.append(_class(sorted(c for c, b in held.items() if b < n)))
    return tuple(classes)


def charset_bytes(text: str, classes: tuple[str, ...]) -> int:
    """The bytes ``text`` takes in a character set of :func:`wider`'s ``classes``."""
    return len(text) + sum(len(re.findall(p, text)) for p in classes)


# How deep a JSON text nests (arrays and objects in one another: ``[]`` is 1, ``[{}]`` 2),
# read as Spark reads it (``streaming.sql.spark_types``): every escape (a backslash and the
# character after it) taken out, then every string, then all but the brackets.
_JSON_ESCAPE = re.compile(r"(?s)\\.")
_JSON_STRING = re.compile(r'"[^"]*"')
_JSON_NOT_BRACKET = re.compile(r"[^\[\]{}]")
JSON_PATTERNS = (_JSON_ESCAPE.pattern, _JSON_STRING.pattern, _JSON_NOT_BRACKET.pattern)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in a JSON text (0 for a scalar). A text
    that is no JSON gets a number too (the same in Spark): a database refuses it anyway."""
    brackets = _JSON_NOT_BRACKET.sub("", _JSON_STRING.sub("", _JSON_ESCAPE.sub("", text)))
    depth = deepest = 0
    for c in brackets:
        depth += 1 if c in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


# A JSON text as RFC 8259 has it, judged the same way in Python and in Spark (SQL of the
# same patterns, in the same order; no regex that recurses per character in Java): a
# control character but whitespace anywhere is no JSON (JSON_CONTROL: a string holds one
# escaped); else every valid escape made one character (an escapes pattern), every
# string made U+0001 (JSON_STRING), every number, true, false and null U+0002
# (JSON_SCALAR), whitespace taken out; then, again and again, every innermost array
# (JSON_ARRAY) and object (JSON_OBJECT) of those made U+0002. The text is JSON when one
# U+0001 or U+0002 is left (:func:`json_valid`).
# A \u escape of half a surrogate pair alone is refused (MariaDB's JSON check and
# PostgreSQL's jsonb refuse it); MariaDB's check takes a backslash before any other
# character (``"\x41"``; checked against MariaDB 10.11).
_PAIR = (
    r"u[dD][89abAB][0-9A-Fa-f]{2}\\u[dD][c-fC-F][0-9A-Fa-f]{2}|u(?![dD][89a-fA-F])[0-9A-Fa-f]{4}"
)
JSON_ESCAPES = {
    "rfc": r"\\(?:" + _PAIR + r'|["\\/bfnrt])',
    "mariadb": r"(?s)\\(?:" + _PAIR + r"|[^u])",
}
JSON_STRING = r'"[^"\\\x00-\x1F]*+"'
JSON_SCALAR = r"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?|true|false|null"
JSON_BLANK = r"[ \t\n\r]++"
JSON_CONTROL = r"[\x00-\x08\x0B\x0C\x0E-\x1F]"
JSON_ARRAY = r"\[(?:[\x01\x02](?:,[\x01\x02])*+)?\]"
JSON_OBJECT = r"\{(?:\x01:[\x01\x02](?:,\x01:[\x01\x02])*+)?\}"


def _strings_out(text: str, escapes: str) -> str:
    """A JSON text with its valid ``escapes`` flattened, then each string made U+0001."""
    return re.sub(JSON_STRING, "\x01", re.sub(JSON_ESCAPES[escapes], "_", text))


def json_valid(text: str, escapes: str = "rfc") -> bool:
    """Whether ``text`` is one JSON value (RFC 8259; with ``escapes`` ``mariadb``, the
    escapes MariaDB's JSON check takes, :data:`JSON_ESCAPES`), read as the module text
    says (``streaming.sql.spark_types`` runs the same steps)."""
    if re.search(JSON_CONTROL, text):
        return False
    flat = _strings_out(text, escapes)
    flat = re.sub(JSON_BLANK, "", re.sub(JSON_SCALAR, "\x02", flat))
    while True:
        reduced = re.sub(JSON_ARRAY, "\x02", re.sub(JSON_OBJECT, "\x02", flat))
        if reduced == flat:
            return flat in ("\x01", "\x02")
        flat = reduced


# A JSON number, its parts: sign, integer digits, fraction digits, exponent. The same
# text is a Java regex (Spark's regexp_extract).
JSON_NUMBER = r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?"
# PostgreSQL's NUMERIC, which its JSONB keeps every number as: a leading digit below
# 10^131072 (a weight of 32,767 digits of base 10,000), 16,383 fraction digits (trailing
# zeros counted, an exponent taken off them: ``1.0e-16383`` has 16,384), an exponent
# below 2^30 - 1 in magnitude even for zero (its numeric_in; checked against PostgreSQL
# 15: each past one is "value overflows numeric format").
PG_NUMERIC_DIGITS = 131_072
PG_NUMERIC_SCALE = 16_383
PG_NUMERIC_EXPONENT = 2**30 - 1


def pg_numeric_fits(number: str) -> bool:
    """Whether PostgreSQL's NUMERIC holds the JSON number ``number`` (its value read as
    the module text says; a text that is no JSON number: True, judged elsewhere)."""
    m = re.fullmatch(JSON_NUMBER, number)
    if m is None:
        return True
    whole, fraction, exponent = m[2], m[3] or "", m[4] or "0"
    if len(exponent.lstrip("+-").lstrip("0")) > 10:  # past 2^30 whatever it is
        return False
    e = int(exponent)
    if abs(e) >= PG_NUMERIC_EXPONENT or len(fraction) - e > PG_NUMERIC_SCALE:
        return False
    if whole != "0":  # the leading digit's power of ten
        lead = len(whole) - 1 + e
    elif fraction.strip("0"):
        lead = len(fraction.lstrip("0")) - len(fraction) - 1 + e
    else:
        return True  # zero
    return lead < PG_NUMERIC_DIGITS


def json_numbers_fit(text: str, escapes: str = "rfc") -> bool:
    """Whether PostgreSQL's NUMERIC holds every number of the JSON text (outside its
    strings: escapes flattened, strings taken out as :func:`json_valid` does)."""
    flat = _strings_out(text, escapes)
    return all(pg_numeric_fits(m[0]) for m in re.finditer(JSON_NUMBER, flat))


# MariaDB's JSON check (json_valid) refuses a document nested 32 deep (checked against
# MariaDB 10.11: 31 is valid); MySQL's JSON type takes 100 (its documented limit).
JSON_DEPTH = {"mariadb": 31, "mysql": 100}


# The escape \u0000 in a JSON text: a backslash not itself escaped (after an even number
# of backslashes), then u0000. The same text is a Java regex (Spark's RLIKE).
JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# PostgreSQL's text types, and its JSONB (a MySQL JSON column downstream)
_PG_TEXT = Limit(nul=True)
_PG_JSON = Limit(nul=True, json=True, json_valid="rfc", pg_numbers=True)


# A TIME as CDC tools send it: Debezium's MicroTime, a count of microseconds (staged for a
# database as text up to TIME_COUNT_DIGITS digits, a BIGINT), or Canal's and Maxwell's
# [-]h:mm:ss with up to six fraction digits. ASCII digits only, as Spark's (Java's) regex.
TIME_COUNT_DIGITS = 18
TIME_COUNT = re.compile(r"-?[0-9]+")
TIME_TEXT = re.compile(r"(-?)([0-9]+):([0-9]{1,2}):([0-9]{1,2})(?:\.([0-9]{1,6}))?")
_PAST: int = -1 - 10**TIME_COUNT_DIGITS  # a count too long to stage: past every TIME column


def time_micros(text: str) -> int | None:
    """A TIME's value in microseconds, from a count or ``[-]h:mm:ss[.ffffff]`` (a count of
    more than TIME_COUNT_DIGITS digits, or hours of more than 12, is ``_PAST``: held by no
    database column); None for another form (not judged)."""
    if TIME_COUNT.fullmatch(text):
        return _PAST if len(text.lstrip("-")) > TIME_COUNT_DIGITS else int(text)
    m = TIME_TEXT.fullmatch(text)
    if m is None:
        return None
    if len(m[2]) > 12:
        return _PAST
    us = ((int(m[2]) * 60 + int(m[3])) * 60 + int(m[4])) * 1_000_000
    us += int((m[5] or "").ljust(6, "0"))
    return -us if m[1] else us


def bit_length(text: str) -> int:
    """The significant bits of a BIT value as Debezium sends it: a JSON boolean (BIT(1)),
    or base64 of the value's bytes, least significant first (``io.debezium.data.Bits``).
    Text that is not base64 counts as none (as :func:`_bytes`)."""
    if text in ("true", "false"):
        return int(text == "true")
    try:
        raw = binascii.a2b_base64(text.encode("ascii", "ignore"))
    except binascii.Error:
        return 0
    return int.from_bytes(raw, "little").bit_length()


def _number_bytes(number: int, width: int, order: Literal["big", "little"]) -> bytes:
    """A non-negative ``number``'s bytes, at least ``width`` of them."""
    return number.to_bytes(max(width, (number.bit_length() + 7) // 8), order)


_HEX_LITERAL = re.compile(r"[xX]'([0-9A-Fa-f]*)'")
_BIT_LITERAL = re.compile(r"[bB]'([01]*)'")


def literal_bytes(t: ColumnType, sql: str) -> bytes | None:
    """The bytes a normalised MySQL literal (a default, or the implicit value: ``x'00FF'``,
    ``b'101'``, ``'ab'``, ``5``) stands for in a column of type ``t`` as the downstream
    keeps it: a BIT(n) value as n / 8 bytes rounded up, most significant first (what
    ``CAST(b AS BINARY)`` gives in MySQL), a BINARY(n) value padded with zero bytes to n,
    a string's bytes in UTF-8. None: ``t`` holds no bytes (or a spatial value), or
    ``sql`` is NULL or an expression."""
    if t.base not in _BYTES:
        return None
    if m := _HEX_LITERAL.fullmatch(sql):
        digits = m[1]
        raw = bytes.fromhex(digits.rjust(len(digits) + len(digits) % 2, "0"))
    elif m := _BIT_LITERAL.fullmatch(sql):
        number = int(m[1] or "0", 2)
        raw = number.to_bytes((len(m[1]) + 7) // 8, "big")
    elif len(sql) >= 2 and sql[0] == sql[-1] == "'":
        raw = string_value(sql).encode("utf-8", "surrogatepass")
    elif sql.isdigit():
        number = int(sql)
        raw = _number_bytes(number, 1, "big")
    else:
        return None
    if t.base == "BIT":
        number, width = int.from_bytes(raw, "big"), ((t.length or 1) + 7) // 8
        return _number_bytes(number, width, "big")
    if t.base == "BINARY":
        return raw.ljust(t.length or 1, b"\x00")
    return raw


def _bytes(text: str, base64: bool) -> int:
    """The value's size in bytes: its UTF-8, or what its base64 text decodes to (text that
    is not base64 counts as no bytes: its Delta domain, :class:`Bytes`, refuses it)."""
    if not base64:
        return len(text.encode("utf-8", "surrogatepass"))
    try:
        return len(binascii.a2b_base64(text.encode("ascii", "ignore")))
    except binascii.Error:
        return 0


# MySQL's integer ranges where they are narrower than the Delta type a column is stored
# as (MEDIUMINT is an INT, an unsigned type the next wider signed one).
_MYSQL_RANGES = {
    ("TINYINT", True): (0, 2**8 - 1),
    ("SMALLINT", True): (0, 2**16 - 1),
    ("MEDIUMINT", False): (-(2**23), 2**23 - 1),
    ("MEDIUMINT", True): (0, 2**24 - 1),
    ("INT", True): (0, 2**32 - 1),
    ("BIGINT", True): (0, 2**64 - 1),
}


# The byte limits of MySQL's byte types: those of the text types of the same size (the
# LONG kinds' 4 GB is past what one row carries: never reached).
_BLOB_BYTES = {f"{size}BLOB": TEXT_BYTES[f"{size}TEXT"] for size in ("TINY", "", "MEDIUM", "LONG")}
# MySQL's YEAR: 1901 .. 2155 and 0 (0000); another value is refused, or a two-digit one
# read as a year of this century (stored changed).
_YEAR = Limit(lo=1901, hi=2155, also=(0,))
_SMALLINT = Limit(lo=-(2**15), hi=2**15 - 1)  # PostgreSQL stores a YEAR as a SMALLINT
# MySQL's TIME: -838:59:59.999999 .. 838:59:59.999999; PostgreSQL's INTERVAL holds any
# count the sink stages. Both refuse 60 minutes (checked); minutes and seconds below 60.
_MYSQL_TIME = Limit(time_us=(838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999, clock=True)
_PG_TIME = Limit(time_us=10**TIME_COUNT_DIGITS - 1, clock=True)
_COUNT_KIND = {"DATE": "DATE", "DATETIME": "ms", "TIMESTAMP": "TIMESTAMP"}
_YEAR_ONE = _days(1, 1, 1) * 86_400_000_000
_LAST_MOMENT = (_LAST_DAY + 1) * 86_400_000_000 - 1


def limit(t: ColumnType, dialect: str | None, charset: str | None = None) -> Limit | None:
    """What a column of type ``t`` refuses in a table of ``dialect`` (``mariadb``,
    ``mysql``, ``postgresql``) beyond :func:`storage`'s domain; None for Delta (``dialect``
    None) and for a type without such a limit (the module text). ``charset``: the
    table's default character set (the sink's, ``DEFAULT_CHARSET``, when None), for a string
    column that names none of its own."""
    if dialect is None:
        return None
    mysql = mysql_family(dialect)
    cs = (t.charset or charset or DEFAULT_CHARSET).lower() if mysql else DEFAULT_CHARSET
    # three bytes at most (utf8mb3), or two (ucs2): no character past U+FFFF
    bmp = cs in ("utf8", "utf8mb3", "ucs2")
    outside = repertoire(cs) if mysql else None
    if t.base in ("CHAR", "VARCHAR"):
        return Limit(chars=t.length or 1, bmp=bmp, nul=not mysql, outside=outside)
    if t.base in ("DATE", "DATETIME", "TIMESTAMP"):
        kind = _COUNT_KIND[t.base] if t.base != "DATETIME" or (t.length or 0) <= 3 else "us"
        if not mysql:  # PostgreSQL has no year 0 (its 1 BC): from 0001-01-01 on
            return Limit(temporal=kind, moments=(_YEAR_ONE, _LAST_MOMENT))
        if t.base == "TIMESTAMP":  # MySQL's TIMESTAMP: a 32-bit count of seconds, 0 refused
            return Limit(temporal=kind, moments=(1, 2**31 * 1_000_000 - 1))
        return None  # MariaDB and MySQL store years 0 .. 9999 unchanged
    if t.base == "TIME":
        return _MYSQL_TIME if mysql else _PG_TIME
    if t.base == "DECIMAL" and (t.length or 10) > 38:  # text on Delta: Free's
        return Limit(wide=(t.length or 10, t.scale or 0))
    if t.base == "BIT":  # MariaDB/MySQL: refused; PostgreSQL's BOOLEAN (BIT(1)): changed
        length = t.length or 1
        return Limit(bits=length) if mysql or length == 1 else None
    if not mysql:
        if t.base == "YEAR":
            return _SMALLINT
        if t.base in TEXT_BYTES or t.base in ("ENUM", "SET"):  # each a TEXT there
            return _PG_TEXT
        return _PG_JSON if t.base == "JSON" else None
    if (t.base, t.unsigned) in _MYSQL_RANGES:
        lo, hi = _MYSQL_RANGES[(t.base, t.unsigned)]
        return Limit(lo=lo, hi=hi)
    if t.base == "YEAR":
        return _YEAR
    if t.base in TEXT_BYTES:
        if cs.startswith("utf8"):
            return Limit(max_bytes=TEXT_BYTES[t.base], bmp=bmp)
        classes = wider(cs)
        if classes == ():  # a byte per character
            return Limit(chars=TEXT_BYTES[t.base], outside=outside)
        if classes is not None:  # its bytes, counted by character
            return Limit(cs_bytes=TEXT_BYTES[t.base], cs_wider=classes, bmp=bmp, outside=outside)
        return None  # another character set: not judged
    if t.base in _BLOB_BYTES:
        return Limit(max_bytes=_BLOB_BYTES[t.base], base64=True)
    if t.base in ("BINARY", "VARBINARY"):
        # A shorter BINARY(n) value is padded with zero bytes, as upstream pads it.
        return Limit(max_bytes=t.length or 1, base64=True)
    if t.base == "ENUM":
        return Limit(members=t.members)
    if t.base == "SET":
        return Limit(set_members=t.members)
    if isinstance(domain := storage(t), Floating):
        return Limit(finite=domain.sql)
    if t.base == "JSON":
        family = "mariadb" if dialect == "mariadb" else "mysql"
        return Limit(
            json_depth=JSON_DEPTH[family], json_valid="mariadb" if family == "mariadb" else "rfc"
        )
    return None


def value_text(value: Any) -> str | None:
    """A row value as the job reads it: the text of its JSON value in the row image (a
    string as it is, a number as JSON writes it, ``true``/``false``), None for null."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dt.date | dt.time):  # a date YAML read, as a string would hold it
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def _binary(base: str) -> bool:
    return base in ("BINARY", "VARBINARY") or base.endswith("BLOB")


def unfit(
    column: Column, value: Any, dialect: str | None = None, charset: str | None = None
) -> str | None:
    """Why ``value`` cannot be stored in ``column`` downstream (a Delta table, or a table of
    the database ``dialect`` whose default character set is ``charset``), or None when it
    can (null always can), in the job's words (``streaming.batch.rows.project_actions``)."""
    raw: bytes | None = None
    if column.type.base == "BIT" and type(value) is int and value >= 0:
        # a number (a scenario file's): its bytes least significant first
        raw = _number_bytes(value, 1, "little")
    elif _binary(column.type.base) and isinstance(value, str | bytes):
        # a string (a scenario file's; its UTF-8, as devkit.connect sends it) or bytes
        raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    if raw is not None:  # as Debezium sends them: base64 of the bytes
        value = binascii.b2a_base64(raw, newline=False).decode("ascii")
    text = value_text(value)
    if text is None:
        return None
    bound = limit(column.type, dialect, charset)
    if storage(column.type).admits(text) and (bound is None or bound.admits(text)):
        return None
    target = column.type.type_sql()
    return f"value {text} of column {column.name} does not fit the target type {target}"
