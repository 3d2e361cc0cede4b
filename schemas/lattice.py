"""The schema lattice: ``compare`` and ``join`` of table schemas, and ``diff`` between them.

Optimistic coordination takes the downstream schema to be the join of every shard's schema
(shared/reference/shard-ddl-semantics.md, "Optimistic mode"; after TiDB's ``schemacmp``).
MySQL types are *encoded* into the primitives of :mod:`schemas._lattice_primitives`: a
column type becomes a tuple whose fields are widening numbers, singletons, a charset order
and a member list, so each widening rule below is a line of data.

One deliberate refinement of the plain product "nullable is a Bool, default is a Maybe":
``NOT NULL DEFAULT <implicit>`` (what the join gives a NOT NULL column some shard lacks) is
also below a nullable column without default. Without it a NOT NULL column joined with its
absence would have two minimal upper bounds (``NULL`` and ``NOT NULL DEFAULT <implicit>``),
and folding shards in a different order would give different downstream schemas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from schemas._lattice_primitives import (
    Field,
    Map,
    Maybe,
    Poset,
    Prefix,
    Singleton,
    Tuple,
    Widening,
    combine,
)
from schemas.changes import (
    AddColumn,
    AlterSpec,
    DropColumn,
    ModifyColumn,
    Position,
    TableOptions,
)
from schemas.errors import Incompatible
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

__all__ = ["compare", "diff", "join"]

# --- column types ------------------------------------------------------------------------

# Bases of one family are ordered by rank; different families never meet.
_RANKED: dict[str, tuple[str, int]] = {
    **{b: ("integer", i) for i, b in enumerate(INTEGER_TYPES)},
    **{b: ("float", i) for i, b in enumerate(FLOAT_TYPES)},
    **{b: ("text", i) for i, b in enumerate(TEXT_TYPES)},
    **{b: ("blob", i) for i, b in enumerate(BLOB_TYPES)},
}
_BASE_AT = {rank: base for base, rank in _RANKED.items()}

# Bases whose ``length`` is a widening number, with the length an omitted one stands for
# (CHAR = CHAR(1), DATETIME = DATETIME(0): MySQL reference, "Data Types").
_WIDE_LENGTH = {
    "CHAR": 1,
    "BINARY": 1,
    "VARCHAR": 0,
    "VARBINARY": 0,
    "BIT": 1,
    "DATETIME": 0,
    "TIMESTAMP": 0,
    "TIME": 0,
}
# DECIMAL(p, s) widens by integer digits p - s and scale s separately; DECIMAL = DECIMAL(10,0)
# and the precision is at most 65 (MySQL reference, "Fixed-Point Types").
_DECIMAL_DEFAULT = (10, 0)
_DECIMAL_MAX_PRECISION = 65

# Charsets: unspecified (None) is the bottom; utf8 is an alias of utf8mb3.
_CHARSETS = Poset({"latin1": ["utf8mb4"], "utf8mb3": ["utf8mb4"]})
_CHARSET_ALIASES = {"utf8": "utf8mb3"}


def _charset_key(charset: str | None) -> str | None:
    if charset is None:
        return None
    charset = charset.lower()
    return _CHARSET_ALIASES.get(charset, charset)


def _collation_key(collation: str | None) -> tuple[str, str] | None:
    """``utf8_bin`` -> (``utf8mb3``, ``bin``): a collation follows its charset, same suffix."""
    if collation is None:
        return None
    prefix, _, suffix = collation.lower().partition("_")
    return (_CHARSET_ALIASES.get(prefix, prefix), suffix)


# Field order of an encoded type; the tuple below is its lattice.
_FAMILY, _RANK, _WLEN, _WSCALE, _FLEN, _FSCALE, _UNSIGNED, _ZEROFILL, _CS, _COLL, _MEMBERS = range(
    11
)
_TYPE = Tuple(
    Field(Singleton(), "base"),
    Field(Widening(), "size"),
    Field(Widening(), "length"),
    Field(Widening(), "scale"),
    Field(Singleton(), "length"),
    Field(Singleton(), "scale"),
    Field(Singleton(), "unsigned"),
    Field(Singleton(), "zerofill"),
    Field(Maybe(_CHARSETS), "charset"),
    Field(Maybe(Tuple(Field(_CHARSETS, "charset"), Field(Singleton(), "collation"))), "collation"),
    Field(Prefix(), "members"),
)


def _encode_type(t: ColumnType) -> tuple[Any, ...]:
    family, rank = _RANKED.get(t.base, (t.base, 0))
    wide_len = wide_scale = 0
    fixed_len, fixed_scale = t.length, t.scale
    if t.base == "DECIMAL":
        precision = t.length if t.length is not None else _DECIMAL_DEFAULT[0]
        scale = t.scale if t.scale is not None else _DECIMAL_DEFAULT[1]
        wide_len, wide_scale, fixed_len, fixed_scale = precision - scale, scale, None, None
    elif t.base in _WIDE_LENGTH:
        wide_len = t.length if t.length is not None else _WIDE_LENGTH[t.base]
        fixed_len = None
    return (
        family,
        rank,
        wide_len,
        wide_scale,
        fixed_len,
        fixed_scale,
        t.unsigned,
        t.zerofill,
        _charset_key(t.charset),
        _collation_key(t.collation),
        t.members,
    )


def _decode_type(
    e: tuple[Any, ...], a: ColumnType, ea: tuple[Any, ...], b: ColumnType, eb: tuple[Any, ...]
) -> ColumnType:
    # Spellings (an omitted length, ``utf8``) come from the input that supplied the value.
    base = _BASE_AT.get((e[_FAMILY], e[_RANK]), e[_FAMILY])
    length, scale = e[_FLEN], e[_FSCALE]
    wide = e[_WLEN], e[_WSCALE]
    if wide == (ea[_WLEN], ea[_WSCALE]) and (base == "DECIMAL" or base in _WIDE_LENGTH):
        length, scale = a.length, a.scale
    elif wide == (eb[_WLEN], eb[_WSCALE]) and (base == "DECIMAL" or base in _WIDE_LENGTH):
        length, scale = b.length, b.scale
    elif base == "DECIMAL":
        length, scale = wide[0] + wide[1], wide[1]
        if length > _DECIMAL_MAX_PRECISION:
            raise Incompatible(
                f"{a.to_sql()} vs {b.to_sql()}: joined DECIMAL({length},{scale}) exceeds "
                f"MySQL's maximum precision {_DECIMAL_MAX_PRECISION}"
            )
    elif base in _WIDE_LENGTH:
        length = wide[0]
    charset = _spelling(e[_CS], a.charset, b.charset, _charset_key)
    collation = _spelling(e[_COLL], a.collation, b.collation, _collation_key)
    if collation is None and e[_COLL] is not None:
        prefix, suffix = e[_COLL]
        collation = f"{prefix}_{suffix}" if suffix else prefix
    return ColumnType(
        base=base,
        length=length,
        scale=scale,
        unsigned=e[_UNSIGNED],
        zerofill=e[_ZEROFILL],
        charset=charset if charset is not None else e[_CS],
        collation=collation,
        members=e[_MEMBERS],
    )


def _spelling(
    key: object, a: str | None, b: str | None, key_of: Callable[[str | None], object]
) -> str | None:
    """The input's spelling of a joined charset/collation (``utf8`` stays ``utf8``)."""
    if key is None:
        return None
    if key_of(a) == key:
        return a
    if key_of(b) == key:
        return b
    return None


class _TypeLattice:
    """Column types; any disagreement is reported as the two whole types."""

    def compare(self, a: ColumnType, b: ColumnType) -> int:
        if a is b or a == b:
            return 0
        try:
            return _TYPE.compare(_encode_type(a), _encode_type(b))
        except Incompatible:
            raise Incompatible(f"{a.to_sql()} vs {b.to_sql()}") from None

    def join(self, a: ColumnType, b: ColumnType) -> ColumnType:
        if a is b or a == b:
            return a
        ea, eb = _encode_type(a), _encode_type(b)
        try:
            e = _TYPE.join(ea, eb)
        except Incompatible:
            raise Incompatible(f"{a.to_sql()} vs {b.to_sql()}") from None
        if e == ea:
            return a
        if e == eb:
            return b
        return _decode_type(e, a, ea, b, eb)


_TYPES = _TypeLattice()

# --- columns -----------------------------------------------------------------------------

# Nullability and default together: what a row lacking a value gets. NOT NULL without
# default is the bottom; see the module docstring for NOT NULL DEFAULT <implicit> < NULL.
_NN, _NN_IMPLICIT, _NN_LITERAL = "NOT NULL", "NOT NULL DEFAULT <implicit>", "NOT NULL DEFAULT"
_N, _N_IMPLICIT, _N_LITERAL = "NULL", "NULL DEFAULT <implicit>", "NULL DEFAULT"
_FILL = Poset(
    {
        _NN: [_NN_IMPLICIT],
        _NN_IMPLICIT: [_NN_LITERAL, _N],
        _NN_LITERAL: [_N_LITERAL],
        _N: [_N_IMPLICIT],
        _N_IMPLICIT: [_N_LITERAL],
    }
)
_COLUMN = Tuple(
    Field(_FILL, "nullability"),
    Field(Maybe(Singleton[str]()), "default"),  # an explicit literal; two differ: no order
    Field(Singleton[tuple[str | None, bool]](), "generated"),
    Field(Singleton[bool](), "auto_increment"),
)


def _encode_column(c: Column) -> tuple[Any, ...]:
    if c.default is None:
        fill, literal = (_N if c.nullable else _NN), None
    elif c.default == IMPLICIT_DEFAULT:
        fill, literal = (_N_IMPLICIT if c.nullable else _NN_IMPLICIT), None
    else:
        fill, literal = (_N_LITERAL if c.nullable else _NN_LITERAL), c.default
    return (fill, literal, (c.generated, c.stored), c.auto_increment)


def _definition(c: Column) -> str:
    """The column's definition without its name, for messages."""
    return c.renamed("").to_sql()[3:]


class _ColumnLattice:
    """Columns, and a column against its absence from a table (an entry of the columns map)."""

    def compare(self, a: Column, b: Column) -> int:
        if a is b or a == b:
            return 0
        sign = _TYPES.compare(a.type, b.type)
        try:
            rest = _COLUMN.compare(_encode_column(a), _encode_column(b))
        except Incompatible:
            raise Incompatible(f"{_definition(a)} vs {_definition(b)}") from None
        merged = combine(sign, rest)
        if merged is None:
            raise Incompatible(f"{_definition(a)} vs {_definition(b)}")
        return merged

    def join(self, a: Column, b: Column) -> Column:
        if a is b or a == b:
            return a
        type_ = _TYPES.join(a.type, b.type)
        try:
            fill, literal, (generated, stored), auto_increment = _COLUMN.join(
                _encode_column(a), _encode_column(b)
            )
        except Incompatible:
            raise Incompatible(f"{_definition(a)} vs {_definition(b)}") from None
        default = (
            literal
            if fill in (_NN_LITERAL, _N_LITERAL)
            else IMPLICIT_DEFAULT
            if fill in (_NN_IMPLICIT, _N_IMPLICIT)
            else None
        )
        joined = Column(
            name=a.name,
            type=type_,
            nullable=fill in (_N, _N_IMPLICIT, _N_LITERAL),
            default=default,
            generated=generated,
            stored=stored,
            auto_increment=auto_increment,
        )
        return a if joined == a else joined

    def absent_conflict(self, value: Column) -> str | None:
        # Rows of a shard lacking the column need a value for it (MySQL fills the default).
        return None if value.has_default else "NOT NULL without default"

    def join_absent(self, value: Column) -> Column:
        # The type's implicit value, as DM's join gives (shard-ddl-semantics.md).
        if value.has_default:
            return value
        return Column(
            name=value.name,
            type=value.type,
            nullable=value.nullable,
            default=IMPLICIT_DEFAULT,
            generated=value.generated,
            stored=value.stored,
            auto_increment=value.auto_increment,
        )

    def describe(self, value: Column) -> str:
        return _definition(value)


_COLUMNS = Map(_ColumnLattice(), lambda c: f'column "{c.name}"')

# --- tables ------------------------------------------------------------------------------


def _render_key(key: tuple[str, ...]) -> str:
    return f"({', '.join(key)})"


_TABLE = Tuple(
    Field(_COLUMNS, "the columns", witness=_COLUMNS.witness),
    Field(Singleton(_render_key), "primary key", "primary key"),
    Field(Maybe(_CHARSETS), "table charset", "table charset"),
    Field(_TYPE.fields[_COLL].lattice, "table collation", "table collation"),
)


def _encode_table(t: TableSchema) -> tuple[Any, ...]:
    by_key: Mapping[str, Column] = t._by_key
    return (
        by_key,
        tuple(c.lower() for c in t.primary_key),
        _charset_key(t.charset),
        _collation_key(t.collation),
    )


def compare(a: TableSchema, b: TableSchema) -> int:
    """-1, 0 or 1 as ``a`` is smaller than, equivalent to or larger than ``b``.

    Larger means it can hold every row of the other (shard-ddl-semantics.md, "Type order").
    Column order, secondary indexes and the table name are ignored.

    Raises:
        Incompatible: neither is ``<=`` the other; the message names where, e.g.
            ``at column "c": INT vs VARCHAR(10)``. A join may still exist.
    """
    if a is b or a == b:
        return 0
    return _TABLE.compare(_encode_table(a), _encode_table(b))


def join(a: TableSchema, b: TableSchema) -> TableSchema:
    """The least schema at least as large as both ``a`` and ``b``.

    Columns keep ``a``'s order (and spelling) followed by ``b``'s other columns in ``b``'s
    order; a NOT NULL column without default that one side lacks gets
    :data:`~schemas.model.IMPLICIT_DEFAULT`. Secondary indexes are those both have alike, in
    ``a``'s order; the name is ``a``'s.

    Raises:
        Incompatible: no schema holds both, e.g. ``at column "c": INT vs VARCHAR(10)``.
    """
    if a is b or a == b:
        return a
    ea, eb = _encode_table(a), _encode_table(b)
    by_key, _, charset_key, collation_key = _TABLE.join(ea, eb)
    columns = tuple(by_key.values())
    indexes = _common_indexes(a.indexes, b.indexes)
    charset = _spelling(charset_key, a.charset, b.charset, _charset_key)
    collation = _spelling(collation_key, a.collation, b.collation, _collation_key)
    if charset is None and charset_key is not None:
        charset = charset_key
    if collation is None and collation_key is not None:
        prefix, suffix = collation_key
        collation = f"{prefix}_{suffix}" if suffix else prefix
    if (
        len(columns) == len(a.columns)
        and all(x is y for x, y in zip(columns, a.columns, strict=True))
        and indexes is a.indexes
        and charset == a.charset
        and collation == a.collation
    ):
        return a
    return TableSchema(
        columns=columns,
        primary_key=a.primary_key,
        indexes=indexes,
        charset=charset,
        collation=collation,
        name=a.name,
    )


def _common_indexes(a: tuple[Index, ...], b: tuple[Index, ...]) -> tuple[Index, ...]:
    # Indexes never block coordination (shard-ddl-semantics.md): keep only those alike.
    if a == b:
        return a
    theirs = {i.canonical() for i in b}
    kept = tuple(i for i in a if i.canonical() in theirs)
    return a if len(kept) == len(a) else kept


# --- diff --------------------------------------------------------------------------------


def diff(old: TableSchema, new: TableSchema) -> tuple[AlterSpec, ...]:
    """The ALTER specs that turn ``old`` into ``new`` downstream.

    Drops (in ``old``'s order), then adds (in ``new``'s order, each ``AFTER`` its
    predecessor in ``new`` or ``FIRST``), then modifies of columns whose definition differs,
    then the table charset/collation. Renames are not detected (a rename is a drop and an
    add here; the coordinator handles renames). Keys and indexes are not diffed.
    """
    if old is new or old == new:
        return ()
    specs: list[AlterSpec] = [DropColumn(c.name) for c in old.columns if not new.has_column(c.name)]
    previous: str | None = None
    modified: list[AlterSpec] = []
    for c in new.columns:
        before = old.column(c.name)
        if before is None:
            specs.append(AddColumn(c, Position(previous)))
        elif before != c and (before.name == c.name or before.renamed(c.name) != c):
            modified.append(ModifyColumn(c))
        previous = c.name
    specs.extend(modified)
    if (old.charset, old.collation) != (new.charset, new.collation):
        specs.append(TableOptions(charset=new.charset, collation=new.collation))
    return tuple(specs)
