"""Internal: MySQL/MariaDB clauses sqlglot 30 does not read, handled before it parses.

Works on sqlglot's own MySQL tokens (see :mod:`schemas._sqlglot_compat`) and gives back
SQL text that sqlglot reads, plus :class:`Notes` saying what was taken out. Each clause
either has no meaning for a downstream table that only receives rows (it is *recorded*
in ``Notes.ignored`` and dropped), or changes rows without row events, or needs a table
feature shardmerge does not carry: then :class:`Refused` says so, and the statement is
held in ``conflict`` with that reason for the operator.

No meaning downstream (recorded, dropped): FOREIGN KEY and CHECK constraints (Delta has
none; the lattice ignores them), table options other than charset/collation (ENGINE,
ROW_FORMAT, KEY_BLOCK_SIZE, STATS_*, COMPRESSION, ENCRYPTION, AUTO_INCREMENT,
TABLESPACE, PAGE_CHECKSUM, ...), PARTITION BY and the partition maintenance that keeps
every row (ADD, REORGANIZE, COALESCE, REBUILD, OPTIMIZE, ANALYZE, CHECK, REPAIR
PARTITION, REMOVE PARTITIONING), ALGORITHM/LOCK/WAIT/NOWAIT, ENABLE/DISABLE KEYS, ORDER
BY, index and column visibility, column attributes (SRID, REF_SYSTEM_ID, COLUMN_FORMAT,
STORAGE, COMPRESSED, ENGINE_ATTRIBUTE), application-time PERIODs.

Refused: DROP/TRUNCATE PARTITION (deletes rows upstream; which ones downstream cannot be
told), EXCHANGE PARTITION, CONVERT PARTITION/TABLE, DISCARD/IMPORT TABLESPACE (rows
change with no row events), MariaDB system versioning and sequences (the history rows
and sequence state are not rows of the table).

Types sqlglot lacks are read as GEOMETRY and named in ``Notes.types``: the spatial types
(carried downstream as WKB bytes), MariaDB's UUID, INET4, INET6 and VECTOR(n).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot.tokenizer_core import Token, TokenType

from schemas.model import name_key

__all__ = ["Notes", "Refused", "clean_column", "clean_options", "clean_table_item", "unhide"]

SPATIAL = {
    "GEOMETRY": "GEOMETRY",
    "POINT": "POINT",
    "LINESTRING": "LINESTRING",
    "POLYGON": "POLYGON",
    "MULTIPOINT": "MULTIPOINT",
    "MULTILINESTRING": "MULTILINESTRING",
    "MULTIPOLYGON": "MULTIPOLYGON",
    "GEOMETRYCOLLECTION": "GEOMETRYCOLLECTION",
    "GEOMCOLLECTION": "GEOMETRYCOLLECTION",  # MySQL 8's spelling of the same type
}
_EXTRA_TYPES = {**SPATIAL, "UUID": "UUID", "INET4": "INET4", "INET6": "INET6", "VECTOR": "VECTOR"}
_SERIAL = "BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE"
VERSIONING = (
    "MariaDB system-versioned tables are not supported: their history rows are not rows "
    "of the table downstream; replace the statement (unlock --action replace) with one "
    "without versioning, or skip it"
)
_HIDDEN = re.compile(r"/\*M?!(\d{5,6})?")


class Refused(Exception):
    """A clause shardmerge cannot carry downstream; the message says why and what to do."""


@dataclass
class Notes:
    """What the clean-up took out of a statement: clauses without downstream meaning,
    as written, and the columns whose type sqlglot does not know (name key -> (type,
    length))."""

    ignored: list[str] = field(default_factory=list)
    types: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    # FOREIGN KEYs as (name, columns): InnoDB indexes their columns when no index does.
    foreign_keys: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    # Columns UNSIGNED where sqlglot cannot say it (FLOAT UNSIGNED), by name key.
    unsigned: set[str] = field(default_factory=set)


def unhide(sql: str) -> str:
    """``sql`` with MySQL's executable comments (``/*!50705 x */``, ``/*M!100100 x */``)
    opened: the server runs their content, and so does a binlog reader."""
    if "/*" not in sql:
        return sql  # no comment at all (most statements): nothing to open
    out: list[str] = []
    i, n = 0, len(sql)
    opened = 0
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if sql[j] == "\\" and c != "`" else 1
            out.append(sql[i : j + 1])
            i = j + 1
        elif (m := _HIDDEN.match(sql, i)) is not None:
            out.append(" ")
            opened += 1
            i = m.end()
        elif opened and sql.startswith("*/", i):
            out.append(" ")
            opened -= 1
            i += 2
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end])
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def words(tokens: Sequence[Token]) -> list[str]:
    """Upper-case keywords (``PARTITION BY`` is one token to sqlglot: it stays one word);
    quoted identifiers and strings are ''."""
    return [
        ""
        if t.token_type in (TokenType.IDENTIFIER, TokenType.STRING)
        else " ".join(t.text.upper().split())
        for t in tokens
    ]


def text(sql: str, tokens: Sequence[Token]) -> str:
    return sql[tokens[0].start : tokens[-1].end + 1] if tokens else ""


def group_end(tokens: Sequence[Token], i: int) -> int:
    """The index after the parenthesised group that starts at ``i``."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(tokens)


def _skip_value(tokens: Sequence[Token], i: int) -> int:
    """After ``[=] value`` at ``i`` (a value is one token or a parenthesised group)."""
    if i < len(tokens) and tokens[i].token_type == TokenType.EQ:
        i += 1
    if i < len(tokens) and tokens[i].token_type == TokenType.L_PAREN:
        return group_end(tokens, i)
    return min(i + 1, len(tokens))


_REF_ACTIONS = {"RESTRICT", "CASCADE", "SET", "NULL", "NO", "ACTION", "DEFAULT"}


def _skip_references(tokens: Sequence[Token], w: list[str], i: int) -> int:
    """After ``REFERENCES t [(cols)] [MATCH x] [ON DELETE|UPDATE action]...`` at ``i``."""
    i += 2  # REFERENCES and the table name
    if i < len(tokens) and tokens[i].token_type == TokenType.DOT:
        i += 2
    if i < len(tokens) and tokens[i].token_type == TokenType.L_PAREN:
        i = group_end(tokens, i)
    while i < len(tokens):
        if w[i] == "MATCH":
            i += 2
        elif w[i] == "ON" and i + 1 < len(tokens) and w[i + 1] in ("DELETE", "UPDATE"):
            i += 2
            while i < len(tokens) and w[i] in _REF_ACTIONS:
                i += 1
        else:
            break
    return i


def _skip_check(tokens: Sequence[Token], w: list[str], i: int) -> int:
    """After ``CHECK (expr) [[NOT] ENFORCED]`` at ``i``."""
    i = group_end(tokens, i + 1) if i + 1 < len(tokens) else len(tokens)
    if w[i : i + 2] == ["NOT", "ENFORCED"]:
        return i + 2
    if w[i : i + 1] == ["ENFORCED"]:
        return i + 1
    return i


def clean_column(sql: str, tokens: Sequence[Token], names: int, notes: Notes) -> str:
    """A column definition (``names`` name tokens, then the type and its attributes) as
    sqlglot reads it; what it drops goes to ``notes``."""
    w = words(tokens)
    if len(tokens) <= names:
        return text(sql, tokens)
    out = [text(sql, tokens[:names])]
    i = names
    kind = w[i]
    column = name_key(tokens[names - 1].text)
    if kind in _EXTRA_TYPES:
        end = i + 1
        length = None
        if end < len(tokens) and tokens[end].token_type == TokenType.L_PAREN:
            inner = [t.text for t in tokens[end + 1 : group_end(tokens, end) - 1]]
            length = int(inner[0]) if len(inner) == 1 and inner[0].isdigit() else None
            end = group_end(tokens, end)
        notes.types[column] = (_EXTRA_TYPES[kind], length)
        out.append("GEOMETRY")
        i = end
    elif kind == "SERIAL":
        out.append(_SERIAL)
        i += 1
    while i < len(tokens):
        word, tok = w[i], tokens[i]
        start = i
        if tok.token_type == TokenType.L_PAREN:
            i = group_end(tokens, i)
            group = tokens[start + 1 : i - 1]
            if words(group)[:3] == _NEXT_VALUE:  # DEFAULT (NEXT VALUE FOR s)
                out.append(f"({_next_value(sql, group)})")
                continue
            out.append(text(sql, tokens[start:i]))
            if (
                start > names
                and w[start - 1] == "AS"
                and w[i : i + 1] not in (["VIRTUAL"], ["STORED"], ["PERSISTENT"])
            ):
                # A generated column's expression: VIRTUAL is MySQL's default, said out
                # loud so that sqlglot ends the expression here (``AS (a) NOT NULL``
                # would read as ``(a) NOT NULL``, a test for NULL).
                out.append("VIRTUAL")
            continue
        if w[i : i + 3] == _NEXT_VALUE:  # MariaDB: DEFAULT NEXT VALUE FOR s
            end = i + 4
            if w[end : end + 1] == ["."]:
                end += 2
            out.append(_next_value(sql, tokens[i:end]))
            i = end
            continue
        if word in _SIGN_WORDS:
            # SIGNED, UNSIGNED and ZEROFILL in any order and number (MySQL reads them as a
            # set; UNSIGNED wins over SIGNED), written as sqlglot reads them.
            while i < len(tokens) and w[i] in _SIGN_WORDS:
                i += 1
            flags = set(w[start:i])
            if flags & {"UNSIGNED", "ZEROFILL"}:
                if kind in _FLOAT_WORDS:
                    notes.unsigned.add(column)  # sqlglot has no unsigned FLOAT
                else:
                    out.append("UNSIGNED")
            if "ZEROFILL" in flags:
                out.append("ZEROFILL")
            continue
        if word in ("SRID", "COLUMN_FORMAT", "STORAGE"):
            i += 2
        elif word in ("REF_SYSTEM_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
            i = _skip_value(tokens, i + 1)
        elif word == "COMPRESSED":
            i = _skip_value(tokens, i + 1) if w[i + 1 : i + 2] == ["="] else i + 1
        elif word == "VISIBLE":
            i += 1
        elif w[i : i + 2] == ["NOT", "SECONDARY"]:  # MySQL HeatWave: not loaded there
            i += 2
        elif w[i : i + 3] == ["WITHOUT", "SYSTEM", "VERSIONING"]:
            i += 3
        elif w[i : i + 3] == ["WITH", "SYSTEM", "VERSIONING"] or w[i : i + 2] == ["AS", "ROW"]:
            raise Refused(VERSIONING)
        elif word == "REFERENCES":
            i = _skip_references(tokens, w, i)
        elif word == "CHECK":
            i = _skip_check(tokens, w, i)
        elif word == "CONSTRAINT" and "CHECK" in w[i + 1 : i + 3]:
            i = _skip_check(tokens, w, w.index("CHECK", i + 1))
        elif word == "PERSISTENT":
            out.append("STORED")
            i += 1
            continue
        elif w[i : i + 3] == ["SERIAL", "DEFAULT", "VALUE"]:
            out.append("NOT NULL AUTO_INCREMENT UNIQUE")
            i += 3
            continue
        else:
            out.append(text(sql, tokens[i : i + 1]))
            i += 1
            continue
        notes.ignored.append(text(sql, tokens[start:i]))
    return " ".join(out)


_INDEX_WORDS = {"PRIMARY", "PRIMARY KEY", "UNIQUE", "KEY", "INDEX", "FULLTEXT", "SPATIAL"}
_SIGN_WORDS = {"SIGNED", "UNSIGNED", "ZEROFILL"}
_NEXT_VALUE = ["NEXT", "VALUE", "FOR"]


def _next_value(sql: str, tokens: Sequence[Token]) -> str:
    """MariaDB's ``NEXT VALUE FOR s`` as its other spelling, ``NEXTVAL(s)``."""
    return f"NEXTVAL({text(sql, tokens[3:])})"


_FLOAT_WORDS = {"FLOAT", "FLOAT4"}


def clean_table_item(sql: str, tokens: Sequence[Token], notes: Notes) -> str | None:
    """One item of a CREATE TABLE body as sqlglot reads it, or None when it is dropped."""
    w = words(tokens)
    kinds = _INDEX_WORDS | {"FOREIGN KEY", "FOREIGN", "CHECK"}
    head = w[0] if w else ""
    if head == "CONSTRAINT":  # CONSTRAINT [symbol] kind ...
        head = w[1] if len(w) > 1 and w[1] in kinds else (w[2] if len(w) > 2 else "")
    if head in ("FOREIGN KEY", "FOREIGN", "CHECK"):
        notes.ignored.append(text(sql, tokens))
        if head != "CHECK":
            foreign_key(tokens, notes)
        return None
    if w[:3] == ["PERIOD", "FOR", "SYSTEM_TIME"]:
        raise Refused(VERSIONING)
    if w[:2] == ["PERIOD", "FOR"]:
        notes.ignored.append(text(sql, tokens))
        return None
    if head in _INDEX_WORDS or w[:1] == ["LIKE"]:
        return clean_index(sql, tokens, notes)
    return clean_column(sql, tokens, 1, notes)


def foreign_key(tokens: Sequence[Token], notes: Notes) -> None:
    """Record ``[CONSTRAINT [symbol]] FOREIGN KEY [name] (cols) REFERENCES ...``: the index
    InnoDB makes for it is named after the symbol, else the name, else its first column."""
    w = words(tokens)
    start = next(i for i, word in enumerate(w) if word in ("FOREIGN KEY", "FOREIGN"))
    symbol = tokens[1].text if w[:1] == ["CONSTRAINT"] and start == 2 else ""
    i = start + (1 if w[start] == "FOREIGN KEY" else 2)
    name = ""
    if i < len(tokens) and tokens[i].token_type != TokenType.L_PAREN:
        name, i = tokens[i].text, i + 1
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        return
    end = group_end(tokens, i)
    columns = []
    for tok in tokens[i + 1 : end - 1]:
        if tok.token_type == TokenType.L_PAREN:
            break  # a prefix length: not in a FOREIGN KEY, but stop rather than guess
        if tok.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
            columns.append(tok.text)
    notes.foreign_keys.append((symbol or name, tuple(columns)))


def clean_index(sql: str, tokens: Sequence[Token], notes: Notes) -> str:
    """An index definition without the options that do not change what it indexes."""
    w = words(tokens)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        start = i
        if tokens[i].token_type == TokenType.L_PAREN:
            i = group_end(tokens, i)
            out.append(text(sql, tokens[start:i]))
            continue
        if w[i] in ("VISIBLE", "INVISIBLE", "IGNORED"):
            i += 1
        elif w[i : i + 2] == ["NOT", "IGNORED"]:
            i += 2
        elif w[i] in ("CLUSTERING", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
            i = _skip_value(tokens, i + 1)
        else:
            out.append(text(sql, tokens[i : i + 1]))
            i += 1
            continue
        notes.ignored.append(text(sql, tokens[start:i]))
    return " ".join(out)


def clean_options(sql: str, tokens: Sequence[Token], notes: Notes) -> str:
    """Table options (``ENGINE=InnoDB DEFAULT CHARSET=utf8 PARTITION BY ...``) as the
    charset/collation options sqlglot reads; the others are recorded in ``notes``."""
    w = words(tokens)
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i].token_type == TokenType.COMMA:
            i += 1
            continue
        start = i
        if w[i] == "DEFAULT":
            i += 1
        word = w[i] if i < len(tokens) else ""
        if word == "PARTITION BY":
            notes.ignored.append(text(sql, tokens[start:]))
            break
        if w[i : i + 3] == ["WITH", "SYSTEM", "VERSIONING"]:
            raise Refused(VERSIONING)
        if word == "SEQUENCE":
            end = _skip_value(tokens, i + 1)
            if w[end - 1] not in ("0", "NO"):
                raise Refused(
                    "a MariaDB SEQUENCE is not a table of rows: it is not replicated; "
                    "skip the statement"
                )
            i = end
        elif word in ("CHARACTER SET", "CHARSET", "COLLATE"):
            i = _skip_value(tokens, i + 1)
            name = "CHARACTER SET" if word != "COLLATE" else "COLLATE"
            kept.append(f"{name} = {tokens[i - 1].text}")
            continue
        elif w[i : i + 2] in (["DATA", "DIRECTORY"], ["INDEX", "DIRECTORY"]):
            i = _skip_value(tokens, i + 2)
        elif w[i : i + 2] == ["START", "TRANSACTION"]:
            i += 2
        elif word == "TABLESPACE":
            i = _skip_value(tokens, i + 1)
            if w[i : i + 1] == ["STORAGE"]:
                i += 2
        elif word == "CHARACTER" and w[i + 1 : i + 2] == ["SET"]:
            i = _skip_value(tokens, i + 2)
            kept.append(f"CHARACTER SET = {tokens[i - 1].text}")
            continue
        else:
            # Any other option is ``name [=] value``: MariaDB also takes engine-defined
            # options (``IETF_QUOTES=YES``), none of which changes what the table holds.
            i = _skip_value(tokens, i + 1)
        notes.ignored.append(text(sql, tokens[start:i]))
    return " ".join(kept)
