"""The producer against the real broker: a sharded workload goes out, comes back through a
consumer, decodes with the reference decoder, and replays to the workload's final rows."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka import Consumer

from devkit.kafka_local import KafkaBroker
from devkit.producer import DebeziumProducer, send_workload
from devkit.workload import sharded_workload
from schemas.events import DeadLetter, ShardEvent
from tests.oracle.decode_py import decode_record

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SHARDS, ROWS = 6, 400
DDL = {0.4: "ALTER TABLE {table} ADD COLUMN note VARCHAR(64)"}


def _consume(bootstrap: str, topics: list[str], count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"it-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(topics)
    got: list[Any] = []
    deadline = time.monotonic() + 90
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize(
    ("schemas_enable", "routed"),
    [(False, False), (True, False), (True, True)],
    ids=["bare", "schemas", "routed"],
)
def test_sharded_workload_round_trips(
    kafka: KafkaBroker, schemas_enable: bool, routed: bool
) -> None:
    source = f"it{uuid.uuid4().hex[:10]}"
    producer = DebeziumProducer(
        kafka.bootstrap, source, schemas_enable=schemas_enable,
        decimal_mode="base64" if schemas_enable else "string", partitions_hint=3,
        routed=("orders", 4) if routed else None,
    )  # fmt: skip
    workload = list(sharded_workload(SHARDS, ROWS, ddl_at=DDL, seed=11))
    assert send_workload(producer, workload) == len(workload)
    producer.truncate("db_0", "orders_0")
    producer.flush()
    assert producer.delivered == producer.sent

    shards = sorted({(e.db, e.table) for e in workload})
    topics = [source] + (
        [f"{source}.orders"] if routed else [f"{source}.{db}.{table}" for db, table in shards]
    )
    messages = _consume(kafka.bootstrap, topics, producer.sent)
    assert len(messages) == producer.sent
    if routed:
        # as Debezium's routing writes them: one topic, a shard's records in one partition
        # (tombstones where their key hashes), the key naming the table's own topic
        data = [m for m in messages if m.topic() != source and m.value() is not None]
        homes: dict[str, set[int]] = defaultdict(set)
        for m in data:
            key = json.loads(m.key()) if m.key() else None
            physical = key["payload"]["__dbz__physicalTableIdentifier"] if key else None
            value = json.loads(m.value())["payload"]
            home = f"{source}.{value['source']['db']}.{value['source']['table']}"
            assert physical in (None, home)  # a TRUNCATE has no key
            homes[home].add(m.partition())
        assert len(homes) == SHARDS and all(len(p) == 1 for p in homes.values()), homes
        assert len({p for ps in homes.values() for p in ps}) > 1  # spread over partitions

    by_shard: dict[tuple[str, str], list[tuple[Any, ShardEvent]]] = defaultdict(list)
    tombstones = 0
    for msg in messages:
        out = decode_record(
            "debezium", msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()
        )
        assert not isinstance(out, DeadLetter), out.reason
        tombstones += not out
        for event in out:
            assert event.source == source
            by_shard[(event.db, event.tbl)].append((msg, event))

    # Counts: every workload event came back once, plus a tombstone per delete.
    sent = Counter((e.db, e.table, e.op or "ddl") for e in workload)
    back = Counter((db, tbl, ev.op) for (db, tbl), pairs in by_shard.items() for _, ev in pairs)
    assert back - Counter({("db_0", "orders_0", "t"): 1}) == sent
    assert tombstones == sum(e.op == "d" for e in workload)

    for shard in shards:
        pairs = by_shard[shard]
        # Kafka order within a partition is binlog order.
        per_partition: dict[tuple[str, int], list[ShardEvent]] = defaultdict(list)
        for msg, ev in sorted(pairs, key=lambda p: (p[0].topic(), p[0].partition(), p[0].offset())):
            per_partition[(msg.topic(), msg.partition())].append(ev)
        for events in per_partition.values():
            assert [e.pos for e in events] == sorted(e.pos or 0 for e in events)
        # The binlog position orders the shard across topics and partitions: replayed in
        # that order, the rows end as the workload left them, and the ALTER splits the rows
        # into those without and with the new column (and schema fingerprint).
        ordered = [
            ev for _, ev in sorted(pairs, key=lambda p: (p[1].pos_file or "", p[1].pos or 0))
        ]
        ddl = [ev for ev in ordered if ev.op == "ddl"]
        assert [d.ddl.split()[0] for d in ddl if d.ddl] == ["CREATE", "ALTER"]
        rows = [ev for ev in ordered if ev.op in ("c", "u", "d")]
        alter_pos = ddl[1].pos or 0
        for ev in rows:
            image = ev.after or ev.before or {}
            assert ("note" in image) == ((ev.pos or 0) > alter_pos), ev
        if schemas_enable:
            fps = {((ev.pos or 0) > alter_pos, ev.schema_fp) for ev in rows}
            assert len(fps) == 2 and None not in {fp for _, fp in fps}
        assert _replay(rows) == _final_rows(workload, shard)
        assert (ordered[-1].op == "t") == (shard == ("db_0", "orders_0"))


def _replay(events: list[ShardEvent]) -> dict[int, str]:
    table: dict[int, str] = {}
    for ev in events:
        if ev.op == "d" and ev.before is not None:
            del table[ev.before["id"]]
        elif ev.after is not None:
            table[ev.after["id"]] = ev.after["amount"]
    return table


def _final_rows(workload: list[Any], shard: tuple[str, str]) -> dict[int, str]:
    table: dict[int, str] = {}
    for e in workload:
        if (e.db, e.table) != shard or e.kind != "row":
            continue
        if e.op == "d":
            del table[e.before["id"]]
        else:
            table[e.after["id"]] = format(Decimal(e.after["amount"]), "f")
    return table
