"""A target's table in a database: its column types and its DDL per dialect, rendered
with sqlglot from the schema values (never by joining strings).

The first part of the database sink (docs/status.md): what a MariaDB, MySQL or
PostgreSQL table of a target looks like, and the statements that take it from the
columns it has to the schema a downstream decision wants. Pure: no connection; the sink
reads the table's columns and runs what :func:`alter_statements` returns.

Rules, as on Delta (``streaming.storage.delta_sink``):

- **Values, not constraints.** shardmerge fills every value itself (a row lacking a
  column gets its default, NULL or the implicit value before it is written), so the
  table keeps no ``AUTO_INCREMENT`` and no generated expression: the shards' values are
  copied. Key columns are ``NOT NULL`` (a primary key needs it); the other columns are
  nullable, so a column one shard lacks never refuses another shard's row. Constant
  defaults are kept (for readers of the table); an expression default is left out.
- **Idempotent.** :func:`alter_statements` compares the table's columns with the
  decision and renders only what is still missing: a batch run again after its DDL
  committed (DDL commits on its own in MySQL) renders nothing.
- **No loss.** A type change the database cannot make without losing values (a
  narrower or other type) is a :class:`DialectConflict` with advice, as a change Delta
  cannot make is; the job then waits for the operator.
- **Types by mapping.** MariaDB and MySQL keep the shard's own type (charset and
  collation included). PostgreSQL gets :func:`postgres_type`'s mapping (its own table in
  docs/status.md), which never narrows: an unsigned type takes the next wider signed
  type, ENUM and SET are TEXT, JSON is JSONB.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, NoReturn

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from schemas._apply import TEXT_BYTES
from schemas.changes import AlterSpec, ChangeColumn, DropColumn, RenameColumn
from schemas.model import (
    BLOB_TYPES,
    CHARSET_TYPES,
    IMPLICIT_DEFAULT,
    INTEGER_TYPES,
    SPATIAL_TYPES,
    TEXT_TYPES,
    Column,
    ColumnType,
    TableSchema,
    name_key,
)
from shardmerge.errors import ShardMergeError

__all__ = [
    "DIALECTS",
    "PG_NAME_BYTES",
    "Dialect",
    "DialectConflict",
    "alter_statements",
    "changes_safely",
    "collation",
    "column_type",
    "create_schema",
    "create_table",
    "name_fits",
    "postgres_type",
    "sqlglot_dialect",
    "widens",
]

Dialect = Literal["mariadb", "mysql", "postgresql"]
DIALECTS: tuple[Dialect, ...] = ("mariadb", "mysql", "postgresql")
# sqlglot's names of them (MariaDB speaks MySQL's DDL for everything rendered here).
_SQLGLOT = {"mariadb": "mysql", "mysql": "mysql", "postgresql": "postgres"}


log = logging.getLogger("shardmerge.dialects")

# MySQL 8's collations of UCA 9.0.0 (``utf8mb4_0900_ai_ci``, its default, the tailored
# ``utf8mb4_de_pb_0900_ai_ci``, ``_ks`` for kana) are unknown to MariaDB before 11.4.5,
# which then reads them as its UCA 14.0.0 collations of NO PAD (trailing spaces count, as
# in MySQL's 0900 ones): so does the sink, for every MariaDB. The tailorings MariaDB has
# of the locales MySQL names (a locale without one takes the root collation, said in the
# log: its keys compare as the root's).
_UCA900 = re.compile(r"utf8mb4_(?:([a-z_]+?)_)?0900_(ai_ci|as_ci|as_cs|bin)(?:_ks)?", re.I)
_MARIADB_TAILORING = {
    "cs": "czech", "da": "danish", "de_pb": "german2", "eo": "esperanto", "es": "spanish",
    "es_trad": "spanish2", "et": "estonian", "hr": "croatian", "hu": "hungarian",
    "is": "icelandic", "la": "roman", "lt": "lithuanian", "lv": "latvian", "pl": "polish",
    "ro": "romanian", "sk": "slovak", "sl": "slovenian", "sv": "swedish", "tr": "turkish",
    "vi": "vietnamese",
}  # fmt: skip


@functools.cache  # pure; its warning said once per collation name
def collation(name: str, dialect: Dialect) -> str:
    """The collation ``name`` (a shard's) as the database names it: on MariaDB, MySQL 8's
    ``utf8mb4_*0900*`` ones as their UCA 14.0.0 NO PAD counterparts
    (``utf8mb4_uca1400_nopad_ai_ci``; ``utf8mb4_0900_bin`` is ``utf8mb4_nopad_bin``);
    any other name as it is."""
    m = _UCA900.fullmatch(name) if dialect == "mariadb" else None
    if m is None:
        return name
    locale, strength = m.group(1), m.group(2).lower()
    if strength == "bin":
        return "utf8mb4_nopad_bin"
    tailoring = _MARIADB_TAILORING.get(locale.lower()) if locale else None
    mapped = f"utf8mb4_uca1400_{tailoring + '_' if tailoring else ''}nopad_{strength}"
    if locale and tailoring is None:
        log.warning(
            "MariaDB has no %s tailoring of Unicode's collation: %s is %s downstream",
            locale, name, mapped,
        )  # fmt: skip
    return mapped


class DialectConflict(ShardMergeError):
    """The database cannot make a change without losing values; the message says which
    column, what it has, what the decision wants, and what the operator can do."""


# PostgreSQL keeps the first 63 bytes of a name (NAMEDATALEN - 1) and cuts the rest off
# with a notice: two MySQL names alike in those bytes would be one column there, and the
# table's columns, read back, would not be the shards'. MySQL's 64 characters of UTF-8
# fit MariaDB's and MySQL's own limits.
PG_NAME_BYTES = 63


def name_fits(name: str, dialect: Dialect, what: str) -> None:
    """Raises :class:`DialectConflict` when ``dialect`` cannot keep the name ``name`` (of
    a ``what``: a column, a table, a schema) as it is."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if _sg(dialect) == "postgres" and size > PG_NAME_BYTES:
        raise DialectConflict(
            f"{what} {name!r} is {size} bytes long in UTF-8; PostgreSQL keeps {PG_NAME_BYTES} "
            "bytes of a name and cuts the rest off (two names alike in those bytes would "
            "be one column): rename it upstream (or in the routes, for a table), or write "
            "this target to MariaDB, MySQL or Delta"
        )


def mysql_family(dialect: str | None) -> bool:
    """Whether ``dialect`` is MariaDB or MySQL (their tables keep the shards' types)."""
    return _SQLGLOT.get(dialect or "") == "mysql"


def sqlglot_dialect(dialect: Dialect) -> str:
    """sqlglot's name of a dialect; an unknown one is refused by name."""
    if dialect not in _SQLGLOT:
        raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)}")
    return _SQLGLOT[dialect]


_sg = sqlglot_dialect

# A MariaDB/MySQL table's default character set when the shards name none (the server's
# own default may be latin1).
DEFAULT_CHARSET = "utf8mb4"


def create_schema(dialect: Dialect, name: str) -> str:
    """``CREATE DATABASE IF NOT EXISTS`` (MariaDB, MySQL) or ``CREATE SCHEMA IF NOT
    EXISTS`` (PostgreSQL): where a target's ``db`` lives."""
    kind = "SCHEMA" if _sg(dialect) == "postgres" else "DATABASE"
    name_fits(name, dialect, "schema")
    return exp.Create(this=exp.Table(this=_ident(name)), kind=kind, exists=True).sql(_sg(dialect))


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _table(db: str | None, table: str) -> exp.Table:
    return exp.Table(this=_ident(table), db=_ident(db) if db else None)


# --- types -----------------------------------------------------------------------------

# The next wider signed type of an unsigned integer (PostgreSQL has no unsigned types).
_PG_INTEGER = {
    ("TINYINT", False): "SMALLINT",
    ("TINYINT", True): "SMALLINT",
    ("SMALLINT", False): "SMALLINT",
    ("SMALLINT", True): "INTEGER",
    ("MEDIUMINT", False): "INTEGER",
    ("MEDIUMINT", True): "INTEGER",
    ("INT", False): "INTEGER",
    ("INT", True): "BIGINT",
    ("BIGINT", False): "BIGINT",
    ("BIGINT", True): "DECIMAL(20, 0)",
}


def postgres_type(t: ColumnType) -> exp.DataType:
    """The PostgreSQL type of a MySQL column type: one that holds every value the MySQL
    type holds (see the module text). Spatial types are refused (:class:`DialectConflict`)."""
    base = t.base
    if base in INTEGER_TYPES:
        text = _PG_INTEGER[(base, t.unsigned)]
    elif base == "DECIMAL":
        text = f"DECIMAL({t.length or 10}, {t.scale or 0})"
    elif base == "FLOAT":
        text = "REAL"
    elif base == "DOUBLE":
        text = "DOUBLE PRECISION"
    elif base in ("CHAR", "VARCHAR"):
        text = f"{base}({t.length or 1})"
    elif base in TEXT_TYPES or base in ("ENUM", "SET"):
        text = "TEXT"
    elif base in BLOB_TYPES or base in ("BINARY", "VARBINARY"):
        text = "BYTEA"
    elif base == "BIT":
        text = "BOOLEAN" if (t.length or 1) == 1 else "BYTEA"
    elif base == "YEAR":
        text = "SMALLINT"
    elif base == "DATE":
        text = "DATE"
    elif base == "DATETIME":
        text = f"TIMESTAMP({t.length or 0})"
    elif base == "TIMESTAMP":  # stored in UTC by MySQL, sent in UTC by the CDC tools
        text = f"TIMESTAMPTZ({t.length or 0})"
    elif base == "TIME":  # MySQL's range (-838:59:59 .. 838:59:59) is an interval's
        text = "INTERVAL"
    elif base == "JSON":
        text = "JSONB"
    elif base == "BOOLEAN":
        text = "SMALLINT"  # MySQL's BOOLEAN is TINYINT(1): any small integer
    elif base in SPATIAL_TYPES:
        _no_spatial(t)
    else:
        raise DialectConflict(f"type {t.type_sql()} has no PostgreSQL mapping")
    return exp.DataType.build(text, dialect="postgres")


def _no_spatial(t: ColumnType) -> NoReturn:
    """A spatial column, on any database: refused (the module text)."""
    raise DialectConflict(
        f"type {t.type_sql()}: the database sink writes no spatial column yet (the job "
        "keeps a geometry as its WKB bytes, without the SRID the column's values carry; "
        "PostgreSQL would need PostGIS): route the table to a Delta target, or drop the "
        "column upstream"
    )


# Types of MariaDB's own a MariaDB shard's column may have, which MySQL lacks.
_MARIADB_ONLY = ("UUID", "INET4", "INET6")


def column_type(t: ColumnType, dialect: Dialect) -> exp.DataType:
    """The column type a table of ``dialect`` gets for a shard's column type."""
    if _sg(dialect) == "postgres":
        return postgres_type(t)
    if t.base in SPATIAL_TYPES:
        _no_spatial(t)
    if dialect == "mysql" and t.base in _MARIADB_ONLY:
        raise DialectConflict(f"type {t.type_sql()} (MariaDB's) has no mysql column")
    try:
        return exp.DataType.build(t.type_sql(), dialect="mysql")
    except ParseError:
        # a type of MariaDB's own (INET4, INET6, from a MariaDB shard): kept as named
        if dialect != "mariadb":
            raise DialectConflict(f"type {t.type_sql()} has no {dialect} column") from None
        return exp.DataType.build(t.type_sql(), dialect="mysql", udt=True)


def _type_text(t: ColumnType, dialect: Dialect) -> str:
    return column_type(t, dialect).sql(_sg(dialect))


# --- columns ---------------------------------------------------------------------------


def _default(column: Column, dialect: Dialect, key: bool = False) -> exp.Expression | None:
    """A constant default as the dialect writes it; None for none, or an expression the
    table does not keep (see the module text)."""
    if column.default is None and (column.nullable or column.generated is not None or key):
        return None
    # a NOT NULL column without a default: the implicit value MySQL fills existing rows with
    implicit = column.default is None or column.default == IMPLICIT_DEFAULT
    text = column.type.implicit_sql() if implicit else str(column.default)
    try:
        value = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.ParseError:
        return None
    if isinstance(value, exp.CurrentTimestamp):  # its precision is the column's (MySQL)
        return value
    if value.is_string and value.this.startswith("0000"):
        return None  # a zero date: refused by strict modes and by PostgreSQL
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return value
    if not isinstance(value, exp.Literal):
        return None
    if _sg(dialect) == "postgres":
        if column.type.base in ("BIT", "BINARY", "VARBINARY", *BLOB_TYPES, "JSON"):
            return None  # byte and JSON literals are not portable: values are filled anyway
        if column.type.base in INTEGER_TYPES and value.is_string:
            return None
    return value


def column_def(column: Column, dialect: Dialect, *, key: bool = False) -> exp.ColumnDef:
    """The column's definition: type, NOT NULL for a key column, a constant default, and
    on MariaDB/MySQL its charset and collation."""
    constraints = []
    if _sg(dialect) == "mysql" and column.type.base in CHARSET_TYPES:
        if column.type.charset:
            constraints.append(
                exp.ColumnConstraint(
                    kind=exp.CharacterSetColumnConstraint(this=exp.var(column.type.charset))
                )
            )
        if column.type.collation:
            constraints.append(
                exp.ColumnConstraint(
                    kind=exp.CollateColumnConstraint(
                        this=exp.var(collation(column.type.collation, dialect))
                    )
                )
            )
    constraints.append(exp.ColumnConstraint(kind=exp.NotNullColumnConstraint(allow_null=not key)))
    default = _default(column, dialect, key)
    if default is not None:
        constraints.append(exp.ColumnConstraint(kind=exp.DefaultColumnConstraint(this=default)))
    return exp.ColumnDef(
        this=_ident(column.name), kind=column_type(column.type, dialect), constraints=constraints
    )


# --- statements ------------------------------------------------------------------------


def create_table(
    dialect: Dialect,
    db: str | None,
    table: str,
    schema: TableSchema,
    key: Sequence[str],
    extra: Iterable[Column] = (),
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of a target: the schema's columns, then ``extra``
    (the shard columns the routes add), and ``key`` as its primary key (the routes' key:
    the schema's own key, shard columns joined)."""
    name_fits(table, dialect, "table")
    for c in (*schema.columns, *extra):
        name_fits(c.name, dialect, f"column of {table!r}")
    keys = {name_key(k) for k in key}
    missing = keys - {c.key for c in (*schema.columns, *extra)}
    if missing:
        raise ValueError(f"key column(s) {sorted(missing)} are not columns of {table!r}")
    columns = [column_def(c, dialect, key=c.key in keys) for c in (*schema.columns, *extra)]
    body: list[exp.Expression] = [*columns]
    if key:
        body.append(exp.PrimaryKey(expressions=[_ident(k) for k in key]))
    properties = None
    if _sg(dialect) == "mysql":  # the server's default may be latin1: say the shards' own
        options: list[exp.Expression] = [
            exp.CharacterSetProperty(this=exp.var(schema.charset or DEFAULT_CHARSET), default=True)
        ]
        if schema.collation:
            named = collation(schema.collation, dialect)
            options.append(exp.CollateProperty(this=exp.var(named), default=True))
        properties = exp.Properties(expressions=options)
    create = exp.Create(
        this=exp.Schema(this=_table(db, table), expressions=body),
        kind="TABLE",
        exists=True,
        properties=properties,
    )
    return create.sql(_sg(dialect))


def _alter(dialect: Dialect, db: str | None, table: str, action: exp.Expression) -> str:
    return exp.Alter(this=_table(db, table), kind="TABLE", actions=[action]).sql(_sg(dialect))


def widens(current: ColumnType, wanted: ColumnType, dialect: Dialect) -> bool:
    """Whether the database holds every value of ``current`` in ``wanted`` (so changing
    the column loses nothing), by the types it gives them."""
    if current.base in ("ENUM", "SET") and wanted.base == current.base:
        # Members are values: the table keeps each row's member by its text (MySQL and
        # MariaDB convert ENUM and SET by value; PostgreSQL's TEXT holds any), so every
        # member kept is every value kept, whatever was added or reordered.
        return set(current.members) <= set(wanted.members)
    if current.base in ("ENUM", "SET") and wanted.base in ("CHAR", "VARCHAR", *TEXT_BYTES):
        # MariaDB and MySQL convert a member to its text: kept whole when the longest
        # value the column can hold fits (a SET's: every member, with their commas)
        return _longest(current, wanted.base) <= _room(wanted)
    have, want = column_type(current, dialect), column_type(wanted, dialect)
    if have == want:
        return True
    return _holds(have, want)


def _longest(t: ColumnType, into: str) -> int:
    """The longest value of an ENUM or SET column ``t``, in characters, or in UTF-8 bytes
    (an upper bound of any charset's) when ``into`` a TEXT kind."""

    def size(text: str) -> int:
        return len(text.encode("utf-8")) if into in TEXT_BYTES else len(text)

    sizes = [size(m) for m in t.members] or [0]
    return sum(sizes) + len(sizes) - 1 if t.base == "SET" else max(sizes)


def _room(t: ColumnType) -> int:
    """What a CHAR(n) or VARCHAR(n) holds in characters, a TEXT kind in bytes."""
    return TEXT_BYTES.get(t.base, t.length or 1)


_INT_RANK = {
    exp.DType.TINYINT: 1, exp.DType.UTINYINT: 1, exp.DType.SMALLINT: 2,
    exp.DType.USMALLINT: 2, exp.DType.MEDIUMINT: 3, exp.DType.UMEDIUMINT: 3,
    exp.DType.INT: 4, exp.DType.UINT: 4, exp.DType.BIGINT: 5, exp.DType.UBIGINT: 5,
}  # fmt: skip
_UNSIGNED = {exp.DType.UTINYINT, exp.DType.USMALLINT, exp.DType.UMEDIUMINT, exp.DType.UINT,
             exp.DType.UBIGINT}  # fmt: skip
_TEXTS = [exp.DType.TINYTEXT, exp.DType.TEXT, exp.DType.MEDIUMTEXT, exp.DType.LONGTEXT]
_BLOBS = [exp.DType.TINYBLOB, exp.DType.BLOB, exp.DType.MEDIUMBLOB, exp.DType.LONGBLOB]


def _size(t: exp.DataType, i: int) -> int | None:
    params = t.expressions
    if len(params) <= i:
        return None
    return int(params[i].this.this if isinstance(params[i], exp.DataTypeParam) else params[i].this)


_FAMILIES = (
    {*_INT_RANK, exp.DType.DECIMAL},
    {exp.DType.FLOAT, exp.DType.DOUBLE},
    {exp.DType.CHAR, exp.DType.VARCHAR, *_TEXTS},
    {exp.DType.BINARY, exp.DType.VARBINARY, *_BLOBS},
    {exp.DType.TIMESTAMP}, {exp.DType.TIMESTAMPTZ}, {exp.DType.DATETIME},
)  # fmt: skip


def changes_safely(current: ColumnType, wanted: ColumnType, dialect: Dialect) -> bool:
    """Whether changing the column loses no value silently: it widens (:func:`widens`), or
    it narrows within one family (a shorter VARCHAR, a smaller integer), which the
    database checks value by value and refuses, never truncates (MariaDB and MySQL in a
    strict ``sql_mode``, which the sink's connections set; PostgreSQL's assignment
    casts). A downstream narrowing is decided only once every shard ran it, so the rows
    fit; a row that does not is an error the operator sees, not a cut value."""
    if widens(current, wanted, dialect):
        return True
    have, want = column_type(current, dialect).this, column_type(wanted, dialect).this
    return any(have in f and want in f for f in _FAMILIES)


def _holds(have: exp.DataType, want: exp.DataType) -> bool:
    h, w = have.this, want.this
    if h in _INT_RANK and w in _INT_RANK:
        if (h in _UNSIGNED) == (w in _UNSIGNED):
            return _INT_RANK[w] >= _INT_RANK[h]
        # signed into unsigned loses negatives; unsigned into signed needs a wider type
        return h in _UNSIGNED and _INT_RANK[w] > _INT_RANK[h]
    if h in _INT_RANK and w == exp.DType.DECIMAL:
        digits = {1: 3, 2: 5, 3: 8, 4: 10, 5: 20}[_INT_RANK[h]]
        p, s = _size(want, 0) or 10, _size(want, 1) or 0
        return p - s >= digits
    if h == exp.DType.DECIMAL and w == exp.DType.DECIMAL:
        hp, hs = _size(have, 0) or 10, _size(have, 1) or 0
        wp, ws = _size(want, 0) or 10, _size(want, 1) or 0
        return ws >= hs and wp - ws >= hp - hs
    if h == exp.DType.FLOAT and w == exp.DType.DOUBLE:
        return True
    if h in _INT_RANK and w in (exp.DType.DOUBLE, exp.DType.FLOAT):
        # exact in the float's mantissa: 53 bits hold INT, 24 bits hold MEDIUMINT
        return _INT_RANK[h] <= (4 if w == exp.DType.DOUBLE else 3)
    if h in (exp.DType.VARCHAR, exp.DType.CHAR) and w in (exp.DType.VARCHAR, *_TEXTS):
        if w == exp.DType.VARCHAR:
            return (_size(want, 0) or 0) >= (_size(have, 0) or 0)
        return True
    if h in _TEXTS and w in _TEXTS:
        return _TEXTS.index(w) >= _TEXTS.index(h)
    if h in (exp.DType.VARBINARY, exp.DType.BINARY) and w in (exp.DType.VARBINARY, *_BLOBS):
        if w == exp.DType.VARBINARY:
            return (_size(want, 0) or 0) >= (_size(have, 0) or 0)
        return True
    if h in _BLOBS and w in _BLOBS:
        return _BLOBS.index(w) >= _BLOBS.index(h)
    if h in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPTZ, exp.DType.DATETIME) and w == h:
        return (_size(want, 0) or 0) >= (_size(have, 0) or 0)
    return False


def alter_statements(
    dialect: Dialect,
    db: str | None,
    table: str,
    existing: Mapping[str, ColumnType],
    specs: Sequence[AlterSpec],
    schema: TableSchema,
) -> list[str]:
    """The statements that take the table from ``existing`` (its columns, lower-case
    names, as the shards' types that made them) to ``schema``, one change each, only
    those still needed. Renames come from ``specs`` (a column renamed is moved, not added
    and dropped); a column leaves only when ``specs`` drop it (the shard columns the
    routes add are never dropped). Raises :class:`DialectConflict` for a type change
    that would lose values."""
    have = {name_key(k): v for k, v in existing.items()}
    out: list[str] = []
    for spec in specs:  # renames first: the columns below are looked up by their new name
        old, new = _renamed(spec)
        if (
            old is not None
            and new is not None
            and name_key(old) != name_key(new)
            and name_key(old) in have
            and name_key(new) not in have
        ):
            name_fits(new, dialect, f"column of {table!r}")
            action = exp.RenameColumn(this=_ident(old), to=_ident(new))
            out.append(_alter(dialect, db, table, action))
            have[name_key(new)] = have.pop(name_key(old))
    for spec in specs:
        gone = isinstance(spec, DropColumn) and schema.column(spec.name) is None
        if isinstance(spec, DropColumn) and gone and name_key(spec.name) in have:
            drop = exp.Drop(tables=[exp.column(_ident(spec.name))], kind="COLUMN")
            out.append(_alter(dialect, db, table, drop))
            have.pop(name_key(spec.name))
    keys = {name_key(k) for k in schema.primary_key}
    for column in schema.columns:
        current = have.get(column.key)
        if current is None:
            name_fits(column.name, dialect, f"column of {table!r}")
            out.append(_alter(dialect, db, table, column_def(column, dialect, key=False)))
            continue
        if _type_text(current, dialect) == _type_text(column.type, dialect):
            continue
        if not changes_safely(current, column.type, dialect):
            raise DialectConflict(
                f"column {column.name!r} of {table!r} is {_type_text(current, dialect)} in "
                f"the {dialect} table; the decision wants {_type_text(column.type, dialect)}, "
                "a type of another kind that would convert its values: change the column "
                "by hand (or recreate the table)"
            )
        out.append(_alter(dialect, db, table, _retype(column, dialect, column.key in keys)))
    return out


def _renamed(spec: AlterSpec) -> tuple[str | None, str | None]:
    if isinstance(spec, RenameColumn):
        return spec.old_name, spec.new_name
    if isinstance(spec, ChangeColumn):
        return spec.old_name, spec.column.name
    return None, None


def _retype(column: Column, dialect: Dialect, key: bool) -> exp.Expression:
    if _sg(dialect) == "mysql":  # MODIFY takes the whole definition (else it drops NOT NULL)
        return exp.ModifyColumn(this=column_def(column, dialect, key=key))
    # no USING: PostgreSQL's assignment cast refuses a value the new type cannot hold
    return exp.AlterColumn(this=_ident(column.name), dtype=column_type(column.type, dialect))
