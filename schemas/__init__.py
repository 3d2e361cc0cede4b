"""Table schemas: the frozen model, the type lattice, DDL parsing.

Pure: no Spark, no Kafka, no I/O.
"""

from schemas.ddl import apply, normalize, parse_create_table, parse_ddl, parse_type
from schemas.dml import parse_dml
from schemas.errors import DDLError, Incompatible, SchemaError
from schemas.lattice import compare, diff, join
from schemas.model import Column, ColumnType, Index, TableName, TableSchema

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
