"""The wire formats, as pydantic models: one module per format.

- :mod:`streaming.events.debezium`: Debezium MySQL data envelope and schema-change topic;
- :mod:`streaming.events.canal`: canal-json (FlatMessage);
- :mod:`streaming.events.maxwell`: maxwell-json.

Each module documents the quirks of its format and decodes it to
:class:`~streaming.events.contract.ShardEvent`;
:func:`streaming.events.decode_py.decode_record` is the entry point.
"""

from __future__ import annotations

from streaming.events.canal import CanalMessage
from streaming.events.debezium import (
    ConnectField,
    DebeziumPayload,
    DebeziumSchemaChange,
    DebeziumSource,
    TableChange,
)
from streaming.events.maxwell import MaxwellMessage

__all__ = [
    "CanalMessage",
    "ConnectField",
    "DebeziumPayload",
    "DebeziumSchemaChange",
    "DebeziumSource",
    "MaxwellMessage",
    "TableChange",
]
