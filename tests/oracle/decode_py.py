"""The reference decoder, in Python: one Kafka record -> events, or a dead letter.

Used for fixtures and tests, by the driver's DDL path, and as the oracle the Spark decoder
(``streaming.source.decode``) is tested against (``tests/fixtures/cdc/cases.yaml``).

Rules both decoders follow:

1. A null value is a tombstone: no event, and no error (it is part of the protocol).
2. A value that is not JSON, not the format's envelope, or has an unknown op, a missing
   db/table or an undecodable DECIMAL becomes a dead letter whose reason names the
   field (``unknown op "x" at payload.op``). Nothing is dropped silently.
3. ``source``: Debezium's ``source.name``, else the ``source`` configured for the topic
   (and for the schema-change topic, whose name is the connector's ``topic.prefix``, else
   the topic). canal and maxwell carry no source id: it must be configured.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from schemas.events import DeadLetter, ShardEvent
from tests.oracle._common import DecodeError
from tests.oracle.canal import decode_canal
from tests.oracle.debezium import decode_debezium
from tests.oracle.maxwell import decode_maxwell

__all__ = ["FORMATS", "Format", "decode_record"]

Format = Literal["debezium", "canal", "maxwell"]
FORMATS: tuple[Format, ...] = ("debezium", "canal", "maxwell")


def decode_record(
    fmt: Format,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    *,
    source: str | None = None,
) -> list[ShardEvent] | DeadLetter:
    """Decode one Kafka record of format ``fmt``.

    Raises ValueError for an unknown format, or canal/maxwell without ``source`` (a
    configuration error, not bad input).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown CDC format {fmt!r}; known: {', '.join(FORMATS)}")
    if fmt != "debezium" and not source:
        raise ValueError(f"{fmt} records carry no source id: configure one for topic {topic!r}")
    if value is None:
        return []
    try:
        obj = _parse(value, fmt)
        if fmt == "debezium":
            return decode_debezium(
                obj, source=source, topic=topic, partition=partition, offset=offset
            )
        decode = decode_canal if fmt == "canal" else decode_maxwell
        return decode(obj, source=source or "", topic=topic, partition=partition, offset=offset)
    except DecodeError as exc:
        return DeadLetter(
            topic=topic,
            partition=partition,
            offset=offset,
            key=key,
            value=value,
            format=fmt,
            reason=exc.reason,
        )


def _parse(value: bytes, fmt: Format) -> Any:
    try:
        text = value.decode("utf-8")
        # maxwell has no column types: keep a fractional number's digits (a DECIMAL).
        return json.loads(text, parse_float=str) if fmt == "maxwell" else json.loads(text)
    except UnicodeDecodeError as exc:
        raise DecodeError(f"bad JSON (not UTF-8: {exc.reason})", "value") from None
    except json.JSONDecodeError as exc:
        raise DecodeError(f"bad JSON ({exc.msg}, char {exc.pos})", "value") from None
