"""Internal: apply a schema change to a table schema, as MySQL would.

Pure: a schema and a change in, the next schema out, or SchemaError naming the column
or index and the table when MySQL would reject the change. Exported as
:func:`schemas.ddl.apply`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from schemas._types import inherit_charset, literal_for
from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    CreateTable,
    DropColumn,
    DropConstraint,
    DropIndex,
    DropPrimaryKey,
    ForeignKeyIndex,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    SchemaChange,
    SetDefault,
    TableOptions,
)
from schemas.errors import SchemaError
from schemas.model import CHARSET_TYPES, Column, ColumnType, Index, TableSchema, name_key

__all__ = ["apply", "auto_index_name", "effect"]


def is_expression(part: str) -> bool:
    """Whether a key part is a functional one (kept as ``(expr)``), not a column name."""
    return part.startswith("(")


def auto_index_name(column: str, taken: Iterable[str]) -> str:
    """MySQL's name for an unnamed index: its first column (``functional_index`` for an
    expression), then ``_2``, ``_3`` on clashes."""
    column = "functional_index" if is_expression(column) else column
    keys = {name_key(t) for t in taken} | {"primary"}
    name, n = column, 2
    while name_key(name) in keys:
        name, n = f"{column}_{n}", n + 1
    return name


def apply(change: SchemaChange, schema: TableSchema | None) -> TableSchema:
    """The schema after ``change``: CREATE TABLE gives its schema, ALTER TABLE applies its
    specifications in order. Other statements are not schema transforms (the coordinator
    handles renames, drops and truncates) and raise SchemaError."""
    if isinstance(change, CreateTable):
        return change.schema
    if not isinstance(change, AlterTable):
        raise SchemaError(f"{type(change).__name__} is not a schema transform")
    if schema is None:
        raise SchemaError(f"cannot alter table {change.table}: its schema is unknown")
    original = schema
    for spec in _one_statement(change.specs, schema):
        if not _gone(spec, schema, original):
            schema = _spec(spec, schema)
    return schema


# A column's name while two columns of one statement swap names (``RENAME COLUMN a TO b,
# RENAME COLUMN b TO a``); never left in a schema.
_SWAP = "\x00shardmerge swap {}"


def _one_statement(specs: tuple[AlterSpec, ...], schema: TableSchema) -> list[AlterSpec]:
    """The specifications of one ALTER TABLE, in the order they apply here. MySQL resolves
    every old column name of a statement against the table as it was before it, so a
    rename may take a name that a later specification of the same statement frees (a swap:
    ``CHANGE a b INT, CHANGE b a INT``). Here each applies in turn, so the column whose
    name is taken first moves to a name of its own, and the later specification names it
    by that."""
    out: list[AlterSpec] = []
    later = list(specs)
    for k in range(len(specs)):
        spec = later[k]
        if isinstance(spec, ChangeColumn | RenameColumn):
            old = name_key(spec.old_name)
            new = spec.column.name if isinstance(spec, ChangeColumn) else spec.new_name
            taken = name_key(new) != old and schema.has_column(new)
            frees = [j for j in range(k + 1, len(specs)) if _old_name(later[j]) == name_key(new)]
            if taken and frees:
                hold = _SWAP.format(k)
                out.append(RenameColumn(new, hold))
                for j in frees:
                    later[j] = _with_old_name(later[j], hold)
        out.append(spec)
    return out


def _old_name(spec: AlterSpec) -> str | None:
    if isinstance(spec, ChangeColumn | RenameColumn):
        return name_key(spec.old_name)
    if isinstance(spec, DropColumn):
        return name_key(spec.name)
    return None


def _with_old_name(spec: AlterSpec, name: str) -> AlterSpec:
    if isinstance(spec, ChangeColumn | RenameColumn):
        return dataclasses.replace(spec, old_name=name)
    assert isinstance(spec, DropColumn)
    return dataclasses.replace(spec, name=name)


def _gone(spec: AlterSpec, schema: TableSchema, original: TableSchema) -> bool:
    """A DROP INDEX of an index the table had before the statement, that an earlier DROP
    COLUMN of the same statement took away with its last column: MySQL drops what the
    statement names from the table as it was (``DROP COLUMN b, DROP INDEX ib``)."""
    return (
        isinstance(spec, DropIndex)
        and schema.index(spec.name) is None
        and original.index(spec.name) is not None
    )


def _where(schema: TableSchema) -> str:
    return f"table {schema.name or '?'!r}"


def _need_column(schema: TableSchema, name: str) -> Column:
    column = schema.column(name)
    if column is None:
        raise SchemaError(f"unknown column {name!r} in {_where(schema)}")
    return column


def _need_index(schema: TableSchema, name: str) -> Index:
    index = schema.index(name)
    if index is None:
        raise SchemaError(f"unknown index {name!r} in {_where(schema)}")
    return index


def _defined(schema: TableSchema, column: Column) -> Column:
    """A column as MySQL stores it when (re)defined in ``schema``: the table's charset."""
    ctype = inherit_charset(column.type, schema.charset, schema.collation)
    return dataclasses.replace(column, type=ctype)


def _place(
    schema: TableSchema, columns: list[Column], column: Column, position: Position | None, at: int
) -> list[Column]:
    """``columns`` with ``column`` inserted at ``position`` (or at index ``at``)."""
    if position is not None and position.after is None:
        at = 0
    elif position is not None and position.after is not None:
        keys = [c.key for c in columns]
        if name_key(position.after) not in keys:
            raise SchemaError(f"unknown column {position.after!r} in AFTER, in {_where(schema)}")
        at = keys.index(name_key(position.after)) + 1
    return [*columns[:at], column, *columns[at:]]


def _replace_column(
    schema: TableSchema, old: str, column: Column, position: Position | None, define: bool = True
) -> TableSchema:
    """``old`` replaced by ``column``, in place unless ``position`` moves it; key and index
    references follow a rename. ``define``: a redefinition (MODIFY, CHANGE) that takes the
    table's charset, rather than a rename or a new default."""
    current = _need_column(schema, old)
    clash = schema.column(column.name)
    if clash is not None and clash.key != current.key:
        raise SchemaError(f"column {column.name!r} already exists in {_where(schema)}")
    keys = [c.key for c in schema.columns]
    at = keys.index(current.key)
    rest = [c for c in schema.columns if c.key != current.key]
    if define:
        column = _defined(schema, column)
        if any(name_key(c) == current.key for c in schema.primary_key):
            column = dataclasses.replace(column, nullable=False)  # MySQL keeps key columns NOT NULL
    columns = _place(schema, rest, column, position, at)

    def rename(name: str) -> str:
        return column.name if name_key(name) == current.key else name

    return schema.replace(
        columns=tuple(columns),
        primary_key=tuple(rename(c) for c in schema.primary_key),
        indexes=tuple(
            dataclasses.replace(i, columns=tuple(rename(c) for c in i.columns))
            for i in schema.indexes
        ),
    )


def _skipped(spec: AlterSpec, schema: TableSchema) -> bool:
    """An ``IF [NOT] EXISTS`` specification that does not apply to ``schema``."""
    if not getattr(spec, "if_exists", False):
        return False
    if isinstance(spec, AddColumn):
        return schema.has_column(spec.column.name)
    if isinstance(spec, DropColumn):
        return not schema.has_column(spec.name)
    if isinstance(spec, ModifyColumn):
        return not schema.has_column(spec.column.name)
    if isinstance(spec, ChangeColumn):
        return not schema.has_column(spec.old_name)
    if isinstance(spec, AddIndex):
        return bool(spec.index.name) and schema.index(spec.index.name) is not None
    if isinstance(spec, DropIndex | DropConstraint):
        return schema.index(spec.name) is None
    return False


def _spec(spec: AlterSpec, schema: TableSchema) -> TableSchema:
    if _skipped(spec, schema):
        return schema
    if isinstance(spec, ForeignKeyIndex):
        return foreign_key_index(schema, spec)
    if isinstance(spec, DropConstraint):
        index = schema.index(spec.name)
        return schema if index is None else _spec(DropIndex(index.name), schema)
    if isinstance(spec, AddColumn):
        if schema.has_column(spec.column.name):
            raise SchemaError(f"column {spec.column.name!r} already exists in {_where(schema)}")
        columns = list(schema.columns)
        column = _defined(schema, spec.column)
        return schema.with_columns(_place(schema, columns, column, spec.position, len(columns)))
    if isinstance(spec, ModifyColumn):
        return _replace_column(schema, spec.column.name, spec.column, spec.position)
    if isinstance(spec, ChangeColumn):
        return _replace_column(schema, spec.old_name, spec.column, spec.position)
    if isinstance(spec, RenameColumn):
        column = _need_column(schema, spec.old_name)
        return _replace_column(schema, spec.old_name, column.renamed(spec.new_name), None, False)
    if isinstance(spec, DropColumn):
        return _drop_column(schema, spec.name)
    if isinstance(spec, SetDefault):
        column = _need_column(schema, spec.name)
        default = literal_for(spec.default, column.type)
        if default == "NULL":
            if not column.nullable:
                raise SchemaError(
                    f"column {column.name!r} is NOT NULL and cannot have DEFAULT NULL,"
                    f" in {_where(schema)}"
                )
            default = None
        column = dataclasses.replace(column, default=default)
        return _replace_column(schema, spec.name, column, None, define=False)
    if isinstance(spec, AddIndex):
        return _add_index(schema, spec.index)
    if isinstance(spec, DropIndex):
        index = _need_index(schema, spec.name)
        return schema.replace(indexes=tuple(i for i in schema.indexes if i is not index))
    if isinstance(spec, RenameIndex):
        index = _need_index(schema, spec.old_name)
        if schema.index(spec.new_name) not in (None, index):
            raise SchemaError(f"index {spec.new_name!r} already exists in {_where(schema)}")
        renamed = dataclasses.replace(index, name=spec.new_name)
        return schema.replace(indexes=tuple(renamed if i is index else i for i in schema.indexes))
    if isinstance(spec, AddPrimaryKey):
        return _add_primary_key(schema, spec.columns)
    if isinstance(spec, DropPrimaryKey):
        if not schema.primary_key:
            raise SchemaError(f"{_where(schema)} has no primary key to drop")
        return schema.replace(primary_key=())
    return _table_options(schema, spec)


def foreign_key_index(schema: TableSchema, fk: ForeignKeyIndex) -> TableSchema:
    """``schema`` with the index InnoDB makes for a FOREIGN KEY, if no index starts with
    its columns (the primary key counts)."""
    keys = tuple(name_key(c) for c in fk.columns)
    if not keys:
        return schema
    existing = [schema.primary_key, *(i.columns for i in schema.indexes)]
    if any(tuple(name_key(c) for c in cols[: len(keys)]) == keys for cols in existing):
        return schema
    name = fk.name
    if not name or schema.index(name) is not None:
        name = auto_index_name(fk.columns[0], [i.name for i in schema.indexes])
    return _add_index(schema, Index(name, fk.columns))


def _drop_column(schema: TableSchema, name: str) -> TableSchema:
    column = _need_column(schema, name)
    if len(schema.columns) == 1:
        raise SchemaError(f"cannot drop {column.name!r}, the only column of {_where(schema)}")
    indexes = []
    for index in schema.indexes:
        kept = tuple(c for c in index.columns if name_key(c) != column.key)
        if kept:  # an index left without columns is dropped, as in MySQL
            indexes.append(dataclasses.replace(index, columns=kept))
    return schema.replace(
        columns=tuple(c for c in schema.columns if c.key != column.key),
        primary_key=tuple(c for c in schema.primary_key if name_key(c) != column.key),
        indexes=tuple(indexes),
    )


def _add_index(schema: TableSchema, index: Index) -> TableSchema:
    for name in index.columns:
        if not is_expression(name) and not schema.has_column(name):
            raise SchemaError(
                f"index {index.name or name!r} names unknown column {name!r} in {_where(schema)}"
            )
    name = index.name or auto_index_name(index.columns[0], [i.name for i in schema.indexes])
    if schema.index(name) is not None or name_key(name) == "primary":
        raise SchemaError(f"index {name!r} already exists in {_where(schema)}")
    return schema.replace(indexes=(*schema.indexes, dataclasses.replace(index, name=name)))


def _add_primary_key(schema: TableSchema, names: tuple[str, ...]) -> TableSchema:
    if schema.primary_key:
        raise SchemaError(f"{_where(schema)} already has a primary key")
    keys = {name_key(_need_column(schema, n).name) for n in names}
    # Primary key columns are NOT NULL (MySQL makes them so).
    columns = [
        dataclasses.replace(c, nullable=False) if c.key in keys else c for c in schema.columns
    ]
    return schema.replace(columns=tuple(columns), primary_key=names)


def _table_options(schema: TableSchema, spec: TableOptions) -> TableSchema:
    charset, collation = spec.charset, spec.collation
    if not spec.convert:
        return schema.replace(charset=charset, collation=collation)
    columns = tuple(
        dataclasses.replace(
            c,
            type=dataclasses.replace(
                _widened(c.type, c.type.charset or schema.charset, charset),
                charset=charset,
                collation=collation,
            ),
        )
        if c.type.base in CHARSET_TYPES
        else c
        for c in schema.columns
    )
    return schema.replace(columns=columns, charset=charset, collation=collation)


# The most bytes one character takes, per character set (MySQL's mbmaxlen).
CHAR_BYTES = {
    **dict.fromkeys(
        [
            "armscii8",
            "ascii",
            "binary",
            "cp1250",
            "cp1251",
            "cp1256",
            "cp1257",
            "cp850",
            "cp852",
            "cp866",
            "dec8",
            "geostd8",
            "greek",
            "hebrew",
            "hp8",
            "keybcs2",
            "koi8r",
            "koi8u",
            "latin1",
            "latin2",
            "latin5",
            "latin7",
            "macce",
            "macroman",
            "swe7",
            "tis620",
        ],
        1,
    ),
    **dict.fromkeys(["big5", "cp932", "euckr", "gb2312", "gbk", "sjis", "ucs2"], 2),
    **dict.fromkeys(["eucjpms", "ujis", "utf8", "utf8mb3"], 3),
    **dict.fromkeys(["gb18030", "utf16", "utf16le", "utf32", "utf8mb4"], 4),
}
TEXT_BYTES = {"TINYTEXT": 255, "TEXT": 65_535, "MEDIUMTEXT": 16_777_215, "LONGTEXT": 2**32 - 1}
_VARCHAR_BYTES = 65_535


def _widened(ctype: ColumnType, old: str | None, new: str | None) -> ColumnType:
    """``ctype`` as ``CONVERT TO CHARACTER SET new`` leaves it (from ``old``): a TEXT type
    or VARCHAR that could not hold as many characters in the new charset takes the
    smallest TEXT type that can, as the server changes it (TEXT in utf8 is MEDIUMTEXT in
    utf8mb4). An unknown charset on either side changes nothing."""
    before = CHAR_BYTES.get((old or "").lower())
    after = CHAR_BYTES.get((new or "").lower())
    if before is None or after is None or after <= before:
        return ctype
    if ctype.base in TEXT_BYTES:
        need = TEXT_BYTES[ctype.base] // before * after
    elif ctype.base == "VARCHAR" and ctype.length is not None:
        need = ctype.length * after
        if need <= _VARCHAR_BYTES:
            return ctype
    else:
        return ctype
    for base, size in TEXT_BYTES.items():
        if need <= size and size >= TEXT_BYTES.get(ctype.base, 0):
            return dataclasses.replace(ctype, base=base, length=None)
    return dataclasses.replace(ctype, base="LONGTEXT", length=None)


def effect(
    change: AlterTable, schema: TableSchema
) -> tuple[TableSchema, tuple[tuple[str, str | None], ...]]:
    """What ``change`` does to ``schema``: the schema after it, and where each of its
    columns comes from (the column of ``schema`` it keeps the data of, by name key, or
    None for a new column).

    Two statements with equal effects are the same change, however written:
    ``RENAME COLUMN a TO c`` and ``CHANGE a c INT`` (a being INT), ``MODIFY a ...`` and
    ``CHANGE a a ...``. The origins tell a rename (data kept) from a drop and an add.
    """
    origin: dict[str, str | None] = {c.key: c.key for c in schema.columns}
    original = schema
    for spec in _one_statement(change.specs, schema):
        if _gone(spec, schema, original):
            continue
        after = _spec(spec, schema)
        if isinstance(spec, ChangeColumn | RenameColumn) and not _skipped(spec, schema):
            old = name_key(spec.old_name)
            new = name_key(spec.column.name if isinstance(spec, ChangeColumn) else spec.new_name)
            origin[new] = origin.pop(old)
        present = {c.key for c in after.columns}
        origin = {k: v for k, v in origin.items() if k in present}
        origin.update({k: None for k in present if k not in origin})
        schema = after
    return schema, tuple(sorted(origin.items()))
