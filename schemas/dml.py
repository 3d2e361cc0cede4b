"""Simple single-table MySQL DML, as used in test scenarios, parsed with sqlglot.

Three shapes are read: ``INSERT INTO t (a, b) VALUES (1, 'x')[, (...)]``,
``UPDATE t SET a = 1 WHERE id = 5 [AND k = 2]`` and ``DELETE FROM t WHERE id = 5 [AND
...]``. Values become Python values: integers ``int``, exponent literals (``1e3``)
``float``, other numbers (``1.50``) ``str`` so that decimals stay exact, strings ``str``,
``NULL`` ``None``, ``TRUE``/``FALSE`` 1/0. Anything else is a :class:`DMLError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from schemas.model import TableName
from shardmerge.errors import ShardMergeError

__all__ = ["DMLError", "DmlStatement", "Value", "parse_dml"]

Value = int | float | str | None


class DMLError(ShardMergeError):
    """A DML statement this reader does not handle; ``statement`` and ``reason`` kept."""

    def __init__(self, statement: str, reason: str) -> None:
        self.statement = statement
        self.reason = reason
        super().__init__(f"cannot handle DML {statement!r}: {reason}")


@dataclass(frozen=True)
class DmlStatement:
    """One statement: ``rows`` for insert, ``key`` (WHERE equalities) for update/delete,
    ``set`` (assignments) for update."""

    op: Literal["insert", "update", "delete"]
    table: TableName
    rows: tuple[dict[str, Value], ...] = ()
    key: dict[str, Value] = field(default_factory=dict)
    set: dict[str, Value] = field(default_factory=dict)


class _Fail(Exception):
    pass


def parse_dml(sql: str) -> DmlStatement:
    """``sql`` as a :class:`DmlStatement`; DMLError when it is not one of the three shapes."""
    try:
        trees = sqlglot.parse(sql, read="mysql")
    except SqlglotError as exc:
        raise DMLError(sql, f"cannot parse: {_plain(exc)}") from exc
    statements = [t for t in trees if t is not None]
    if len(statements) != 1:
        raise DMLError(sql, f"expected one statement, got {len(statements)}")
    try:
        return _statement(statements[0])
    except _Fail as exc:
        raise DMLError(sql, str(exc)) from None


def _statement(tree: exp.Expr) -> DmlStatement:
    if isinstance(tree, exp.Insert):
        return _insert(tree)
    if isinstance(tree, exp.Update):
        assignments = dict(_equality(e) for e in tree.expressions)
        return DmlStatement("update", _table(tree.this), key=_where(tree), set=assignments)
    if isinstance(tree, exp.Delete):
        return DmlStatement("delete", _table(tree.this), key=_where(tree))
    raise _Fail(f"not INSERT, UPDATE or DELETE ({tree.key.upper()})")


def _insert(tree: exp.Insert) -> DmlStatement:
    if tree.args.get("ignore") or tree.args.get("overwrite") or tree.args.get("conflict"):
        raise _Fail("only plain INSERT INTO is supported")
    target = tree.this
    if not isinstance(target, exp.Schema) or not target.expressions:
        raise _Fail("INSERT needs a column list: INSERT INTO t (a, b) VALUES (...)")
    columns = [c.name for c in target.expressions]
    values = tree.expression
    if not isinstance(values, exp.Values):
        raise _Fail("only INSERT ... VALUES is supported")
    rows = []
    for row in values.expressions:
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(items) != len(columns):
            raise _Fail(f"{len(items)} values for {len(columns)} columns")
        rows.append(dict(zip(columns, (_value(v) for v in items), strict=True)))
    return DmlStatement("insert", _table(target.this), rows=tuple(rows))


def _table(node: Any) -> TableName:
    if not isinstance(node, exp.Table) or not node.name:
        raise _Fail("expected one table")
    if node.args.get("joins"):
        raise _Fail("only single-table statements are supported")
    return TableName(node.name, node.db or None)


def _where(tree: exp.Expression) -> dict[str, Value]:
    where = tree.args.get("where")
    if where is None:
        raise _Fail("a WHERE clause of column = value equalities is required")
    for arg in ("joins", "using", "order", "limit"):
        if tree.args.get(arg):
            raise _Fail(f"{arg.upper()} is not supported")
    conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    return dict(_equality(c) for c in conjuncts)


def _equality(node: exp.Expr) -> tuple[str, Value]:
    if isinstance(node, exp.EQ) and isinstance(node.this, exp.Column):
        return node.this.name, _value(node.expression)
    raise _Fail(f"expected column = value, got {node.sql(dialect='mysql')!r}")


def _value(node: exp.Expr) -> Value:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return 1 if node.this else 0
    if isinstance(node, exp.Literal):
        return node.name if node.is_string else _number(node.name)
    negative = isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)
    if negative and not node.this.is_string:
        number = _number(node.this.name)
        return "-" + number if isinstance(number, str) else -number
    raise _Fail(f"unsupported value {node.sql(dialect='mysql')!r}")


def _number(text: str) -> int | float | str:
    if text.isdigit():
        return int(text)
    if "e" in text.lower():
        return float(text)
    return text


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _plain(exc: Exception) -> str:
    """sqlglot's message without its terminal colouring, on one line."""
    return " ".join(_ANSI.sub("", str(exc)).split())
