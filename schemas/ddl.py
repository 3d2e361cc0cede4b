"""MySQL DDL statements as typed schema changes (parsed with sqlglot), and applying them.

``parse_ddl`` reads one statement into :mod:`schemas.changes` values, normalised so that
equal meaning gives equal values (``INTEGER`` is ``INT``, ``utf8`` is ``utf8mb3``, a
character column without charset takes the table's). ``normalize`` then routes a change
to its target and folds identifier case, which is what pessimistic coordination compares.
``apply`` (in :mod:`schemas._apply`) turns a schema and a change into the next schema.

Unnamed indexes in ``ALTER TABLE ... ADD INDEX (a)`` have the empty name: MySQL names
them after their first column only once it sees the table, and so does ``apply``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from schemas import _sqlglot_clauses as clauses
from schemas import _sqlglot_compat as compat
from schemas import _sqlglot_plans as plans
from schemas._apply import apply, auto_index_name, effect, foreign_key_index, is_expression
from schemas._normalize import normalize, normalize_schema
from schemas._types import (
    UnsupportedType,
    charset_name,
    collation_name,
    column_type,
    default_literal,
    inherit_charset,
    literal_for,
)
from schemas.changes import (
    AddColumn,
    AddIndex,
    AddPrimaryKey,
    AlterSpec,
    AlterTable,
    ChangeColumn,
    CreateDatabase,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropConstraint,
    DropDatabase,
    DropIndex,
    DropPrimaryKey,
    DropTable,
    ForeignKeyIndex,
    ModifyColumn,
    Position,
    RenameColumn,
    RenameIndex,
    RenameTable,
    SchemaChange,
    SetDefault,
    TableOptions,
    TruncateTable,
)
from schemas.errors import DDLError, SchemaError
from schemas.model import Column, ColumnType, Index, TableName, TableSchema, name_key

__all__ = [
    "InvalidDDLError",
    "apply",
    "effect",
    "normalize",
    "normalize_schema",
    "parse_create_table",
    "parse_ddl",
    "parse_type",
]

_IGNORED_CONSTRAINTS = (
    exp.CommentColumnConstraint,
    exp.OnUpdateColumnConstraint,
    exp.CharacterSetColumnConstraint,  # read by column_type
    exp.CollateColumnConstraint,
    exp.ZeroFillColumnConstraint,
    exp.InvisibleColumnConstraint,
    exp.BinaryColumnConstraint,  # read by column_type: the charset's binary collation
)
_INDEX_KINDS = {None: "INDEX", "FULLTEXT": "FULLTEXT", "SPATIAL": "SPATIAL"}


class InvalidDDLError(DDLError, SchemaError):
    """A statement that parses but that MySQL rejects (``a INT NOT NULL DEFAULT NULL``,
    a duplicate column). Both a DDLError (the statement is named) and a SchemaError."""


class _Fail(Exception):
    """Raised inside the walk with a reason; parse_ddl adds the statement."""


def parse_ddl(sql: str) -> tuple[SchemaChange, ...]:
    """One MySQL DDL statement as typed changes; DDLError when it cannot be handled.

    A statement is parsed once: the engine asks what a control event does (which tables
    it names) before the coordinator takes it, and the changes are frozen values, so the
    last few thousand statements that parse are kept with what they read as.

    A rollout runs one ALTER on every shard, the same text but for the table's name: an
    ``ALTER TABLE name ...`` whose name is a plain or backticked identifier is read once
    per shape (the name swapped for a placeholder) and the shard's name put back, so a
    rollout over 4,096 shards tokenizes its statement once, not 4,096 times. Anything the
    shape does not settle (a change other than the ALTER of that table, an error: named
    with the real statement) is read from the statement itself."""
    shape = _alter_shape(sql)
    if shape is None:
        return _parsed(sql)
    table, normalized = shape
    try:
        changes = _parsed(normalized)
    except DDLError:
        return _parsed(sql)
    alters = [c for c in changes if isinstance(c, AlterTable) and c.table == _SHAPE_TABLE]
    if len(alters) != len(changes):
        return _parsed(sql)
    return tuple(dataclasses.replace(c, table=table) for c in alters)


# ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] then the table: [db.]name, each part a plain
# identifier or a backticked one, then whitespace and the rest of the statement.
_PART = r"(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)"
_ALTER_HEAD = re.compile(
    r"(\s*ALTER\s+(?:(?:ONLINE|IGNORE)\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?)"
    rf"(?:({_PART})\.)?({_PART})(\s+\S.*)",
    re.IGNORECASE | re.DOTALL,
)
_SHAPE_NAME = "__shardmerge_shape_table__"
_SHAPE_TABLE = TableName(_SHAPE_NAME)


class _NoShapes(logging.Filter):
    """sqlglot warns about a statement it falls back on (``... contains unsupported
    syntax``); a shape is not a statement anyone wrote, and the statement itself is read
    again, with its own warning, when the shape fails."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _SHAPE_NAME not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_NoShapes())


def _alter_shape(sql: str) -> tuple[TableName, str] | None:
    """(the table, the statement with the table swapped for the placeholder), or None
    when the statement is not an ALTER TABLE of a name the shape can stand for."""
    m = _ALTER_HEAD.fullmatch(sql)
    if m is None or _SHAPE_NAME in sql.lower():
        return None
    head, db, name, rest = m.groups()
    schema = _identifier(db) if db is not None else None
    return TableName(_identifier(name), schema), head + _SHAPE_NAME + rest


def _identifier(part: str) -> str:
    """A head's identifier as its name (a plain word is what it says, keywords included:
    the whole statement reads them the same, tests/unit/test_ddl_shapes.py)."""
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


@functools.lru_cache(maxsize=4096)
def _parsed(sql: str) -> tuple[SchemaChange, ...]:
    try:
        return _parse(sql)
    except DDLError:
        raise
    except SchemaError as exc:
        raise InvalidDDLError(sql, str(exc)) from exc
    except (_Fail, UnsupportedType, clauses.Refused) as exc:
        raise DDLError(sql, str(exc)) from None
    except SqlglotError as exc:
        raise DDLError(sql, f"cannot parse: {_plain(exc)}") from exc
    except Exception as exc:  # a statement sqlglot reads in a shape not foreseen here
        raise DDLError(sql, f"cannot read the statement: {type(exc).__name__}: {exc}") from exc


def parse_create_table(sql: str) -> TableSchema:
    """The schema a ``CREATE TABLE t (...)`` statement defines."""
    changes = parse_ddl(sql)
    if len(changes) == 2 and isinstance(changes[0], DropTable):
        changes = changes[1:]  # MariaDB's CREATE OR REPLACE TABLE: the table it defines
    if len(changes) != 1 or not isinstance(changes[0], CreateTable):
        raise DDLError(sql, "expected CREATE TABLE with a column list")
    return changes[0].schema


def parse_type(text: str) -> ColumnType:
    """A bare column type such as ``decimal(10, 2) unsigned`` or ``VARCHAR(10) CHARSET x``."""
    schema = parse_create_table(f"CREATE TABLE t (c {text})")
    column = schema.columns[0]
    if column != Column("c", column.type) or schema.indexes or schema.primary_key:
        raise DDLError(text, "expected a type only")
    return inherit_charset(column.type, None, None)


def _parse(statement: str) -> tuple[SchemaChange, ...]:
    sql = clauses.unhide(statement)
    if not compat.tokenize(sql):
        raise _Fail("empty statement")
    sql = compat.without_lock_wait(sql)
    database = compat.create_database(sql)
    if database is not None:
        return (CreateDatabase(database[0], if_not_exists=database[1]),)
    pairs = compat.rename_table_pairs(sql)
    if pairs is not None:
        return tuple(RenameTable(old, new) for old, new in pairs)
    split = compat.alter_specs(compat.index_statement_as_alter(sql) or sql)
    if split is not None:
        return _alter(statement, *split)
    notes, replace = clauses.Notes(), False
    create = plans.create_table(sql)
    if create is not None:
        sql, notes, replace = create
    tree = sqlglot.parse_one(compat.fix_type_aliases(sql), read="mysql")
    if isinstance(tree, exp.Create):
        change = _create(tree, notes)
        if replace and isinstance(change, CreateTable):
            # MariaDB's CREATE OR REPLACE TABLE is DROP TABLE IF EXISTS, then CREATE TABLE.
            return (DropTable(change.table, if_exists=True), change)
        return (change,)
    if isinstance(tree, exp.Drop):
        return _drop(tree)
    if isinstance(tree, exp.TruncateTable):
        return tuple(TruncateTable(_table(t)) for t in tree.expressions)
    if isinstance(tree, exp.Command):  # sqlglot could not read past its first words
        raise _Fail("unsupported statement or clause")
    raise _Fail(f"not a supported DDL statement ({tree.key.upper()})")


def _table(node: exp.Expression) -> TableName:
    if not isinstance(node, exp.Table) or not node.name:
        raise _Fail(f"expected a table name, got {node.sql(dialect='mysql')!r}")
    return TableName(node.name, node.db or None)


# --- CREATE / DROP ---------------------------------------------------------------------


def _create(tree: exp.Create, notes: clauses.Notes) -> SchemaChange:
    kind = str(tree.args.get("kind") or "").upper()
    exists = bool(tree.args.get("exists"))
    if kind in ("DATABASE", "SCHEMA"):
        return CreateDatabase(tree.this.name or tree.this.db, if_not_exists=exists)
    if kind != "TABLE":
        raise _Fail(f"CREATE {kind} is not supported")
    props = list(tree.args["properties"].expressions) if tree.args.get("properties") else []
    if any(isinstance(p, exp.TemporaryProperty) for p in props):
        raise _Fail("temporary tables are not replicated")
    like = next((p for p in props if isinstance(p, exp.LikeProperty)), None)
    if like is not None:
        return CreateTableLike(_table(tree.this), _table(like.this), if_not_exists=exists)
    if not isinstance(tree.this, exp.Schema) or tree.expression is not None:
        raise _Fail("CREATE TABLE without a column list (or with AS SELECT) is not supported")
    table = _table(tree.this.this)
    schema = _create_schema(table, tree.this, props, notes)
    return CreateTable(table, schema, if_not_exists=exists, ignored=tuple(notes.ignored))


def _create_schema(
    table: TableName, body: exp.Schema, props: list[exp.Expression], notes: clauses.Notes
) -> TableSchema:
    options = _table_options(props) or TableOptions()
    columns: list[Column] = []
    primary: list[tuple[str, ...]] = []
    indexes: list[Index] = []
    for item in body.expressions:
        if isinstance(item, exp.ColumnDef):
            column, specs = _column(item, notes)
            ctype = inherit_charset(column.type, options.charset, options.collation)
            columns.append(dataclasses.replace(column, type=ctype))
            for spec in specs:
                if isinstance(spec, AddPrimaryKey):
                    primary.append(spec.columns)
                elif isinstance(spec, AddIndex):
                    indexes.append(spec.index)
        else:
            spec = _constraint(item)
            if isinstance(spec, AddPrimaryKey):
                primary.append(spec.columns)
            else:
                indexes.append(spec.index)
    if len(primary) > 1:
        raise SchemaError(f"table {table} has more than one primary key")
    pk = primary[0] if primary else ()
    pk_keys = {name_key(c) for c in pk}
    columns = [dataclasses.replace(c, nullable=False) if c.key in pk_keys else c for c in columns]
    named: list[Index] = []
    for index in indexes:
        name = index.name or auto_index_name(index.columns[0], [i.name for i in named])
        if any(i.key == name_key(name) for i in named):
            raise SchemaError(f"duplicate index {name!r} in table {table}")
        named.append(dataclasses.replace(index, name=name))
    schema = TableSchema(
        columns=tuple(columns),
        primary_key=pk,
        indexes=tuple(named),
        charset=options.charset,
        collation=options.collation,
        name=table.table,
    )
    for name, fk_columns in notes.foreign_keys:
        schema = foreign_key_index(schema, ForeignKeyIndex(name, fk_columns))
    for index in schema.indexes:
        missing = [c for c in index.columns if not is_expression(c) and not schema.has_column(c)]
        if missing:
            raise SchemaError(f"index {index.name!r} names unknown column {missing[0]!r}")
    return schema


def _drop(tree: exp.Drop) -> tuple[SchemaChange, ...]:
    kind = str(tree.args.get("kind") or "").upper()
    exists = bool(tree.args.get("exists"))
    if tree.args.get("temporary"):
        raise _Fail("temporary tables are not replicated")
    if kind == "TABLE":
        return tuple(DropTable(_table(t), if_exists=exists) for t in tree.args["tables"])
    if kind in ("DATABASE", "SCHEMA"):
        (node,) = tree.args["tables"]
        return (DropDatabase(node.name or node.db, if_exists=exists),)
    raise _Fail(f"DROP {kind} is not supported")


# --- ALTER TABLE -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """What one ALTER TABLE specification reads as, whatever table it is run on."""

    specs: tuple[AlterSpec, ...]
    ignored: tuple[str, ...]
    renamed_to: tuple[TableName, ...]  # RENAME TO: the table's new names


# A rollout runs the same specification on every shard, each under its own table name:
# what a specification text reads as is kept (the last few thousand), so that a statement
# seen on one shard costs the next shard only the split of its head from its specs.
# Only what parses is kept: an error is found again, and names the statement it is in.
_SPECS: OrderedDict[str, _Spec] = OrderedDict()
_SPECS_KEPT = 4096


def _alter(sql: str, head: compat.AlterHead, specs: list[str]) -> tuple[SchemaChange, ...]:
    out: list[AlterSpec] = []
    ignored: list[str] = []
    renames: list[RenameTable] = []
    for text in specs:
        spec = _SPECS.get(text)
        if spec is None:
            spec = _SPECS[text] = _alter_spec(sql, head, text)
            if len(_SPECS) > _SPECS_KEPT:
                _SPECS.popitem(last=False)
        else:
            _SPECS.move_to_end(text)
        out.extend(spec.specs)
        ignored.extend(spec.ignored)
        renames.extend(RenameTable(head.table, new) for new in spec.renamed_to)
    if head.ignore and any(
        isinstance(s, AddPrimaryKey) or (isinstance(s, AddIndex) and s.index.kind == "UNIQUE")
        for s in out
    ):
        raise _Fail(
            "ALTER IGNORE TABLE adding a unique key deletes the duplicate rows upstream, with "
            "no row events: skip it, or replace it with the DELETEs it amounts to and the ALTER"
        )
    changes: list[SchemaChange] = []
    if out or ignored or not renames:
        changes.append(AlterTable(head.table, tuple(out), ignored=tuple(ignored)))
    return (*changes, *renames)


def _alter_spec(sql: str, head: compat.AlterHead, spec: str) -> _Spec:
    """One specification of the ALTER TABLE statement ``sql`` (named in errors)."""
    out: list[AlterSpec] = []
    convert = compat.convert_charset(sql, spec)
    if convert is not None:
        converted = TableOptions(charset_name(convert[0]), _collation(convert[1]), True)
        return _Spec((converted,), (), ())
    plan = plans.alter_plan(sql, spec)
    ignored = tuple(plan.notes.ignored)
    out.extend(ForeignKeyIndex(n, cols) for n, cols in plan.notes.foreign_keys)
    if plan.kind == "ignore":
        return _Spec(tuple(out), ignored, ())
    if plan.kind == "drop_constraint":
        out.append(DropConstraint(plan.text, if_exists=plan.guard))
        return _Spec(tuple(out), ignored, ())
    if plan.kind == "options":
        if plan.text:
            tree = sqlglot.parse_one(f"{head.sql} {plan.text}", read="mysql")
            options = _table_options(list(tree.args.get("options") or []))
            out.extend([options] if options is not None else [])
        return _Spec(tuple(out), ignored, ())
    tree = sqlglot.parse_one(f"{head.sql} {compat.fix_type_aliases(plan.text)}", read="mysql")
    if not isinstance(tree, exp.Alter):
        raise _Fail(f"unsupported ALTER TABLE specification {spec!r}")
    renamed_to: list[TableName] = []
    for action in tree.args.get("actions") or []:
        if isinstance(action, exp.AlterRename):
            renamed_to.append(_table(action.this))
        else:
            out.extend(_guarded(s, plan.guard) for s in _action(action, spec, plan.notes))
    options = _table_options(list(tree.args.get("options") or []))
    if options is not None:
        out.append(options)
    return _Spec(tuple(out), ignored, tuple(renamed_to))


def _guarded(spec: AlterSpec, guard: bool) -> AlterSpec:
    """``spec`` with its ``IF [NOT] EXISTS`` (MariaDB) when the statement had one."""
    if guard and hasattr(spec, "if_exists"):
        return dataclasses.replace(spec, if_exists=True)  # type: ignore[arg-type]
    return spec


def _collation(name: str | None) -> str | None:
    return collation_name(name) if name else None


def _table_options(props: list[exp.Expression]) -> TableOptions | None:
    """The charset/collation among table options; the others (ENGINE, COMMENT, ...) are
    ignored, they do not change what the table holds."""
    charset = collation = None
    for prop in props:
        if isinstance(prop, exp.CharacterSetProperty):
            charset = charset_name(prop.this.name)
        elif isinstance(prop, exp.CollateProperty):
            collation = collation_name(prop.this.name)
        elif not isinstance(prop, exp.Property):
            raise _Fail(f"unsupported table option {prop.sql(dialect='mysql')!r}")
    if charset is None and collation is None:
        return None
    return TableOptions(charset or (collation or "").split("_", 1)[0], collation)


def _action(action: exp.Expression, spec: str, notes: clauses.Notes) -> list[AlterSpec]:
    if isinstance(action, exp.ColumnDef):
        column, extra = _column(action, notes)
        return [AddColumn(column, _position(action)), *extra]
    if isinstance(action, exp.ModifyColumn):
        column, extra = _column(action.this, notes)
        old = action.args.get("rename_from")
        if old is not None:
            return [ChangeColumn(old.name, column, _position(action.this)), *extra]
        return [ModifyColumn(column, _position(action.this)), *extra]
    if isinstance(action, exp.Drop):
        kind = str(action.args.get("kind") or "").upper()
        (node,) = action.args["tables"]
        exists = bool(action.args.get("exists"))
        if kind == "COLUMN":
            return [DropColumn(node.name, if_exists=exists)]
        if kind == "INDEX":
            if name_key(node.name) == "primary":
                return [DropPrimaryKey()]
            return [DropIndex(node.name, if_exists=exists)]
        raise _Fail(f"DROP {kind} is not supported")
    if isinstance(action, exp.DropPrimaryKey):
        return [DropPrimaryKey()]
    if isinstance(action, exp.RenameColumn):
        return [RenameColumn(action.this.name, action.args["to"].name)]
    if isinstance(action, exp.RenameIndex):
        return [RenameIndex(action.this.name, action.args["to"].name)]
    used = {key for key, value in action.args.items() if value}
    if isinstance(action, exp.AlterColumn) and used - {"this"} <= {"default", "drop"}:
        if action.args.get("drop"):
            return [SetDefault(action.name, None)]
        if action.args.get("default") is not None:
            return [SetDefault(action.name, default_literal(action.args["default"]) or "NULL")]
    if isinstance(action, exp.AddConstraint):
        return [_constraint(c) for c in action.expressions]
    if isinstance(action, exp.ForceProperty):
        return []
    raise _Fail(f"unsupported ALTER TABLE specification {spec!r}")


def _position(coldef: exp.ColumnDef) -> Position | None:
    pos = coldef.args.get("position")
    if pos is None:
        return None
    if str(pos.args.get("position")).upper() == "FIRST":
        return Position()
    return Position(pos.this.name)


# --- columns and keys ------------------------------------------------------------------


def _column(coldef: exp.ColumnDef, notes: clauses.Notes) -> tuple[Column, list[AlterSpec]]:
    """A column definition, and the keys its inline PRIMARY KEY / UNIQUE add."""
    kind = coldef.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise _Fail(f"column {coldef.name!r} has no type")
    constraints = [c.kind for c in coldef.args.get("constraints") or []]
    extra_type = notes.types.get(name_key(coldef.name))
    if extra_type is not None:  # a type sqlglot does not know (read as GEOMETRY)
        ctype = ColumnType(extra_type[0], length=extra_type[1])
    else:
        ctype = column_type(kind, constraints)
    if name_key(coldef.name) in notes.unsigned:
        ctype = dataclasses.replace(ctype, unsigned=True)
    nullable, explicit_null = True, False
    default: str | None = None
    generated: str | None = None
    stored = auto_increment = False
    extra: list[AlterSpec] = []
    for c in constraints:
        if isinstance(c, exp.NotNullColumnConstraint):
            nullable = bool(c.args.get("allow_null"))
        elif isinstance(c, exp.DefaultColumnConstraint):
            default = literal_for(default_literal(c.this), ctype)
            explicit_null = default is None
        elif isinstance(c, exp.PrimaryKeyColumnConstraint):
            extra.append(AddPrimaryKey((coldef.name,)))
        elif isinstance(c, exp.UniqueColumnConstraint):
            extra.append(AddIndex(Index("", (coldef.name,), "UNIQUE")))
        elif isinstance(c, exp.AutoIncrementColumnConstraint):
            auto_increment = True
        elif (gen := compat.generated_column(c)) is not None:
            generated, stored = gen[0].sql(dialect="mysql"), gen[1]
        elif not isinstance(c, _IGNORED_CONSTRAINTS):
            raise _Fail(f"unsupported column attribute {c.sql(dialect='mysql')!r}")
    if any(isinstance(s, AddPrimaryKey) for s in extra):
        nullable = False
    if auto_increment:
        # MySQL and MariaDB make an AUTO_INCREMENT column NOT NULL without a default,
        # whatever the statement says (``a INT NULL AUTO_INCREMENT`` is NOT NULL too).
        if default is not None:
            raise SchemaError(f"column {coldef.name!r} is AUTO_INCREMENT and cannot have a default")
        nullable, explicit_null = False, False
    if explicit_null and not nullable:
        raise SchemaError(f"column {coldef.name!r} is NOT NULL and cannot have DEFAULT NULL")
    column = Column(coldef.name, ctype, nullable, default, generated, stored, auto_increment)
    return column, extra


def _constraint(node: exp.Expression) -> AddIndex | AddPrimaryKey:
    """A table-level key (``PRIMARY KEY (...)``, ``UNIQUE KEY u (...)``, ``KEY (...)``)."""
    symbol = ""
    if isinstance(node, exp.Constraint):
        symbol = node.name
        (node,) = node.expressions
    if isinstance(node, exp.PrimaryKey):
        return AddPrimaryKey(tuple(_key_part(e) for e in node.expressions))
    if isinstance(node, exp.UniqueColumnConstraint) and isinstance(node.this, exp.Schema):
        columns = tuple(_key_part(e) for e in node.this.expressions)
        return AddIndex(Index(node.this.name or symbol, columns, "UNIQUE"))
    if isinstance(node, exp.IndexColumnConstraint):
        kind = _INDEX_KINDS.get(node.args.get("kind"))
        if kind is not None:
            columns = tuple(_key_part(e) for e in node.expressions)
            return AddIndex(Index(node.name or symbol, columns, kind))
    raise _Fail(f"unsupported key or constraint {node.sql(dialect='mysql')!r}")


def _key_part(node: exp.Expression) -> str:
    """A column of a key; prefix lengths (``c(10)``) and ASC/DESC are dropped."""
    while isinstance(node, exp.Ordered | exp.ColumnPrefix) and node.this is not None:
        node = node.this
    if isinstance(node, exp.Column | exp.Identifier):
        return node.name
    # A functional key part (MySQL 8.0.13+): kept as its expression, in parentheses.
    return "(" + node.unnest().sql(dialect="mysql") + ")"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _plain(exc: Exception) -> str:
    """sqlglot's message without its terminal colouring, on one line."""
    return " ".join(_ANSI.sub("", str(exc)).split())
