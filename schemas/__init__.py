"""Table schemas: the frozen model, the type lattice, DDL parsing.

Pure: no Spark, no Kafka, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardmerge.lazy import lazy_names

if TYPE_CHECKING:
    from schemas.ddl import apply, normalize, parse_create_table, parse_ddl, parse_type
    from schemas.dml import parse_dml
    from schemas.errors import DDLError, Incompatible, SchemaError
    from schemas.lattice import compare, diff, join
    from schemas.model import Column, ColumnType, Index, TableName, TableSchema

# Each name and the module that defines it: a name is imported when first used, so
# importing one light module of the package (the operator CLI reads settings and the
# saved state) does not load sqlglot.
_WHERE = {
    "apply": "schemas.ddl",
    "normalize": "schemas.ddl",
    "parse_create_table": "schemas.ddl",
    "parse_ddl": "schemas.ddl",
    "parse_type": "schemas.ddl",
    "parse_dml": "schemas.dml",
    "DDLError": "schemas.errors",
    "Incompatible": "schemas.errors",
    "SchemaError": "schemas.errors",
    "compare": "schemas.lattice",
    "diff": "schemas.lattice",
    "join": "schemas.lattice",
    "Column": "schemas.model",
    "ColumnType": "schemas.model",
    "Index": "schemas.model",
    "TableName": "schemas.model",
    "TableSchema": "schemas.model",
}

__all__ = [
    "Column",
    "ColumnType",
    "DDLError",
    "Incompatible",
    "Index",
    "SchemaError",
    "TableName",
    "TableSchema",
    "apply",
    "compare",
    "diff",
    "join",
    "normalize",
    "parse_create_table",
    "parse_ddl",
    "parse_dml",
    "parse_type",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE)
