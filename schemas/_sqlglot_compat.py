"""Internal: where sqlglot 30's MySQL dialect falls short, fixed at the token level.

Everything here works on sqlglot's own MySQL tokens and returns plain values or SQL text
that sqlglot does parse, so that :mod:`schemas.ddl` reads as one walk over sqlglot
expressions. What is worked around, and why:

* ``RENAME TABLE[S] a TO b, c TO d [NOWAIT]`` falls back to ``exp.Command``: parsed here
  into pairs.
* ``ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] t [WAIT n|NOWAIT]``: the head is taken
  apart here (:class:`AlterHead`), then the specifications are split at top-level commas
  (a partition name list ``DROP PARTITION p0, p1`` stays one) and parsed one by one,
  which also covers three gaps: ``ADD [COLUMN] (a INT, b INT)`` (a ``Command``; it
  becomes one ``ADD COLUMN`` per column), ``CONVERT TO CHARACTER SET x [COLLATE y]`` (a
  ``Command``; parsed here) and ``RENAME AS t2`` (a parse error; becomes ``RENAME TO``).
  What each specification is (clauses sqlglot does not read at all: partitions,
  foreign keys, options...) is decided in :mod:`schemas._sqlglot_plans`.
* ``CREATE FULLTEXT INDEX`` falls back to ``Command``: every ``CREATE [OR REPLACE]
  [ONLINE] ... INDEX [IF NOT EXISTS] ... ON`` and ``DROP INDEX [IF EXISTS] ... ON``, with
  their ALGORITHM/LOCK options, is rewritten to the ``ALTER TABLE`` MySQL maps it to
  (https://dev.mysql.com/doc/refman/8.0/en/create-index.html).
* ``c INT GENERATED ALWAYS AS (expr)`` without VIRTUAL/STORED is read as an identity
  column; :func:`generated_column` reads both shapes as the virtual column MySQL makes.
* Type aliases sqlglot reads wrongly or not at all are rewritten to the type MySQL uses
  (https://dev.mysql.com/doc/refman/8.0/en/other-vendor-data-types.html): ``INT8`` is
  BIGINT (sqlglot: TINYINT), ``REAL`` is DOUBLE (sqlglot: FLOAT), ``LONG`` and
  ``LONG VARCHAR`` are MEDIUMTEXT (sqlglot: BIGINT), ``INT3``/``MIDDLEINT`` are MEDIUMINT,
  ``NATIONAL CHAR``/``NATIONAL VARCHAR``/``NCHAR VARYING`` are NCHAR/NVARCHAR and
  ``CHARACTER VARYING`` is VARCHAR (all unknown to sqlglot).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from schemas.errors import DDLError
from schemas.model import TableName

__all__ = [
    "alter_specs",
    "convert_charset",
    "fix_type_aliases",
    "generated_column",
    "index_statement_as_alter",
    "rename_table_pairs",
    "split_commas",
    "text_of",
    "tokenize",
]


_LOCAL = threading.local()


class _Tokenizer(MySQL.Tokenizer):
    # MySQL's tokenizer swallows everything after a "command" word (RENAME, OPTIMIZE,
    # ANALYZE, REPLACE...) into one string token; the scans here need every token.
    COMMANDS = MySQL.Tokenizer.COMMANDS - MySQL.Tokenizer.COMMANDS


# One-token aliases: the upper-case word as written -> the SQL MySQL means by it.
_ALIASES = {
    "INT8": "BIGINT",
    "INT3": "MEDIUMINT",
    "MIDDLEINT": "MEDIUMINT",
    "REAL": "DOUBLE",
    "LONG": "MEDIUMTEXT",
    "CHARACTER VARYING": "VARCHAR",  # one token to sqlglot
}
# Two-token aliases: (first word, second word) -> replacement.
_PAIR_ALIASES = {
    ("LONG", "VARCHAR"): "MEDIUMTEXT",
    ("LONG", "VARBINARY"): "MEDIUMBLOB",
    ("NATIONAL", "CHAR"): "NCHAR",
    ("NATIONAL", "CHARACTER"): "NCHAR",
    ("NATIONAL", "VARCHAR"): "NVARCHAR",
    ("NCHAR", "VARYING"): "NVARCHAR",
    ("NCHAR", "VARCHAR"): "NVARCHAR",
    ("CHARACTER", "VARYING"): "VARCHAR",
    ("NATIONAL", "CHARACTER VARYING"): "NVARCHAR",
    ("NATIONAL", "CHAR VARYING"): "NVARCHAR",  # CHAR VARYING is one token to sqlglot
    ("CHAR", "VARYING"): "VARCHAR",
}


def tokenize(sql: str) -> list[Token]:
    """MySQL tokens of ``sql`` without a trailing ``;``; DDLError when it does not lex.

    One text is looked at several times (is it a RENAME, an index statement, an ALTER?):
    the tokens of the last few texts are kept, and never changed by their readers."""
    return list(_tokens(sql))


@functools.lru_cache(maxsize=64)
def _tokens(sql: str) -> tuple[Token, ...]:
    tokenizer = getattr(_LOCAL, "tokenizer", None)
    if tokenizer is None:  # one per thread: a tokenizer is reusable, but not shared
        tokenizer = _LOCAL.tokenizer = _Tokenizer()
    try:
        tokens = tokenizer.tokenize(sql)
    except TokenError as exc:
        raise DDLError(sql, f"cannot tokenize: {exc}") from None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        raise DDLError(sql, "expected one statement, got several")
    return tuple(tokens)


def _word(token: Token) -> str:
    """The keyword a token spells, or '' for quoted identifiers and strings."""
    if token.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
        return ""
    return token.text.upper()


def text_of(sql: str, tokens: Sequence[Token]) -> str:
    """The text of ``tokens`` in ``sql``, as written."""
    return sql[tokens[0].start : tokens[-1].end + 1] if tokens else ""


def fix_type_aliases(sql: str) -> str:
    """``sql`` with the type aliases sqlglot misreads replaced (see the module docstring)."""
    # Twice: NATIONAL CHARACTER VARYING becomes NCHAR VARYING, then NVARCHAR.
    return _fix_aliases(_fix_aliases(sql))


def _fix_aliases(sql: str) -> str:
    tokens = tokenize(sql)
    out: list[str] = []
    pos = 0
    i = 0
    while i < len(tokens):
        tok, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else None
        pair = (_word(tok), _word(nxt)) if nxt else None
        if pair in _PAIR_ALIASES and nxt is not None:
            out += [sql[pos : tok.start], _PAIR_ALIASES[pair]]
            pos, i = nxt.end + 1, i + 2
            continue
        if _word(tok) in _ALIASES:
            out += [sql[pos : tok.start], _ALIASES[_word(tok)]]
            pos = tok.end + 1
        i += 1
    return "".join(out) + sql[pos : tokens[-1].end + 1 if tokens else 0]


# The words that begin a key, not a column, in a table element list.
_KEY_WORDS = {
    "INDEX", "KEY", "UNIQUE", "PRIMARY", "PRIMARY KEY", "FULLTEXT", "SPATIAL", "CONSTRAINT",
    "FOREIGN", "FOREIGN KEY", "CHECK",
}  # fmt: skip
# ALTER TABLE's partition operations (``<word> PARTITION ...``).
_PARTITION_OPERATIONS = {
    "ADD", "ANALYZE", "CHECK", "COALESCE", "DISCARD", "DROP", "EXCHANGE", "IMPORT",
    "OPTIMIZE", "REBUILD", "REORGANIZE", "REPAIR", "TRUNCATE",
}  # fmt: skip


def split_commas(tokens: Sequence[Token]) -> list[list[Token]]:
    """``tokens`` split at commas outside parentheses."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        if tok.token_type == TokenType.COMMA and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def _table_name(sql: str, tokens: Sequence[Token]) -> TableName:
    """``t``, ``db.t`` or their backticked forms."""
    if len(tokens) == 1 and _is_name(tokens[0]):
        return TableName(tokens[0].text)
    if (
        len(tokens) == 3
        and _is_name(tokens[0])
        and tokens[1].token_type == TokenType.DOT
        and _is_name(tokens[2])
    ):
        return TableName(tokens[2].text, tokens[0].text)
    raise DDLError(sql, f"expected a table name, got {text_of(sql, tokens)!r}")


def _is_name(token: Token) -> bool:
    return token.token_type not in (
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.DOT,
        TokenType.COMMA,
        TokenType.L_PAREN,
        TokenType.R_PAREN,
    )


def rename_table_pairs(sql: str) -> list[tuple[TableName, TableName]] | None:
    """The pairs of ``RENAME TABLE[S] a TO b[, c TO d ...]``; None for other statements."""
    tokens = tokenize(sql)
    if [_word(t) for t in tokens[:1]] != ["RENAME"] or _word(tokens[1]) not in ("TABLE", "TABLES"):
        return None
    pairs = []
    start = 2
    if [_word(t) for t in tokens[2:4]] == ["IF", "EXISTS"]:  # MariaDB 10.5
        start = 4
    for part in split_commas(tokens[start:]):
        part = _without_lock_wait(part)  # MariaDB: ``a WAIT 10 TO b``
        words = [_word(t) for t in part]
        if "TO" not in words:
            raise DDLError(sql, f"expected 'old TO new', got {text_of(sql, part)!r}")
        to = words.index("TO")
        pairs.append((_table_name(sql, part[:to]), _table_name(sql, part[to + 1 :])))
    return pairs


_LOCK_OPTIONS = ("ALGORITHM", "LOCK")


def create_database(sql: str) -> tuple[str, bool] | None:
    """``CREATE DATABASE|SCHEMA [IF NOT EXISTS] name [options]`` as (name, IF NOT EXISTS
    given); None for other statements. The options (charset, collation, encryption, read
    only) say nothing about the tables downstream and are not read."""
    tokens = tokenize(sql)
    words = [_word(t) for t in tokens]
    if words[:1] != ["CREATE"] or words[1:2] not in (["DATABASE"], ["SCHEMA"]):
        return None
    at, exists = 2, words[2:5] == ["IF", "NOT", "EXISTS"]
    if exists:
        at = 5
    if at >= len(tokens) or not _is_name(tokens[at]):
        raise DDLError(sql, f"expected a database name, got {text_of(sql, tokens[at:])!r}")
    return tokens[at].text, exists


# Words after which NOWAIT would be a table's name (``DROP TABLE nowait``), not the option.
_BEFORE_A_NAME = {"TABLE", "TABLES", "EXISTS", ",", "TO", "ON", "INDEX", "KEY"}


def _without_lock_wait(tokens: Sequence[Token]) -> list[Token]:
    """``tokens`` without MariaDB's lock wait option (``WAIT n``, ``NOWAIT``) outside
    parentheses: how long the server waits for a metadata lock, no meaning downstream."""
    out: list[Token] = []
    depth, i = 0, 0
    while i < len(tokens):
        tok, word = tokens[i], _word(tokens[i])
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tok.token_type, 0)
        previous = _word(out[-1]) if out else ""
        if depth == 0 and previous not in _BEFORE_A_NAME and out:
            if word == "NOWAIT":
                i += 1
                continue
            if (
                word == "WAIT"
                and i + 1 < len(tokens)
                and tokens[i + 1].token_type == TokenType.NUMBER
            ):
                i += 2
                continue
        out.append(tok)
        i += 1
    return out


def without_lock_wait(sql: str) -> str:
    """A DROP TABLE, TRUNCATE or CREATE/DROP INDEX statement without MariaDB's ``WAIT n``
    or ``NOWAIT`` (:func:`_without_lock_wait`); any other statement as it is."""
    tokens = tokenize(sql)
    if not tokens or _word(tokens[0]) not in ("DROP", "TRUNCATE", "CREATE"):
        return sql
    kept = _without_lock_wait(tokens)
    if len(kept) == len(tokens):
        return sql
    return " ".join(text_of(sql, [t]) for t in kept)


def index_statement_as_alter(sql: str) -> str | None:
    """``CREATE [OR REPLACE] [ONLINE] [kind] INDEX [IF NOT EXISTS] i ON t (...) [options]``
    and ``DROP INDEX [IF EXISTS] i ON t [options]`` as the ALTER TABLE MySQL maps them to,
    else None. ``OR REPLACE`` (MariaDB) is a DROP INDEX IF EXISTS then the ADD."""
    tokens = tokenize(sql)
    words = [_word(t) for t in tokens]
    if words[:1] == ["CREATE"] and "INDEX" in words[1:6] and "ON" in words:
        index, on = words.index("INDEX"), words.index("ON")
        replace = words[1:3] == ["OR", "REPLACE"]
        kinds = [t for t, w in zip(tokens[1:index], words[1:index], strict=True)]
        kinds = [t for t in kinds if _word(t) not in ("OR", "REPLACE", "ONLINE", "OFFLINE")]
        kind = " ".join(t.text for t in kinds)
        exists = words[index + 1 : index + 4] == ["IF", "NOT", "EXISTS"]
        first = index + 4 if exists else index + 1
        name = text_of(sql, tokens[first:on])
        paren = next((i for i in range(on, len(tokens)) if words[i] == "("), len(tokens))
        table = text_of(sql, tokens[on + 1 : paren])
        body, options = _trailing_lock_options(sql, tokens[paren:])
        guard = " IF NOT EXISTS" if exists else ""
        drop = f"DROP INDEX IF EXISTS {name}, " if replace else ""
        return f"ALTER TABLE {table} {drop}ADD {kind} INDEX{guard} {name} {body}{options}"
    if words[:2] == ["DROP", "INDEX"] or words[:3] == ["DROP", "ONLINE", "INDEX"]:
        if "ON" not in words:
            return None
        start, on = words.index("INDEX") + 1, words.index("ON")
        name = text_of(sql, tokens[start:on])
        rest = tokens[on + 1 :]
        cut = next((i for i, t in enumerate(rest) if _word(t) in _LOCK_OPTIONS), len(rest))
        table = text_of(sql, rest[:cut])
        _, options = _trailing_lock_options(sql, rest[cut:])
        return f"ALTER TABLE {table} DROP INDEX {name}{options}"
    return None


def _trailing_lock_options(sql: str, tokens: Sequence[Token]) -> tuple[str, str]:
    """(the text before, ``, ALGORITHM=x, LOCK=y``) of an index statement's tail."""
    words = [_word(t) for t in tokens]
    cut = next((i for i, w in enumerate(words) if w in _LOCK_OPTIONS), len(tokens))
    options = [text_of(sql, p) for p in _option_groups(tokens[cut:])]
    return text_of(sql, tokens[:cut]), "".join(", " + o for o in options)


def _option_groups(tokens: Sequence[Token]) -> list[list[Token]]:
    """``ALGORITHM [=] x LOCK [=] y`` as one token list per option."""
    groups: list[list[Token]] = []
    for tok in tokens:
        if _word(tok) in _LOCK_OPTIONS or not groups:
            groups.append([])
        groups[-1].append(tok)
    return groups


@dataclass(frozen=True)
class AlterHead:
    """``ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] t [WAIT n | NOWAIT]``, taken apart."""

    sql: str  # ``ALTER TABLE t``, what sqlglot reads
    table: TableName
    ignore: bool


def alter_specs(sql: str) -> tuple[AlterHead, list[str]] | None:
    """``ALTER TABLE t spec, ...`` as its head and [spec text, ...]; else None.

    ``ADD [COLUMN] (a INT, b INT)`` comes back as one ``ADD COLUMN`` spec per column,
    ``RENAME AS t2`` as ``RENAME TO t2``, and a trailing ``PARTITION BY ...`` (written
    after the last spec without a comma) as a spec of its own.
    """
    tokens = tokenize(sql)
    words = [_word(t) for t in tokens]
    if words[:1] != ["ALTER"]:
        return None
    i = 1
    while i < len(words) and words[i] in ("ONLINE", "OFFLINE", "IGNORE"):
        i += 1
    if words[i : i + 1] != ["TABLE"]:
        return None
    ignore = "IGNORE" in words[1:i]
    i += 1
    if words[i : i + 2] == ["IF", "EXISTS"]:
        i += 2
    end = i + 1
    if end < len(tokens) and tokens[end].token_type == TokenType.DOT:
        end = i + 3
    table = _table_name(sql, tokens[i:end])
    head = AlterHead(f"ALTER TABLE {text_of(sql, tokens[i:end])}", table, ignore)
    if words[end : end + 1] == ["NOWAIT"]:
        end += 1
    elif words[end : end + 1] == ["WAIT"]:
        end += 2
    specs: list[str] = []
    parts: list[list[Token]] = []
    for part in split_commas(tokens[end:]):
        # ``DROP PARTITION p0, p1``, ``REORGANIZE PARTITION p0, p1 INTO (...)``: a partition
        # operation ends the statement (MySQL's grammar puts it after every other
        # specification), so a comma after it separates partition names, not specifications.
        previous = [_word(t) for t in parts[-1][:2]] if parts else []
        if previous[1:] == ["PARTITION"] and previous[0] in _PARTITION_OPERATIONS:
            parts[-1] = [*parts[-1], *part]
        else:
            parts.append(part)
    for part in parts:
        specs.extend(_spec_texts(sql, part))
    return head, [s for s in specs if s]


def _spec_texts(sql: str, part: list[Token]) -> list[str]:
    words = [_word(t) for t in part]
    start = 2 if words[1:2] == ["COLUMN"] else 1
    guard = ""
    if words[start : start + 3] == ["IF", "NOT", "EXISTS"]:  # MariaDB
        start, guard = start + 3, "IF NOT EXISTS "
    if words[:1] == ["ADD"] and words[start : start + 1] == ["("] and words[-1:] == [")"]:
        # ``ADD [COLUMN] (a INT, b INT, INDEX (a))``: a specification per element.
        return [
            ("ADD " if _word(item[0]) in _KEY_WORDS else "ADD COLUMN " + guard) + text_of(sql, item)
            for item in split_commas(part[start + 1 : -1])
            if item
        ]
    if words[:2] == ["RENAME", "AS"]:
        return ["RENAME TO " + text_of(sql, part[2:])]
    depth = 0
    for i, tok in enumerate(part):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tok.token_type, 0)
        if (
            i
            and depth == 0
            and (words[i] == "PARTITION BY" or words[i : i + 2] == ["REMOVE", "PARTITIONING"])
        ):
            return [text_of(sql, part[:i]), text_of(sql, part[i:])]
    return [text_of(sql, part)]


def convert_charset(sql: str, spec: str) -> tuple[str, str | None] | None:
    """(charset, collation) of ``CONVERT TO CHARACTER SET x [COLLATE y]``; else None.

    ``sql`` is the whole statement, named in errors.
    """
    words = [_word(t) or t.text for t in tokenize(spec)]
    if words[:2] != ["CONVERT", "TO"]:
        return None
    rest = words[2:]
    if rest[:2] == ["CHARACTER", "SET"]:
        rest = rest[2:]
    elif rest[:1] == ["CHARSET"]:
        rest = rest[1:]
    else:
        raise DDLError(sql, f"expected CONVERT TO CHARACTER SET, got {spec!r}")
    charset, rest = _option_value(sql, spec, rest)
    collation = None
    if rest[:1] == ["COLLATE"]:
        collation, rest = _option_value(sql, spec, rest[1:])
    if rest:
        raise DDLError(sql, f"unexpected {' '.join(rest)!r} in {spec!r}")
    return charset.lower(), collation and collation.lower()


def _option_value(sql: str, spec: str, rest: list[str]) -> tuple[str, list[str]]:
    """The value of ``[=] value`` at the start of ``rest``, and what follows it."""
    if rest[:1] == ["="]:
        rest = rest[1:]
    if not rest:
        raise DDLError(sql, f"a charset or collation name is missing in {spec!r}")
    return rest[0], rest[1:]


def generated_column(constraint: exp.Expr) -> tuple[exp.Expr, bool] | None:
    """(expression, stored) of a generated column's constraint; None for other constraints."""
    if isinstance(constraint, exp.ComputedColumnConstraint):
        expr, stored = constraint.this, bool(constraint.args.get("persisted"))
    elif isinstance(constraint, exp.GeneratedAsIdentityColumnConstraint) and (
        constraint.expression is not None
        and not any(constraint.args.get(k) for k in ("start", "increment", "minvalue", "maxvalue"))
    ):
        expr, stored = constraint.expression, False
    else:
        return None
    return (expr.unnest() if isinstance(expr, exp.Paren) else expr), stored
