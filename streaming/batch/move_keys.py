"""A split move's ``keys`` predicate (docs/moves.md) as Spark SQL: over a row event's image
(which of a shard's rows move) and over the target table's columns (which rows the switch
re-homes).

The predicate is MySQL, written by the operator in the settings; sqlglot (the project's
parser) reads it and writes it in Spark's dialect with each column replaced by a
placeholder, and each placeholder then becomes an expression of this project's quoting
module (``streaming.sql.quoting``): a value of the image read as its column's type, or the
target column's quoted name.
"""

from __future__ import annotations

from collections.abc import Callable

from schemas.model import TableSchema
from streaming.sql.quoting import QuotingError, ident, map_get
from streaming.sql.spark_types import value_expr

__all__ = ["IMAGE_KEYS", "image_predicate", "table_predicate"]

# A row event's image as a map of lower-case column names to text values (the row's after
# image, or its before image for a delete).
IMAGE_KEYS = (
    "transform_keys(from_json(coalesce(after, before), 'map<string,string>'), (k, v) -> lower(k))"
)


def _render(text: str, column: Callable[[str], str]) -> str:
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(text, read="mysql")
    names: list[str] = []

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):
            names.append(node.name.lower())
            return exp.column(f"shardmerge_key_{len(names) - 1}_")
        return node

    rendered = tree.transform(swap).sql(dialect="spark")
    # The placeholders go from the last to the first: `_1_` is no part of `_11_`.
    for i in reversed(range(len(names))):
        placeholder = f"shardmerge_key_{i}_"
        if rendered.count(placeholder) != 1:
            raise QuotingError(f"keys {text!r}: column {names[i]!r} did not render once")
        rendered = rendered.replace(placeholder, f"({column(names[i])})")
    return f"coalesce(({rendered}), false)"


def image_predicate(text: str, schema: TableSchema) -> str:
    """``text`` over a row event's image (:data:`IMAGE_KEYS` as ``_mk``... inlined), each
    column read as its type in ``schema`` (the shard's)."""

    def column(name: str) -> str:
        c = schema.column(name)
        if c is None:
            raise QuotingError(f"keys {text!r}: the shard has no column {name!r}")
        return value_expr(c.type, map_get(f"({IMAGE_KEYS})", name))

    return _render(text, column)


def table_predicate(text: str, schema: TableSchema) -> str:
    """``text`` over the target table's columns (``schema``: the downstream one)."""

    def column(name: str) -> str:
        c = schema.column(name)
        if c is None:
            raise QuotingError(f"keys {text!r}: the target has no column {name!r}")
        return ident(c.name)

    return _render(text, column)
