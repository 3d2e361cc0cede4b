"""Small tables of driver values (the row plan, release and wait positions, per-shard
columns) as DataFrames that need no Python worker.

``SparkSession.createDataFrame`` of a Python list makes a Python RDD: every Spark job that
reads it (the broadcast of a small table is one) starts a Python worker task. Here the
rows go to the JVM as one JSON text in one call and are read back with ``from_json``: the
plan holds one literal, whatever the number of rows (no expression grows with shards),
and the executors never run Python.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructType,
    _parse_datatype_string,
)

__all__ = ["local_frame"]


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str) -> DataFrame:
    """``rows`` (tuples in the order of ``schema``'s fields, a DDL string such as
    ``"a string, b int"``) as a DataFrame of that schema. Nested values follow the types:
    a struct is a tuple, an array a list, a map a dict."""
    struct = _parse_datatype_string(schema)
    assert isinstance(struct, StructType), schema
    text = json.dumps([_jsonable(tuple(row), struct) for row in rows], separators=(",", ":"))
    # FAILFAST: a value that does not read back as its type fails the batch, never a
    # NULL row (the default, PERMISSIVE, would turn it into one).
    parsed = F.from_json(F.lit(text), ArrayType(struct), {"mode": "FAILFAST"})
    return spark.range(1).select(F.inline(parsed))


def _jsonable(value: Any, dtype: DataType) -> Any:
    if value is None:
        return None
    if isinstance(dtype, StructType):
        if len(value) != len(dtype.fields):
            raise ValueError(f"{value!r} does not have the {len(dtype.fields)} fields of {dtype}")
        return {f.name: _jsonable(v, f.dataType) for f, v in zip(dtype.fields, value, strict=True)}
    if isinstance(dtype, ArrayType):
        return [_jsonable(v, dtype.elementType) for v in value]
    if isinstance(dtype, MapType):
        return {str(k): _jsonable(v, dtype.valueType) for k, v in value.items()}
    if isinstance(value, Decimal):
        # exact as text (a JSON number would go through a float); from_json reads a
        # decimal column from a string
        return str(value)
    return value
