"""The Spark decoder agrees with the reference decoder, record by record, through Kafka.

Every fixture of ``tests/fixtures/cdc/cases.yaml`` (and the quirks listed in ``EXTRA``
below, which the fixtures do not reach) is produced to a uuid-named topic, read back by
Spark's Kafka source, decoded by :func:`streaming.source.decode.decode`, and compared with
:func:`tests.oracle.decode_py.decode_record` run on the very bytes Spark read (the
oracle): the same events (row images compared as parsed JSON), and the same dead letters
(same record, same field path in the reason; the same words too, except where the
reference words come from Python's JSON parser or pydantic).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from devkit.kafka_local import KafkaBroker
from schemas.events import DeadLetter
from streaming.job import kafka_source_options
from streaming.source.contract import DEAD_LETTER_SCHEMA, EVENT_SCHEMA
from streaming.source.decode import decode, split
from streaming.storage.deadletter import count, write_dead_letters
from tests.oracle.decode_py import decode_record

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(300)]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cdc"
CASES = yaml.safe_load((FIXTURES / "cases.yaml").read_text())
FORMATS = ("debezium", "canal", "maxwell")


@dataclass(frozen=True)
class Rec:
    """One Kafka record to produce. ``topic`` is the logical topic (a uuid topic stands
    for it); ``exact``: the reason's words must match the reference's, not only its path."""

    name: str
    fmt: str
    topic: str
    value: bytes | None
    key: bytes | None = None
    source: str | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    exact: bool = True


def _fixture_records() -> list[Rec]:
    out = []
    for c in CASES:
        value = None if c["file"] is None else (FIXTURES / c["file"]).read_bytes()
        headers = tuple((k, v.encode()) for k, v in (c.get("headers") or {}).items())
        out.append(
            Rec(
                c["name"],
                c["format"],
                c["topic"],
                value,
                None if c["key"] is None else c["key"].encode(),
                c.get("source"),
                headers,
                # Python's json module words its syntax errors its own way.
                exact=not c.get("dead_letter", "").startswith("bad JSON ("),
            )
        )
    return out


# --- quirks beyond the fixtures ------------------------------------------------------------

_SRC = {
    "version": "3.1.0.Final",
    "connector": "mysql",
    "name": "shop",
    "ts_ms": 1700000000000,
    "snapshot": "false",
    "db": "db_1",
    "table": "t1",
    "server_id": 1,
    "gtid": None,
    "file": "mysql-bin.000001",
    "pos": 4242,
    "row": 2,
}


def _dec(unscaled: int) -> str:
    """Debezium's DECIMAL bytes: big-endian two's complement, minimal size, base64."""
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


def _decimal_field(name: str, scale: int) -> dict[str, Any]:
    return {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": str(scale), "connect.decimal.precision": "38"},
        "field": name,
    }


_ROW_FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    _decimal_field("a", 2),
    _decimal_field("big", 10),
    _decimal_field("whole", 0),
    {"type": "string", "optional": True, "field": "note"},
]
_ENVELOPE = {
    "type": "struct",
    "fields": [
        {"type": "struct", "fields": _ROW_FIELDS, "optional": True, "field": "before"},
        {"type": "struct", "fields": _ROW_FIELDS, "optional": True, "field": "after"},
        {"type": "string", "optional": False, "field": "op"},
    ],
    "optional": False,
    "name": "x.Envelope",
}


def _dbz(payload: Any, schema: Any = None, *, wrap: bool = False) -> bytes:
    obj = {"schema": schema, "payload": payload} if wrap else payload
    return json.dumps(obj, ensure_ascii=False).encode()


def _extra_records() -> list[Rec]:
    dbz, canal, mx = "dbz.db_1.t1", "canal.extra", "maxwell.extra"
    row = {"id": 1, "a": _dec(0), "big": _dec(12345678901234567890123456), "whole": None}
    after = {"id": 1, "a": _dec(-5), "big": _dec(-(10**27)), "whole": _dec(-129), "note": "é"}
    ddl = (
        "/* lead */ ALTER TABLE t1 ADD COLUMN a VARCHAR(8) DEFAULT 'x;y\\';z'; -- tail ;\n"
        "ALTER TABLE `t2` ADD COLUMN `b;c` INT; # hash ; comment\n"
        'CREATE DATABASE d2; ALTER TABLE t3 COMMENT "q;";;'
    )
    change = {
        "source": {**_SRC, "name": None},
        "databaseName": "db_1",
        "ddl": ddl,
        "tableChanges": [
            {"type": "ALTER", "id": '"db_1"."t2"', "previousId": None},
            {"type": "ALTER", "id": '"db_1"."t1"', "previousId": None},
        ],
    }
    run, escapes = "x;" * 20_000, "\\\\;" * 20_000  # 40,000 and 60,000 characters
    long_ddl = (
        f"ALTER TABLE t1 ADD COLUMN c VARCHAR(9) DEFAULT '{run}';\n"
        f'ALTER TABLE `t2` COMMENT = "{escapes}";'
    )
    canal_types = {"u": "bigint(20) unsigned", "f": "double", "d": "decimal(10,3)",
                   "i": "int(11)", "t": "tinyint(4)", "s": "varchar(8)"}  # fmt: skip
    canal_row = {"u": "18446744073709551615", "f": "1e10", "d": "-0.010", "i": " 42 ",
                 "t": "1_0", "s": "12", "x": "no type", "n": None}  # fmt: skip

    def canal_msg(**kw: Any) -> bytes:
        msg = {"id": 1, "database": "db_1", "table": "t1", "pkNames": ["u"], "isDdl": False,
               "type": "INSERT", "es": 1700000000000, "ts": 1700000000100, "sql": "",
               "sqlType": None, "mysqlType": dict(reversed(canal_types.items())),
               "data": [canal_row], "old": None}  # fmt: skip
        msg.update(kw)
        return json.dumps({k: v for k, v in msg.items() if v is not ...}).encode()

    mx_row = (
        '{"id":1,"amount":12.50,"rate":1.0E10,"z":-0.0,"u":18446744073709551615,'
        '"j":{"k":[1,"x"]},"s":"12.50","n":null}'
    )

    def maxwell_msg(body: str) -> bytes:
        return ('{"database":"db_1","table":"t1","ts":1700000000,' + body + "}").encode()

    return [
        # Debezium
        Rec("dbz_schemas_tombstone", "debezium", dbz,
            _dbz(None, {"type": "struct"}, wrap=True)),
        Rec("dbz_decimals", "debezium", dbz, _dbz(
            {"op": "u", "source": _SRC, "before": row, "after": after}, _ENVELOPE, wrap=True)),
        Rec("dbz_decimal_not_text", "debezium", dbz, _dbz(
            {"op": "c", "source": _SRC, "after": {"id": 2, "a": 12}}, _ENVELOPE, wrap=True)),
        Rec("dbz_ddl_comments_quotes", "debezium", "dbz", _dbz(change)),
        # Long quoted strings and long digit runs: Java's regex recursion must not
        # overflow the stack on them (each would have: a StackOverflowError in a task).
        Rec("dbz_ddl_long_literals", "debezium", "dbz", _dbz({**change, "ddl": long_ddl})),
        Rec("dbz_name_from_config", "debezium", dbz, _dbz(
            {"op": "c", "source": {**_SRC, "name": None}, "after": {"id": 3}}), source="cfg"),
        Rec("dbz_no_name", "debezium", "dbz.unmapped", _dbz(
            {"op": "c", "source": {**_SRC, "name": ""}, "after": {"id": 4}})),
        Rec("dbz_unknown_snapshot", "debezium", dbz, _dbz(
            {"op": "r", "source": {**_SRC, "snapshot": "maybe"}, "after": {"id": 5}})),
        Rec("dbz_missing_after", "debezium", dbz, _dbz({"op": "c", "source": _SRC})),
        Rec("dbz_not_utf8", "debezium", dbz, b'\xff\xfe{"op":"c"}', exact=False),
        Rec("dbz_json_array", "debezium", dbz, b"[1, 2]"),
        Rec("dbz_empty_value", "debezium", dbz, b"", exact=False),
        Rec("dbz_payload_not_object", "debezium", dbz,
            _dbz("x", {"type": "struct"}, wrap=True), exact=False),
        Rec("dbz_truncate_wrapped", "debezium", dbz, _dbz(
            {"op": "t", "source": _SRC, "ts_ms": 1}, _ENVELOPE, wrap=True)),
        # canal
        Rec("canal_types", "canal", canal, canal_msg(), source="c2"),
        Rec("canal_lowercase_update", "canal", canal, canal_msg(
            type="update", old=[{"i": "41", "extra": "old only"}]), source="c2"),
        Rec("canal_old_count", "canal", canal, canal_msg(type="UPDATE"), source="c2"),
        Rec("canal_unknown_type", "canal", canal, canal_msg(type="FOO"), source="c2"),
        Rec("canal_ddl_without_sql", "canal", canal, canal_msg(
            type="ALTER", isDdl=True, data=None), source="c2"),
        Rec("canal_no_rows", "canal", canal, canal_msg(data=[]), source="c2"),
        Rec("canal_no_isddl", "canal", canal, canal_msg(isDdl=...), source="c2"),
        Rec("canal_long_int_run", "canal", canal, canal_msg(
            data=[{**canal_row, "t": "1_" * 20_000 + "1"}]), source="c2"),
        Rec("canal_long_decimal_run", "canal", canal, canal_msg(
            data=[{**canal_row, "d": "1_" * 20_000 + "1"}]), source="c2"),
        Rec("canal_bad_double", "canal", canal, canal_msg(
            data=[{**canal_row, "f": "abc"}]), source="c2"),
        # maxwell
        Rec("mx_literal_numbers", "maxwell", mx, maxwell_msg(
            '"type":"insert","position":"binlog.000002:77","data":' + mx_row), source="m2"),
        Rec("mx_update_decimal_old", "maxwell", mx, maxwell_msg(
            '"type":"update","xoffset":3,"data":' + mx_row + ',"old":{"amount":10.00,"q":1}'),
            source="m2"),
        Rec("mx_ts_in_ms", "maxwell", mx, maxwell_msg(
            '"type":"delete","data":{"id":1}').replace(b"1700000000,", b"1700000000123,"),
            source="m2"),
        Rec("mx_bad_position", "maxwell", mx, maxwell_msg(
            '"type":"insert","position":"nofile","data":{"id":1}'), source="m2"),
        Rec("mx_missing_data", "maxwell", mx, maxwell_msg('"type":"insert"'), source="m2"),
        Rec("mx_drop_without_sql", "maxwell", mx, maxwell_msg('"type":"table-drop"'),
            source="m2"),
        Rec("mx_no_table", "maxwell", mx, b'{"database":"d","type":"insert","data":{}}',
            source="m2"),
        Rec("mx_bootstrap_complete", "maxwell", mx, maxwell_msg('"type":"bootstrap-complete"'),
            source="m2"),
        # A JSON null names its column; an absent column is not named (NULL_AND_ABSENT).
        Rec("dbz_null_and_absent", "debezium", dbz, _dbz(
            {"op": "c", "source": _SRC, "after": {"id": 7, "note": None}})),
        Rec("dbz_null_and_absent_schemas", "debezium", dbz, _dbz(
            {"op": "c", "source": _SRC, "after": {"id": 8, "whole": None}}, _ENVELOPE,
            wrap=True)),
        Rec("canal_null_and_absent", "canal", canal, canal_msg(
            data=[{"i": "9", "n": None}]), source="c2"),
        Rec("mx_null_and_absent", "maxwell", mx, maxwell_msg(
            '"type":"insert","data":{"id":10,"n":null}'), source="m2"),
    ]  # fmt: skip


# The row images these records must decode to: null kept, absent columns left out.
NULL_AND_ABSENT = {
    "dbz_null_and_absent": {"id": 7, "note": None},
    "dbz_null_and_absent_schemas": {"id": 8, "whole": None},
    "canal_null_and_absent": {"i": 9, "n": None},
    "mx_null_and_absent": {"id": 10, "n": None},
}


EXTRA = _extra_records()


# --- Kafka and Spark plumbing --------------------------------------------------------------


@dataclass
class Produced:
    """Everything produced once for the module: uuid topic per (format, logical topic)."""

    bootstrap: str
    topics: dict[tuple[str, str], str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # uuid topic -> configured source
    exact: dict[tuple[str, int], bool] = field(default_factory=dict)  # (topic, offset)
    names: dict[tuple[str, int], str] = field(default_factory=dict)

    def topics_of(self, fmt: str) -> list[str]:
        return sorted(t for (f, _), t in self.topics.items() if f == fmt)


@pytest.fixture(scope="module")
def produced(kafka: KafkaBroker) -> Produced:
    out = Produced(kafka.bootstrap)
    records = _fixture_records() + EXTRA
    for rec in records:
        if (rec.fmt, rec.topic) not in out.topics:
            out.topics[(rec.fmt, rec.topic)] = f"it-dec-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    futures = admin.create_topics([NewTopic(t, 1, 1) for t in out.topics.values()])
    for f in futures.values():
        f.result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": "lz4"})
    next_offset: dict[str, int] = defaultdict(int)
    for rec in records:  # one partition per topic: offsets are 0, 1, 2... in send order
        name = out.topics[(rec.fmt, rec.topic)]
        producer.produce(name, rec.value, rec.key, headers=list(rec.headers) or None)
        if rec.source:
            out.sources[name] = rec.source
        out.exact[(name, next_offset[name])] = rec.exact
        out.names[(name, next_offset[name])] = rec.name
        next_offset[name] += 1
    assert producer.flush(30) == 0
    return out


def _read(spark: SparkSession, produced: Produced, fmt: str) -> DataFrame:
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", produced.bootstrap)
        .option("subscribe", ",".join(produced.topics_of(fmt)))
        .option("startingOffsets", "earliest")
        .options(**kafka_source_options())
        .load()
    )


Coord = tuple[str, int, int]


def _oracle(
    raw: list[Any], fmt: str, sources: dict[str, str]
) -> tuple[dict[Coord, list[dict[str, Any]]], dict[Coord, DeadLetter]]:
    """decode_record on each record Spark read: events and dead letters by coordinates."""
    events: dict[Coord, list[dict[str, Any]]] = {}
    dead: dict[Coord, DeadLetter] = {}
    for r in raw:
        coord = (r["topic"], r["partition"], r["offset"])
        got = decode_record(
            fmt,  # type: ignore[arg-type]
            r["topic"],
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]),
            None if r["value"] is None else bytes(r["value"]),
            source=sources.get(r["topic"]),
        )
        if isinstance(got, DeadLetter):
            dead[coord] = got
        elif got:
            events[coord] = [e.model_dump() for e in got]
    return events, dead


def _events(rows: list[Any]) -> dict[Coord, list[dict[str, Any]]]:
    out: dict[Coord, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        e = r.asDict()
        for image in ("before", "after"):
            e[image] = None if e[image] is None else json.loads(e[image])
        out[(e["topic"], e["partition"], e["offset"])].append(e)
    return dict(out)


def _diff(got: list[dict[str, Any]] | None, want: list[dict[str, Any]] | None) -> Any:
    """The fields that differ, event by event (for a readable failure)."""
    if got is None or want is None or len(got) != len(want):
        return {"got": got, "want": want}
    return [
        {k: (g.get(k), w[k]) for k in w if g.get(k) != w[k]}
        for g, w in zip(got, want, strict=False)
    ]


def _path(reason: str) -> str:
    return reason.rsplit(" at ", 1)[-1]


def _assert_same(
    produced: Produced,
    got_events: dict[Coord, list[dict[str, Any]]],
    got_dead: list[Any],
    want_events: dict[Coord, list[dict[str, Any]]],
    want_dead: dict[Coord, DeadLetter],
) -> None:
    name = {(t, 0, o): n for (t, o), n in produced.names.items()}
    for coord in sorted(set(got_events) | set(want_events)):
        got, want = got_events.get(coord), want_events.get(coord)
        assert got == want, (name[coord], _diff(got, want))
    dead = {(d["topic"], d["partition"], d["offset"]): d for d in got_dead}
    assert sorted(dead) == sorted(want_dead), [name[c] for c in set(dead) ^ set(want_dead)]
    for coord, want in want_dead.items():
        d = dead[coord]
        assert (d["format"], d["key"], d["value"]) == (want.format, want.key, want.value)
        assert _path(d["reason"]) == _path(want.reason), (name[coord], d["reason"], want.reason)
        if produced.exact[(coord[0], coord[2])]:
            assert d["reason"] == want.reason, name[coord]


def _decode_and_check(spark: SparkSession, produced: Produced, fmt: str) -> int:
    raw_df = _read(spark, produced, fmt).persist()
    try:
        raw = raw_df.select("key", "value", "topic", "partition", "offset").collect()
        events, dead = decode(raw_df, fmt, source_for_topic=produced.sources)  # type: ignore[arg-type]
        assert events.schema == EVENT_SCHEMA
        assert dead.schema == DEAD_LETTER_SCHEMA
        want_events, want_dead = _oracle(raw, fmt, produced.sources)
        _assert_same(produced, _events(events.collect()), dead.collect(), want_events, want_dead)
        return len(raw)
    finally:
        raw_df.unpersist()


# --- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_record_decodes_as_the_reference_decoder_does(
    spark: SparkSession, produced: Produced, fmt: str
) -> None:
    n = _decode_and_check(spark, produced, fmt)
    fixtures = sum(1 for c in CASES if c["format"] == fmt)
    extras = sum(1 for r in EXTRA if r.fmt == fmt)
    assert n == fixtures + extras  # every record made it through Kafka


def test_dead_letters_land_in_delta_while_good_records_decode(
    spark: SparkSession, produced: Produced, tmp_path: Path
) -> None:
    path = str(tmp_path / "dead_letter")
    assert count(spark, path) == 0  # no table yet
    raw_df = _read(spark, produced, "debezium").persist()
    try:
        raw = raw_df.collect()
        events, dead = decode(raw_df, "debezium", source_for_topic=produced.sources)
        write_dead_letters(dead, path)
        n_events = events.count()
    finally:
        raw_df.unpersist()
    want_events, want_dead = _oracle(raw, "debezium", produced.sources)
    assert n_events == sum(len(v) for v in want_events.values()) > 0
    stored = spark.read.format("delta").load(path)
    assert stored.schema == DEAD_LETTER_SCHEMA
    rows = {(r["topic"], r["partition"], r["offset"]): r for r in stored.collect()}
    assert sorted(rows) == sorted(want_dead)
    for coord, want in want_dead.items():
        r = rows[coord]
        assert (r["key"], r["value"], r["format"]) == (want.key, want.value, "debezium")
        assert _path(r["reason"]) == _path(want.reason)
    assert count(spark, path) == len(want_dead)
    one_topic = next(iter(want_dead))[0]
    assert count(spark, path, topic=one_topic) == sum(1 for c in want_dead if c[0] == one_topic)


def test_stream_available_now_decodes_every_batch(
    spark: SparkSession, produced: Produced, tmp_path: Path
) -> None:
    fmt = "canal"
    path = str(tmp_path / "dead_letter")
    got: list[Any] = []
    batches: list[int] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            events, dead = decode(batch, fmt, source_for_topic=produced.sources)
            write_dead_letters(dead, path, txn_app_id="test-stream", txn_version=batch_id)
            got.extend(events.collect())
            batches.append(batch_id)
        finally:
            batch.unpersist()

    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", produced.bootstrap)
        .option("subscribe", ",".join(produced.topics_of(fmt)))
        .option("startingOffsets", "earliest")
        .options(**kafka_source_options())
        .option("maxOffsetsPerTrigger", 4)
        .load()
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(sink)
        .start()
    )
    assert query.awaitTermination(180), "AvailableNow query did not finish in 180 s"
    assert query.exception() is None
    assert len(batches) >= 3  # maxOffsetsPerTrigger split the records
    raw = _read(spark, produced, fmt).collect()
    want_events, want_dead = _oracle(raw, fmt, produced.sources)
    assert _events(got) == want_events
    assert count(spark, path) == len(want_dead) > 0


def test_canal_topic_without_source_is_a_dead_letter(
    spark: SparkSession, produced: Produced
) -> None:
    raw_df = _read(spark, produced, "canal")
    some_topic = produced.topics_of("canal")[0]
    events, dead = decode(raw_df, "canal", source_for_topic={"not-this-topic": "x"})
    assert events.count() == 0
    reasons = {r["reason"] for r in dead.where(dead.topic == some_topic).collect()}
    assert reasons == {f"no source configured for topic '{some_topic}' at topic"}
    with pytest.raises(ValueError, match="source_for_topic"):
        decode(raw_df, "maxwell")
    with pytest.raises(ValueError, match="unknown CDC format"):
        decode(raw_df, "avro")  # type: ignore[arg-type]


def test_a_json_null_names_its_column_and_an_absent_column_is_not_named(
    spark: SparkSession, produced: Produced
) -> None:
    """The keys of a decoded row image are the columns the event names, in every format:
    only a column left out may later take a default, never one sent as NULL."""
    got = {}
    for fmt in FORMATS:
        events, _ = decode(_read(spark, produced, fmt), fmt, source_for_topic=produced.sources)  # type: ignore[arg-type]
        for e in events.collect():
            name = produced.names.get((e["topic"], e["offset"]))
            if name in NULL_AND_ABSENT:
                got[name] = json.loads(e["after"])
    assert got == NULL_AND_ABSENT


def test_the_job_stream_parses_each_format_of_its_sources(
    spark: SparkSession, produced: Produced, tmp_path: Path
) -> None:
    """``streaming.job.read_parsed`` over sources of all three formats in one query: each
    record parsed in its own source's format (``__fmt``), the events those of the
    reference decoder."""
    from streaming.config import KafkaSettings, Settings, SourceSettings
    from streaming.job import read_parsed

    sources = []
    for fmt in FORMATS:
        by_source: dict[str | None, list[str]] = defaultdict(list)
        for t in produced.topics_of(fmt):
            by_source[produced.sources.get(t)].append(t)
        for source, topics in sorted(by_source.items(), key=lambda kv: str(kv[0])):
            sources.append(SourceSettings(format=fmt, topics=topics, source=source))
    settings = Settings(
        kafka=KafkaSettings(bootstrap=produced.bootstrap, starting_offsets="earliest"),
        sources=sources,
        routes=[{"target": "db.t"}],
        sink={"path": str(tmp_path / "lake")},
        checkpoint=str(tmp_path / "checkpoint"),
    )
    got: dict[str, list[Any]] = defaultdict(list)

    def sink(batch: DataFrame, _: int) -> None:
        for fmt in FORMATS:
            events, _dead = split(batch.filter(F.col("__fmt") == fmt), fmt)
            got[fmt].extend(events.collect())

    query = (
        read_parsed(spark, settings)
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .foreachBatch(sink)
        .start()
    )
    assert query.awaitTermination(180), "AvailableNow query did not finish in 180 s"
    assert query.exception() is None
    for fmt in FORMATS:
        want_events, _ = _oracle(_read(spark, produced, fmt).collect(), fmt, produced.sources)
        assert _events(got[fmt]) == want_events, fmt
        assert want_events, fmt
