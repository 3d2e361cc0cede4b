"""Typed schema changes: what a DDL statement does, independent of how it was written.

The parser (:mod:`schemas.ddl`) turns statements into these values and
:func:`schemas.apply` applies them to a :class:`~schemas.model.TableSchema`. Two
statements that differ only in whitespace, case, backticks or the optional ``COLUMN``
keyword give equal values, which is what pessimistic coordination compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.model import Column, Index, TableName, TableSchema, quote

__all__ = [
    "AddColumn",
    "AddIndex",
    "AddPrimaryKey",
    "AlterSpec",
    "AlterTable",
    "ChangeColumn",
    "CreateDatabase",
    "CreateTable",
    "CreateTableLike",
    "DropColumn",
    "DropConstraint",
    "DropDatabase",
    "DropIndex",
    "DropPrimaryKey",
    "DropTable",
    "ForeignKeyIndex",
    "ModifyColumn",
    "Position",
    "RenameColumn",
    "RenameIndex",
    "RenameTable",
    "SchemaChange",
    "SetDefault",
    "TableOptions",
    "TruncateTable",
]


@dataclass(frozen=True)
class Position:
    """``FIRST`` (``after`` is None) or ``AFTER after``."""

    after: str | None = None

    def to_sql(self) -> str:
        return "FIRST" if self.after is None else f"AFTER {quote(self.after)}"


# --- ALTER TABLE specifications -------------------------------------------------------


# ``if_exists``: MariaDB's ``IF [NOT] EXISTS`` inside ALTER TABLE: the specification is
# skipped where it does not apply (the column or index is there already, or is not).


@dataclass(frozen=True)
class AddColumn:
    column: Column
    position: Position | None = None
    if_exists: bool = False


@dataclass(frozen=True)
class DropColumn:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ModifyColumn:
    column: Column
    position: Position | None = None
    if_exists: bool = False


@dataclass(frozen=True)
class ChangeColumn:
    """``CHANGE old new_definition`` (also used for ``RENAME COLUMN old TO new``'s effect
    when the type is known; see :class:`RenameColumn`)."""

    old_name: str
    column: Column
    position: Position | None = None
    if_exists: bool = False


@dataclass(frozen=True)
class RenameColumn:
    old_name: str
    new_name: str


@dataclass(frozen=True)
class SetDefault:
    """``ALTER COLUMN c SET DEFAULT v`` (``default`` the literal) or ``DROP DEFAULT`` (None)."""

    name: str
    default: str | None


@dataclass(frozen=True)
class AddIndex:
    index: Index
    if_exists: bool = False


@dataclass(frozen=True)
class DropIndex:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class DropConstraint:
    """``DROP CONSTRAINT name``: drops the UNIQUE key of that name if there is one; a
    FOREIGN KEY or CHECK constraint of that name means nothing downstream."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ForeignKeyIndex:
    """What a FOREIGN KEY changes in the schema: InnoDB indexes its columns (an index
    named ``name``, else after its first column) unless an index already starts with them.
    The constraint itself means nothing downstream."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class AddPrimaryKey:
    columns: tuple[str, ...]


@dataclass(frozen=True)
class DropPrimaryKey:
    pass


@dataclass(frozen=True)
class RenameIndex:
    old_name: str
    new_name: str


@dataclass(frozen=True)
class TableOptions:
    """Table default charset/collation (``[DEFAULT] CHARACTER SET x [COLLATE y]``).

    With ``convert`` (``CONVERT TO CHARACTER SET``) every character column changes too.
    """

    charset: str | None = None
    collation: str | None = None
    convert: bool = False


AlterSpec = (
    AddColumn
    | DropColumn
    | ModifyColumn
    | ChangeColumn
    | RenameColumn
    | SetDefault
    | AddIndex
    | DropIndex
    | DropConstraint
    | ForeignKeyIndex
    | AddPrimaryKey
    | DropPrimaryKey
    | RenameIndex
    | TableOptions
)


# --- statements ------------------------------------------------------------------------


# ``ignored``: the clauses of the statement that have no downstream meaning (FOREIGN KEY,
# CHECK, PARTITION BY, table options...), as written; recorded for the operator, never
# compared.


@dataclass(frozen=True)
class CreateTable:
    table: TableName
    schema: TableSchema
    if_not_exists: bool = False
    ignored: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class CreateTableLike:
    table: TableName
    like: TableName
    if_not_exists: bool = False


@dataclass(frozen=True)
class AlterTable:
    table: TableName
    specs: tuple[AlterSpec, ...]
    ignored: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class RenameTable:
    """One ``old TO new`` pair; a statement renaming several tables gives several values."""

    old: TableName
    new: TableName


@dataclass(frozen=True)
class DropTable:
    table: TableName
    if_exists: bool = False


@dataclass(frozen=True)
class TruncateTable:
    table: TableName


@dataclass(frozen=True)
class CreateDatabase:
    name: str
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropDatabase:
    name: str
    if_exists: bool = False


SchemaChange = (
    CreateTable
    | CreateTableLike
    | AlterTable
    | RenameTable
    | DropTable
    | TruncateTable
    | CreateDatabase
    | DropDatabase
)
