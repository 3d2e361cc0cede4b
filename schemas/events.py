"""The internal event form in Python: what every CDC format decodes to.

Same fields as the Spark form, :data:`streaming.source.contract.EVENT_SCHEMA`, which documents
each of them. Pure: pydantic only. In ``before``/``after`` a column the event sent as
``null`` is a key with the value None; a column it does not name is no key.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["DeadLetter", "Op", "ShardEvent"]

Op = Literal["c", "u", "d", "r", "t", "ddl"]


class ShardEvent(BaseModel):
    """One decoded event, in Python (same fields as :data:`EVENT_SCHEMA`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    db: str
    tbl: str
    op: Op
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    ddl: str | None = None
    pos_file: str | None = None
    pos: int | None = None
    pos_row: int | None = None
    gtid: str | None = None
    ts_ms: int | None = None
    schema_fp: str | None = None
    row_schema: str | None = None
    snapshot: bool = False
    topic: str = ""
    partition: int = 0
    offset: int = 0
    format: Literal["debezium", "canal", "maxwell"] = "debezium"


class DeadLetter(BaseModel):
    """A record that could not be decoded, kept with the reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    format: str
    reason: str
