"""Internal: where sqlglot 30's MySQL dialect falls short, fixed at the token level.

Everything here works on sqlglot's own MySQL tokens and returns plain values or SQL text
that sqlglot does parse, so that :mod:`schemas.ddl` reads as one walk over sqlglot
expressions. What is worked around, and why:

* ``RENAME TABLE a TO b, c TO d`` falls back to ``exp.Command``: parsed here into pairs.
* ``ALTER TABLE`` specifications are split here at top-level commas and parsed one by
  one, which also covers three gaps: ``ADD [COLUMN] (a INT, b INT)`` (a ``Command``; it
  becomes one ``ADD COLUMN`` per column), ``CONVERT TO CHARACTER SET x [COLLATE y]`` (a
  ``Command``; parsed here) and ``RENAME AS t2`` (a parse error; becomes ``RENAME TO``).
* ``CREATE FULLTEXT INDEX`` falls back to ``Command``: every ``CREATE ... INDEX ... ON``
  and ``DROP INDEX ... ON`` is rewritten to the ``ALTER TABLE`` MySQL maps it to
  (https://dev.mysql.com/doc/refman/8.0/en/create-index.html).
* ``c INT GENERATED ALWAYS AS (expr)`` without VIRTUAL/STORED is read as an identity
  column; :func:`generated_column` reads both shapes as the virtual column MySQL makes.
* Type aliases sqlglot reads wrongly or not at all are rewritten to the type MySQL uses
  (https://dev.mysql.com/doc/refman/8.0/en/other-vendor-data-types.html): ``INT8`` is
  BIGINT (sqlglot: TINYINT), ``REAL`` is DOUBLE (sqlglot: FLOAT), ``LONG`` and
  ``LONG VARCHAR`` are MEDIUMTEXT (sqlglot: BIGINT), ``INT3``/``MIDDLEINT`` are MEDIUMINT,
  ``NATIONAL CHAR``/``NATIONAL VARCHAR`` are NCHAR/NVARCHAR (both unknown to sqlglot).
"""

from __future__ import annotations

from collections.abc import Sequence

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
    "tokenize",
]


class _Tokenizer(MySQL.Tokenizer):
    # MySQL's tokenizer swallows everything after RENAME into one string token (it is a
    # "command" to sqlglot); RENAME TABLE needs its tokens.
    COMMANDS = MySQL.Tokenizer.COMMANDS - {TokenType.RENAME}


# One-token aliases: the upper-case word as written -> the SQL MySQL means by it.
_ALIASES = {
    "INT8": "BIGINT",
    "INT3": "MEDIUMINT",
    "MIDDLEINT": "MEDIUMINT",
    "REAL": "DOUBLE",
    "LONG": "MEDIUMTEXT",
}
# Two-token aliases: (first word, second word) -> replacement.
_PAIR_ALIASES = {
    ("LONG", "VARCHAR"): "MEDIUMTEXT",
    ("LONG", "VARBINARY"): "MEDIUMBLOB",
    ("NATIONAL", "CHAR"): "NCHAR",
    ("NATIONAL", "CHARACTER"): "NCHAR",
    ("NATIONAL", "VARCHAR"): "NVARCHAR",
}


def tokenize(sql: str) -> list[Token]:
    """MySQL tokens of ``sql`` without a trailing ``;``; DDLError when it does not lex."""
    try:
        tokens = _Tokenizer().tokenize(sql)
    except TokenError as exc:
        raise DDLError(sql, f"cannot tokenize: {exc}") from None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if any(t.token_type == TokenType.SEMICOLON for t in tokens):
        raise DDLError(sql, "expected one statement, got several")
    return tokens


def _word(token: Token) -> str:
    """The keyword a token spells, or '' for quoted identifiers and strings."""
    if token.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
        return ""
    return token.text.upper()


def _text(sql: str, tokens: Sequence[Token]) -> str:
    return sql[tokens[0].start : tokens[-1].end + 1] if tokens else ""


def fix_type_aliases(sql: str) -> str:
    """``sql`` with the type aliases sqlglot misreads replaced (see the module docstring)."""
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


def _split_commas(tokens: Sequence[Token]) -> list[list[Token]]:
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
    raise DDLError(sql, f"expected a table name, got {_text(sql, tokens)!r}")


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
    """The pairs of ``RENAME TABLE a TO b[, c TO d ...]``; None for other statements."""
    tokens = tokenize(sql)
    if [_word(t) for t in tokens[:2]] != ["RENAME", "TABLE"]:
        return None
    pairs = []
    for part in _split_commas(tokens[2:]):
        words = [_word(t) for t in part]
        if "TO" not in words:
            raise DDLError(sql, f"expected 'old TO new', got {_text(sql, part)!r}")
        to = words.index("TO")
        pairs.append((_table_name(sql, part[:to]), _table_name(sql, part[to + 1 :])))
    return pairs


def index_statement_as_alter(sql: str) -> str | None:
    """``CREATE [kind] INDEX i ON t (...)`` / ``DROP INDEX i ON t`` as ALTER TABLE, else None."""
    tokens = tokenize(sql)
    words = [_word(t) for t in tokens]
    if words[:1] == ["CREATE"] and "INDEX" in words[1:3] and "ON" in words:
        index, on = words.index("INDEX"), words.index("ON")
        kind = _text(sql, tokens[1:index])
        name = _text(sql, tokens[index + 1 : on])
        paren = next((i for i in range(on, len(tokens)) if words[i] == "("), len(tokens))
        table = _text(sql, tokens[on + 1 : paren])
        rest = _text(sql, tokens[paren:])
        return f"ALTER TABLE {table} ADD {kind} INDEX {name} {rest}"
    if words[:2] == ["DROP", "INDEX"] and "ON" in words:
        on = words.index("ON")
        name, table = _text(sql, tokens[2:on]), _text(sql, tokens[on + 1 :])
        return f"ALTER TABLE {table} DROP INDEX {name}"
    return None


def alter_specs(sql: str) -> tuple[str, TableName, list[str]] | None:
    """``ALTER TABLE t spec, ...`` as (``ALTER TABLE t``, t, [spec text, ...]); else None.

    ``ADD [COLUMN] (a INT, b INT)`` comes back as one ``ADD COLUMN`` spec per column and
    ``RENAME AS t2`` as ``RENAME TO t2``.
    """
    tokens = tokenize(sql)
    words = [_word(t) for t in tokens]
    if words[:2] != ["ALTER", "TABLE"]:
        return None
    end = 3
    if end < len(tokens) and tokens[end].token_type == TokenType.DOT:
        end = 5
    head = _text(sql, tokens[:end])
    specs: list[str] = []
    for part in _split_commas(tokens[end:]):
        specs.extend(_spec_texts(sql, part))
    return head, _table_name(sql, tokens[2:end]), [s for s in specs if s]


def _spec_texts(sql: str, part: list[Token]) -> list[str]:
    words = [_word(t) for t in part]
    start = 2 if words[1:2] == ["COLUMN"] else 1
    if words[:1] == ["ADD"] and words[start : start + 1] == ["("] and words[-1:] == [")"]:
        return ["ADD COLUMN " + _text(sql, col) for col in _split_commas(part[start + 1 : -1])]
    if words[:2] == ["RENAME", "AS"]:
        return ["RENAME TO " + _text(sql, part[2:])]
    return [_text(sql, part)]


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
