"""Rendering typed changes back to MySQL text.

Used for the downstream statement of a decision (logs, dashboard, JDBC sinks) and to keep
pending DDLs in the coordinator's JSON state as text. ``parse_ddl(alter_sql(t, specs))``
gives the same specs back (a test checks it).
"""

from __future__ import annotations

from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    ChangeColumn,
    DropColumn,
    DropConstraint,
    DropIndex,
    DropPrimaryKey,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    SetDefault,
    TableOptions,
)
from schemas.model import quote

__all__ = ["alter_sql", "spec_sql"]


def _position(position: Position | None) -> str:
    return "" if position is None else " " + position.to_sql()


def spec_sql(spec: AlterSpec) -> str:
    """One ALTER TABLE specification, e.g. ``ADD COLUMN `b` INT NULL AFTER `a```."""
    text = _spec_sql(spec)
    if getattr(spec, "if_exists", False):
        # MariaDB's spelling: the guard follows the first keyword (and COLUMN / INDEX).
        verb, _, rest = text.partition(" ")
        noun = ""
        if rest.split(" ", 1)[0] in ("COLUMN", "INDEX", "KEY", "CONSTRAINT"):
            noun, _, rest = rest.partition(" ")
            noun += " "
        guard = "IF NOT EXISTS" if verb == "ADD" else "IF EXISTS"
        return f"{verb} {noun}{guard} {rest}"
    return text


def _spec_sql(spec: AlterSpec) -> str:
    match spec:
        case AddColumn(column, position):
            return f"ADD COLUMN {column.to_sql()}{_position(position)}"
        case DropColumn(name):
            return f"DROP COLUMN {quote(name)}"
        case ModifyColumn(column, position):
            return f"MODIFY COLUMN {column.to_sql()}{_position(position)}"
        case ChangeColumn(old_name, column, position):
            return f"CHANGE COLUMN {quote(old_name)} {column.to_sql()}{_position(position)}"
        case RenameColumn(old_name, new_name):
            return f"RENAME COLUMN {quote(old_name)} TO {quote(new_name)}"
        case SetDefault(name, None):
            return f"ALTER COLUMN {quote(name)} DROP DEFAULT"
        case SetDefault(name, default):
            return f"ALTER COLUMN {quote(name)} SET DEFAULT {default}"
        case AddIndex(index):
            return f"ADD {index.to_sql()}"
        case DropIndex(name):
            return f"DROP INDEX {quote(name)}"
        case DropConstraint(name):
            return f"DROP CONSTRAINT {quote(name)}"
        case AddPrimaryKey(columns):
            return "ADD PRIMARY KEY (" + ", ".join(quote(c) for c in columns) + ")"
        case DropPrimaryKey():
            return "DROP PRIMARY KEY"
        case RenameIndex(old_name, new_name):
            return f"RENAME INDEX {quote(old_name)} TO {quote(new_name)}"
        case TableOptions(charset, collation, convert):
            parts = []
            if charset:
                prefix = "CONVERT TO CHARACTER SET" if convert else "DEFAULT CHARACTER SET"
                parts.append(f"{prefix} {charset}")
            if collation:
                parts.append(f"COLLATE {collation}")
            return " ".join(parts)
    raise TypeError(f"not an ALTER TABLE specification: {spec!r}")


def alter_sql(table: str, specs: tuple[AlterSpec, ...]) -> str:
    """``ALTER TABLE `table` spec, spec, ...``."""
    return f"ALTER TABLE {quote(table)} " + ", ".join(spec_sql(s) for s in specs)
