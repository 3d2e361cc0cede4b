"""Malformed CDC records of every kind, for the fault suite's ``malformed`` case.

Each kind is a way a Debezium record can be wrong: not JSON, not an object, an envelope
of another shape, an operation it does not have, a row image without what the row needs,
a key that does not fit the key column, a source block without its table, and garbage on
the schema-change topic. Records of the valid shapes are built from a real record of the
shard (:class:`~devkit.debezium_build.DebeziumBuilder`) and then broken in one place, with
keys the workload never uses: if one of them were written as a row, the comparison with
the oracle would find an invented row.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer

from devkit.debezium_build import DebeziumBuilder
from devkit.workload import sharded_workload

__all__ = ["KINDS", "send_bad_records"]

Payload = dict[str, Any]
FRESH_ID = 900_000_000_000


def _row(mutate: Callable[[Payload], None]) -> Callable[[Payload, random.Random], bytes]:
    def make(template: Payload, rng: random.Random) -> bytes:
        payload = json.loads(json.dumps(template))
        mutate(payload)
        return json.dumps(payload).encode()

    return make


def _set(path: tuple[str, ...], value: Any) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        for part in path[:-1]:
            p = p[part]
        p[path[-1]] = value

    return mutate


def _late(mutate: Callable[[Payload], None]) -> Callable[[Payload], None]:
    """``mutate``, and a binlog position after everything the workload writes."""

    def both(p: Payload) -> None:
        mutate(p)
        p["source"]["file"] = "mysql-bin.999999"
        p["source"]["pos"] = 4

    return both


def _drop(path: tuple[str, ...]) -> Callable[[Payload], None]:
    def mutate(p: Payload) -> None:
        for part in path[:-1]:
            p = p[part]
        del p[path[-1]]

    return mutate


def _named_twice(upper: bool) -> Callable[[Payload, random.Random], bytes]:
    """A valid row whose after image names one of its columns a second time, first: as
    written (``user_id`` twice) or in capitals (``USER_ID``, the same MySQL column)."""

    def make(template: Payload, rng: random.Random) -> bytes:
        name = next(k for k in template["after"] if k != "id")
        text = json.dumps(template)
        twice = json.dumps(name.upper() if upper else name)
        return text.replace('"after": {', f'"after": {{{twice}: 7, ', 1).encode()

    return make


def _binary(template: Payload, rng: random.Random) -> bytes:
    return b"\x00\xff" + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))


def _const(value: bytes) -> Callable[[Payload, random.Random], bytes]:
    return lambda template, rng: value


# kind -> (topic: "data" or "schema", maker of the value from a valid template)
KINDS: dict[str, tuple[str, Callable[[Payload, random.Random], bytes]]] = {
    "bad_json": ("data", _const(b'{"before": null, "after": {"id": 1')),
    "binary": ("data", _binary),
    "empty_value": ("data", _const(b"")),
    "array": ("data", _const(b'[{"op": "c"}]')),
    "wrong_envelope": ("data", lambda t, rng: json.dumps({"row": t}).encode()),
    "unknown_op": ("data", _row(_set(("op",), "x"))),
    "c_without_after": ("data", _row(_set(("after",), None))),
    "after_without_key": ("data", _row(_drop(("after", "id")))),
    "string_in_int_key": ("data", _row(_set(("after", "id"), "abc"))),
    "huge_int_key": ("data", _row(_set(("after", "id"), 10**30))),
    "source_without_table": ("data", _row(_drop(("source", "table")))),
    "column_named_twice": ("data", _named_twice(upper=False)),
    "column_named_twice_in_capitals": ("data", _named_twice(upper=True)),
    # Rows after every DDL of their shard that claim one nobody ran (a column nobody added,
    # a NOT NULL column gone): no DDL can come to explain them, so they must not make their
    # shard wait. (At an early position the same image is a row behind a DROP COLUMN,
    # written without the column: docs/ordering.md.)
    "unknown_column": ("data", _row(_late(_set(("after", "zz_never_added"), 1)))),
    "missing_not_null": ("data", _row(_late(_drop(("after", "user_id"))))),
    "ddl_bad_json": ("schema", _const(b'{"ddl": "ALTER TABLE')),
    "ddl_binary": ("schema", _binary),
    "ddl_array": ("schema", _const(b'["ALTER TABLE x ADD COLUMN y INT"]')),
    "ddl_without_statement": ("schema", _row(_drop(("ddl",)))),
    "ddl_empty_value": ("schema", _const(b"")),
    "ddl_wrong_envelope": ("schema", lambda t, rng: json.dumps({"change": t}).encode()),
}


def _templates(
    source: str, shards: int
) -> list[tuple[str, bytes | None, Payload, str, bytes, Payload]]:
    """Per shard: (data topic, key, a valid create's payload, schema topic, key, a DDL's)."""
    builder = DebeziumBuilder(source)
    out = []
    firsts: dict[tuple[str, str], Any] = {}
    for ev in sharded_workload(shards, 1, seed=99):
        if ev.kind == "row" and (ev.db, ev.table) not in firsts:
            firsts[(ev.db, ev.table)] = ev
    for n, ((db, table), ev) in enumerate(sorted(firsts.items())):
        after = {**ev.after, "id": FRESH_ID + n}
        record = builder.row(db, table, "c", None, after, ev.schema)[0]
        ddl = builder.ddl(db, table, f"ALTER TABLE {table} ADD COLUMN junk INT", ev.schema)
        out.append(
            (
                record.topic,
                record.key,
                json.loads(record.value or b""),
                ddl.topic,
                ddl.key,
                json.loads(ddl.value or b""),
            )
        )
    return out


def send_bad_records(
    bootstrap: str, source: str, shards: int, n: int
) -> dict[tuple[str, int, int], str]:
    """Send ``n`` bad records spread over the kinds and shards (topics must exist);
    return the kind of each, by (topic, partition, offset)."""
    rng = random.Random(5)
    templates = _templates(source, shards)
    kinds = sorted(KINDS)
    sent: dict[tuple[str, int, int], str] = {}
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})

    def delivered(kind: str) -> Callable[[KafkaError | None, Any], None]:
        def done(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(f"{kind}: {err.str()}")
            else:
                sent[(msg.topic(), msg.partition(), msg.offset())] = kind

        return done

    for i in range(n):
        kind = kinds[i % len(kinds)]
        where, make = KINDS[kind]
        topic, key, payload, schema_topic, schema_key, ddl = templates[i % len(templates)]
        value = make(ddl if where == "schema" else payload, rng)
        target, k = (schema_topic, schema_key) if where == "schema" else (topic, key)
        producer.produce(target, value, k, partition=0, on_delivery=delivered(kind))
        if i % 1000 == 999:
            producer.poll(0)
    left = producer.flush(120)
    if errors or left:
        raise RuntimeError(f"bad records not delivered: {left} left, errors {errors[:3]}")
    return sent
