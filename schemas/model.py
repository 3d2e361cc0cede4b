"""The frozen table-schema model: column types, columns, indexes, tables.

Values, not records: every object is a frozen dataclass, hashable, and changed only by
building a new one. Column and index names are case-insensitive, as in MySQL; they are
kept as written and looked up with :func:`name_key`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from schemas.errors import SchemaError

__all__ = [
    "IMPLICIT_DEFAULT",
    "SPATIAL_TYPES",
    "Column",
    "ColumnType",
    "Index",
    "TableName",
    "TableSchema",
    "name_key",
    "sql_string",
    "string_value",
]

# A column default that MySQL itself would fill: the type's implicit value (0, '', the zero
# date). The join gives it to a NOT NULL column without default that some shard lacks, as
# TiDB DM's schemacmp does, so that rows of that shard have a value to carry.
IMPLICIT_DEFAULT = "<implicit>"

INTEGER_TYPES = ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT")
FLOAT_TYPES = ("FLOAT", "DOUBLE")
TEXT_TYPES = ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT")
BLOB_TYPES = ("TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")
STRING_TYPES = ("CHAR", "VARCHAR", "BINARY", "VARBINARY")
TIME_TYPES = ("DATETIME", "TIMESTAMP", "TIME")
CHARSET_TYPES = ("CHAR", "VARCHAR", *TEXT_TYPES, "ENUM", "SET")
# Spatial values travel as WKB bytes (Debezium: a struct with ``wkb`` and ``srid``).
SPATIAL_TYPES = (
    "GEOMETRY",
    "POINT",
    "LINESTRING",
    "POLYGON",
    "MULTIPOINT",
    "MULTILINESTRING",
    "MULTIPOLYGON",
    "GEOMETRYCOLLECTION",
)


def name_key(name: str) -> str:
    """The identity of a column or index name: MySQL compares them case-insensitively."""
    return name.lower()


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """A MySQL string literal of ``value`` (the inverse of :func:`string_value`)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


# MySQL's backslash escapes in string literals (MySQL 8.4 manual, "String Literals");
# \% and \_ keep their backslash (they are LIKE escapes); any other escaped character
# stands for itself.
_MYSQL_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_MYSQL_ESCAPES |= {"%": "\\%", "_": "\\_"}


def string_value(literal: str) -> str:
    """The value of a single-quoted MySQL string literal (``'it''s'`` -> ``it's``), as
    MySQL reads it with its default SQL mode (backslash escapes on)."""
    if len(literal) < 2 or literal[0] != "'" or literal[-1] != "'":
        raise SchemaError(f"not a quoted string literal: {literal!r}")
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_MYSQL_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        elif ch == "'" and body[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class TableName:
    """A possibly database-qualified table name, as written in a statement."""

    table: str
    db: str | None = None

    def __str__(self) -> str:
        return f"{self.db}.{self.table}" if self.db else self.table

    @classmethod
    def parse(cls, text: str) -> TableName:
        db, _, table = text.rpartition(".")
        return cls(table=table, db=db or None)


@dataclass(frozen=True)
class ColumnType:
    """A MySQL column type, normalised.

    ``base`` is the canonical upper-case name (``INT``, ``VARCHAR``, ``DECIMAL``, ...;
    aliases such as ``INTEGER``, ``NUMERIC``, ``REAL`` and ``BOOL`` are resolved by the
    parser). ``length`` is the character/byte length of CHAR/VARCHAR/BINARY/VARBINARY, the
    width of BIT, the precision of DECIMAL or the fractional seconds of DATETIME, TIMESTAMP
    and TIME; integer display widths are dropped (``INT(11)`` is ``INT``). ``scale`` is the
    DECIMAL scale. ``members`` are the ENUM/SET values in order.
    """

    base: str
    length: int | None = None
    scale: int | None = None
    unsigned: bool = False
    zerofill: bool = False
    charset: str | None = None
    collation: str | None = None
    members: tuple[str, ...] = ()

    def type_sql(self) -> str:
        """The type without charset/collation, e.g. ``DECIMAL(10,2) UNSIGNED``."""
        text = self.base
        if self.base in ("ENUM", "SET"):
            text += "(" + ",".join(sql_string(m) for m in self.members) + ")"
        elif self.base == "DECIMAL" and self.length is not None:
            text += f"({self.length},{self.scale or 0})"
        elif self.length is not None:
            text += f"({self.length})"
        if self.unsigned:
            text += " UNSIGNED"
        if self.zerofill:
            text += " ZEROFILL"
        return text

    def to_sql(self) -> str:
        """The full type, charset and collation included."""
        text = self.type_sql()
        if self.charset:
            text += f" CHARACTER SET {self.charset}"
        if self.collation:
            text += f" COLLATE {self.collation}"
        return text

    def __str__(self) -> str:
        return self.to_sql()

    def implicit_sql(self) -> str:
        """The literal MySQL fills a NOT NULL column of this type with when none is given."""
        if self.base in (*INTEGER_TYPES, *FLOAT_TYPES, "DECIMAL", "BIT", "YEAR"):
            return "0"
        if self.base == "DATE":
            return "'0000-00-00'"
        if self.base in ("DATETIME", "TIMESTAMP"):
            return "'0000-00-00 00:00:00'"
        if self.base == "TIME":
            return "'00:00:00'"
        if self.base == "ENUM" and self.members:
            return sql_string(self.members[0])
        if self.base == "JSON":
            return "'null'"
        return "''"


@dataclass(frozen=True)
class Column:
    """One column: name, type, nullability, default, generated expression.

    ``default`` is the normalised SQL literal of the default (``0``, ``'abc'``,
    ``CURRENT_TIMESTAMP``), :data:`IMPLICIT_DEFAULT`, or ``None`` for no default. An
    explicit ``DEFAULT NULL`` on a nullable column is the same as no default, as in MySQL.
    ``generated`` is the normalised expression of a generated column and ``stored`` tells
    STORED from VIRTUAL.
    """

    name: str
    type: ColumnType
    nullable: bool = True
    default: str | None = None
    generated: str | None = None
    stored: bool = False
    auto_increment: bool = False

    @property
    def key(self) -> str:
        return name_key(self.name)

    @property
    def has_default(self) -> bool:
        """True when rows lacking this column still have a value for it (MySQL's rule)."""
        return self.default is not None or self.nullable or self.generated is not None

    def fill_sql(self) -> str:
        """The literal a row lacking this column gets: its default, NULL or the implicit value."""
        if self.default is None:
            return "NULL" if self.nullable else self.type.implicit_sql()
        if self.default == IMPLICIT_DEFAULT:
            return self.type.implicit_sql()
        return self.default

    def to_sql(self) -> str:
        parts = [quote(self.name), self.type.to_sql()]
        if self.generated is not None:
            parts.append(f"GENERATED ALWAYS AS ({self.generated})")
            parts.append("STORED" if self.stored else "VIRTUAL")
        parts.append("NULL" if self.nullable else "NOT NULL")
        if self.default is not None:
            default = self.type.implicit_sql() if self.default == IMPLICIT_DEFAULT else self.default
            parts.append(f"DEFAULT {default}")
        if self.auto_increment:
            parts.append("AUTO_INCREMENT")
        return " ".join(parts)

    def renamed(self, name: str) -> Column:
        return dataclasses.replace(self, name=name)


@dataclass(frozen=True)
class Index:
    """A secondary index or unique key (the primary key lives on the table).

    ``kind`` is ``INDEX``, ``UNIQUE``, ``FULLTEXT`` or ``SPATIAL``.
    """

    name: str
    columns: tuple[str, ...]
    kind: str = "INDEX"

    @property
    def key(self) -> str:
        return name_key(self.name)

    def to_sql(self) -> str:
        # A functional key part is kept as its expression in parentheses.
        cols = ", ".join(c if c.startswith("(") else quote(c) for c in self.columns)
        prefix = {"INDEX": "KEY", "UNIQUE": "UNIQUE KEY"}.get(self.kind, f"{self.kind} KEY")
        # An unnamed index (ADD INDEX (a)) gets its name from MySQL when it is applied.
        name = f" {quote(self.name)}" if self.name else ""
        return f"{prefix}{name} ({cols})"

    def canonical(self) -> tuple[str, tuple[str, ...], str]:
        return (self.key, tuple(name_key(c) for c in self.columns), self.kind)


@dataclass(frozen=True)
class TableSchema:
    """A table: ordered columns, primary key, secondary indexes, table charset/collation.

    ``name`` is carried for rendering only and takes no part in equality: the shards of
    one target have different names and the same schema.
    """

    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()
    charset: str | None = None
    collation: str | None = None
    name: str = field(default="", compare=False)
    _by_key: dict[str, Column] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _hash: list[int] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key: dict[str, Column] = {}
        for col in self.columns:
            if col.key in by_key:
                raise SchemaError(f"duplicate column {col.name!r} in table {self.name!r}")
            by_key[col.key] = col
        for pk in self.primary_key:
            if name_key(pk) not in by_key:
                raise SchemaError(f"primary key column {pk!r} is not a column of {self.name!r}")
        object.__setattr__(self, "_by_key", by_key)

    def __hash__(self) -> int:
        # Schemas are dictionary keys in the coordinator's counters: hash once.
        if not self._hash:
            self._hash.append(
                hash((self.columns, self.primary_key, self.indexes, self.charset, self.collation))
            )
        return self._hash[0]

    def column(self, name: str) -> Column | None:
        return self._by_key.get(name_key(name))

    def has_column(self, name: str) -> bool:
        return name_key(name) in self._by_key

    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def index(self, name: str) -> Index | None:
        key = name_key(name)
        return next((i for i in self.indexes if i.key == key), None)

    def replace(self, **changes: Any) -> TableSchema:
        return dataclasses.replace(self, **changes)

    def with_columns(self, columns: Iterable[Column]) -> TableSchema:
        return dataclasses.replace(self, columns=tuple(columns))

    def renamed(self, name: str) -> TableSchema:
        if name == self.name:
            return self
        # Only the name differs: the twin shares the column lookup and the cached hash,
        # neither of which depends on the name (the coordinator names a schema after each
        # of thousands of shards; dataclasses.replace would rebuild both every time).
        twin = object.__new__(TableSchema)
        twin.__dict__.update(self.__dict__)
        twin.__dict__["name"] = name
        return twin

    def to_sql(self, name: str | None = None) -> str:
        """A ``CREATE TABLE`` statement that parses back to an equal schema."""
        lines = [col.to_sql() for col in self.columns]
        if self.primary_key:
            lines.append("PRIMARY KEY (" + ", ".join(quote(c) for c in self.primary_key) + ")")
        lines.extend(index.to_sql() for index in self.indexes)
        text = f"CREATE TABLE {quote(name or self.name or 't')} (\n  " + ",\n  ".join(lines) + "\n)"
        if self.charset:
            text += f" DEFAULT CHARSET={self.charset}"
        if self.collation:
            text += f" COLLATE={self.collation}"
        return text
