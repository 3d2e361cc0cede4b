"""Hypothesis strategies for schema values: column types, columns, tables.

Values are drawn from small pools on purpose (few column names, a handful of lengths, a
family per column name most of the time) so that two or three drawn values are often
ordered, often equivalent and often incompatible: a law test over values that never meet
cannot fail.

Import as ``from strategies import ...`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

from typing import TypeVar

from hypothesis import strategies as st

from schemas.model import (
    BLOB_TYPES,
    FLOAT_TYPES,
    IMPLICIT_DEFAULT,
    INTEGER_TYPES,
    TEXT_TYPES,
    Column,
    ColumnType,
    Index,
    TableSchema,
)

__all__ = [
    "CHARSETS",
    "COLLATIONS",
    "COLUMN_NAMES",
    "FAMILIES",
    "column_types",
    "columns",
    "families",
    "tables",
]

FAMILIES = (
    "integer",
    "float",
    "string",
    "binary",
    "decimal",
    "text",
    "blob",
    "enum",
    "time",
    "bit",
    "other",
)
CHARSETS = (None, None, "latin1", "utf8", "utf8mb3", "utf8mb4", "ascii")
COLLATIONS = (None, None, "utf8mb4_bin", "utf8_bin", "latin1_bin", "utf8mb4_general_ci")
# Column names (besides ``id``) and the type family each usually has.
COLUMN_NAMES = {"a": "integer", "b": "string", "c": "decimal", "d": "enum", "e": "time"}

families = st.sampled_from(FAMILIES)

T = TypeVar("T")


def _rare(value: T, other: T, n: int = 4) -> st.SearchStrategy[T]:
    """``other`` once in ``n`` draws, else ``value``."""
    return st.sampled_from([value] * (n - 1) + [other])


@st.composite
def _charset_collation(draw: st.DrawFn) -> tuple[str | None, str | None]:
    return draw(st.sampled_from(CHARSETS)), draw(st.sampled_from(COLLATIONS))


@st.composite
def column_types(draw: st.DrawFn, family: str | None = None) -> ColumnType:
    """A column type, of ``family`` (one of :data:`FAMILIES`) or of any family."""
    family = family or draw(families)
    if family == "integer":
        return ColumnType(
            draw(st.sampled_from(INTEGER_TYPES)),
            unsigned=draw(_rare(False, True)),
            zerofill=draw(_rare(False, True, 8)),
        )
    if family == "float":
        return ColumnType(draw(st.sampled_from(FLOAT_TYPES)))
    if family in ("string", "binary"):
        bases = ("CHAR", "VARCHAR") if family == "string" else ("BINARY", "VARBINARY")
        base = draw(st.sampled_from(bases))
        length = draw(st.sampled_from([None, 1, 5, 10, 20]))
        if family == "binary":
            return ColumnType(base, length=length)
        charset, collation = draw(_charset_collation())
        return ColumnType(base, length=length, charset=charset, collation=collation)
    if family == "decimal":
        if draw(_rare(False, True, 10)):  # near MySQL's maximum precision 65
            precision = draw(st.integers(55, 65))
            scale = draw(st.integers(0, 30))
        else:
            precision = draw(st.integers(1, 14))
            scale = draw(st.integers(0, min(precision, 5)))
        if draw(_rare(False, True, 8)):
            return ColumnType("DECIMAL")
        return ColumnType("DECIMAL", length=precision, scale=scale)
    if family == "text":
        charset, collation = draw(_charset_collation())
        return ColumnType(draw(st.sampled_from(TEXT_TYPES)), charset=charset, collation=collation)
    if family == "blob":
        return ColumnType(draw(st.sampled_from(BLOB_TYPES)))
    if family == "enum":
        members = draw(
            st.sampled_from([("a",), ("a", "b"), ("a", "b", "c"), ("b", "a"), ("a", "c")])
        )
        return ColumnType(draw(_rare("ENUM", "SET")), members=members)
    if family == "time":
        base = draw(st.sampled_from(("DATETIME", "DATETIME", "TIMESTAMP", "TIME")))
        return ColumnType(base, length=draw(st.sampled_from([None, 0, 3, 6])))
    if family == "bit":
        return ColumnType("BIT", length=draw(st.sampled_from([None, 1, 8, 64])))
    return ColumnType(draw(st.sampled_from(("DATE", "YEAR", "JSON"))))


@st.composite
def columns(draw: st.DrawFn, name: str | None = None, family: str | None = None) -> Column:
    """A column named ``name`` (else one of :data:`COLUMN_NAMES`) with a type of ``family``."""
    name = name or draw(st.sampled_from(sorted(COLUMN_NAMES)))
    generated = draw(st.sampled_from([None] * 6 + ["`id` + 1", "`id` * 2"]))
    return Column(
        name=name,
        type=draw(column_types(family)),
        nullable=draw(st.booleans()),
        default=draw(st.sampled_from([None, None, None, "0", "1", IMPLICIT_DEFAULT])),
        generated=generated,
        stored=generated is not None and draw(st.booleans()),
        auto_increment=draw(_rare(False, True, 12)),
    )


_INDEXES = (
    Index("idx_a", ("a",)),
    Index("idx_ab", ("a", "b")),
    Index("uk_b", ("b",), "UNIQUE"),
    Index("IDX_A", ("A",)),
)


@st.composite
def tables(draw: st.DrawFn) -> TableSchema:
    """A table over a few shared column names: mostly the same families and primary key,
    so pairs of tables are often ordered, sometimes joinable only, sometimes not at all."""
    cols: list[Column] = []
    primary_key: tuple[str, ...] = ()
    if draw(_rare(True, False, 8)):
        id_type = ColumnType(draw(_rare("INT", "BIGINT")))
        cols.append(Column("id", id_type, nullable=False))
        primary_key = ("id",) if draw(_rare(True, False, 10)) else ()
    names = draw(st.lists(st.sampled_from(sorted(COLUMN_NAMES)), unique=True, max_size=4))
    for key in names:
        spelled = key.upper() if draw(_rare(False, True, 8)) else key
        family = COLUMN_NAMES[key] if draw(_rare(True, False, 10)) else draw(families)
        cols.append(draw(columns(spelled, family)))
    present = {c.name.lower() for c in cols}
    indexes = tuple(
        i
        for i in _INDEXES
        if {c.lower() for c in i.columns} <= present and draw(_rare(False, True, 3))
    )
    if len({i.key for i in indexes}) < len(indexes):
        indexes = indexes[:1]
    return TableSchema(
        columns=tuple(cols),
        primary_key=primary_key,
        indexes=indexes,
        charset=draw(st.sampled_from((None, None, None, "latin1", "utf8mb4", "utf8"))),
        collation=draw(st.sampled_from((None, None, None, "utf8mb4_bin", "utf8_bin"))),
        name=draw(st.sampled_from(("t_1", "t_2"))),
    )
