"""The wire formats, as pydantic models: one module per format.

- :mod:`tests.oracle.debezium`: Debezium MySQL data envelope and schema-change topic;
- :mod:`tests.oracle.canal`: canal-json (FlatMessage);
- :mod:`tests.oracle.maxwell`: maxwell-json.

Each module documents the quirks of its format and decodes it to
:class:`~streaming.source.contract.ShardEvent`;
:func:`tests.oracle.decode_py.decode_record` is the entry point.
"""

from __future__ import annotations

from tests.oracle.canal import CanalMessage
from tests.oracle.debezium import (
    ConnectField,
    DebeziumPayload,
    DebeziumSchemaChange,
    DebeziumSource,
    TableChange,
)
from tests.oracle.maxwell import MaxwellMessage

__all__ = [
    "CanalMessage",
    "ConnectField",
    "DebeziumPayload",
    "DebeziumSchemaChange",
    "DebeziumSource",
    "MaxwellMessage",
    "TableChange",
]
