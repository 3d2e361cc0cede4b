"""The coordinator's saved state: exact round trips, each distinct schema stored once, the
previous version still read, a newer one refused, nothing saved by guesswork."""

from __future__ import annotations

import gc
import json
import weakref
from datetime import datetime
from pathlib import Path
from typing import get_args

import pytest

from coordinator import (
    Coordinator,
    Extract,
    Route,
    Router,
    ShardId,
    TargetConfig,
    TargetId,
    parse_command,
    restore,
    snapshot,
)
from coordinator.scenario.memory import MemoryEngine
from coordinator.scenario.model import load_scenario
from coordinator.state import VERSION, StateError
from coordinator.target import ShardState
from schemas import parse_create_table
from schemas.changes import AlterSpec, AlterTable
from schemas.codec import specs_from_json, specs_to_json
from schemas.ddl import parse_ddl

T = TargetId("shop", "orders")
P = TargetId("shop", "items")
U = TargetId("shop", "users")
BASE = (
    "CREATE TABLE {t} (id BIGINT PRIMARY KEY, a INT, note VARCHAR(16) NOT NULL DEFAULT 'x', "
    "kind ENUM('a','b') CHARACTER SET utf8mb4, KEY ix_a (a)) DEFAULT CHARSET=utf8mb4"
)
ITEMS = "CREATE TABLE {t} (id INT PRIMARY KEY, qty INT UNSIGNED NOT NULL, price DECIMAL(10,2))"
USERS = "CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR(20), born DATE)"
EXTRACT = Extract(source_column="src", table_column="tbl")


def pos(offset: int) -> list[object]:
    """A position as the streaming job writes it: binlog file, position, row, time, offset."""
    return ["mysql-bin.000003", 1000 + offset, 0, 1_700_000_000_000 + offset, offset]


def origin(offset: int) -> list[object]:
    return ["mysql-bin.000003", 1000 + offset, 0, 1_700_000_000_000 + offset]


def shard(i: int, table: str = "orders") -> ShardId:
    return ShardId(f"src{i % 2}", f"db_{i}", f"{table}_{i}")


def streaming_like() -> Coordinator:
    """A state as the streaming job leaves it: list positions, DDL origins per channel,
    fingerprints, rows awaiting their DDL, an optimistic lock in conflict, a pessimistic
    lock half way, a table registered late, renamed columns, an online-DDL shadow table,
    a target whose downstream refused a change, with the decisions waiting on it."""
    router = Router(
        (
            Route(T, table="orders_*", extract=EXTRACT),
            Route(P, table="items_*", extract=Extract(db_column="db")),
            Route(U, table="users_*", extract=Extract(table_column="tbl")),
        )
    )
    c = Coordinator(
        router,
        {T: TargetConfig("optimistic"), P: TargetConfig("pessimistic"), U: TargetConfig()},
    )
    for i in range(6):
        c.register(shard(i), parse_create_table(BASE.format(t=f"orders_{i}")), pos(0))
        c.register(shard(i, "items"), parse_create_table(ITEMS.format(t=f"items_{i}")), pos(0))
    for i in range(2):
        c.register(shard(i, "users"), parse_create_table(USERS.format(t=f"users_{i}")), pos(0))
    c.schema_fingerprints(shard(0), [(pos(1), "fp-0")])
    c.schema_fingerprints(shard(1), [(pos(1), "fp-1")])
    c.schema_fingerprints(shard(1), [(pos(5), "fp-1b")])  # awaits a DDL from pos(5)
    step = 10
    for i in range(4):
        step += 1
        c.on_ddl(shard(i), f"ALTER TABLE orders_{i} ADD COLUMN c INT", pos(step), origin(step),
                 f"src{i % 2}[0]")  # fmt: skip
    for i in range(3):
        step += 1
        c.on_ddl(shard(i), f"ALTER TABLE orders_{i} CHANGE a z INT", pos(step), origin(step),
                 f"src{i % 2}[0]")  # fmt: skip
    step += 1
    c.on_ddl(shard(4), "ALTER TABLE orders_4 MODIFY a BIGINT", pos(step), origin(step))
    step += 1
    c.on_ddl(shard(5), "ALTER TABLE orders_5 ADD COLUMN", pos(step))  # unparseable
    for i in range(3):
        step += 1
        c.on_ddl(shard(i, "items"), f"ALTER TABLE items_{i} ADD COLUMN w INT", pos(step))
    step += 1
    c.on_ddl(shard(3, "items"), "ALTER TABLE items_3 ADD COLUMN v INT", pos(step))
    step += 1
    c.on_ddl(shard(9), BASE.format(t="orders_9").replace("a INT", "a TEXT"), pos(step))
    c.await_ddl(shard(7), pos(step + 1), "rows before the CREATE TABLE")
    c.schema_fingerprints(shard(4, "items"), [(pos(step), "fp-4")])
    c.schema_fingerprints(shard(5, "items"), [(pos(step), "fp-5")])
    c.schema_fingerprints(shard(5, "items"), [(pos(step + 2), "fp-5b")])
    gho = ShardId("src0", "db_4", "_orders_4_gho")
    c.on_ddl(gho, BASE.format(t="_orders_4_gho"), pos(step + 3))
    c.on_ddl(gho, "ALTER TABLE _orders_4_gho ADD COLUMN g INT", pos(step + 4))
    # the downstream refuses an ALTER of users; what follows waits with it
    applied = c.on_ddl(shard(0, "users"), "ALTER TABLE users_0 ADD COLUMN e INT", pos(step + 5))
    c.refuse(U, applied, "the sink cannot add column e: fix the table, then unlock --retry")
    c.on_ddl(shard(1, "users"), "TRUNCATE TABLE users_1", pos(step + 6))
    c.on_ddl(shard(1, "users"), "ALTER TABLE users_1 ADD COLUMN e INT", pos(step + 7))
    c.on_ddl(shard(0, "users"), "ALTER TABLE users_0 CHANGE name nick VARCHAR(20)", pos(step + 8))
    c.on_ddl(shard(1, "users"), "ALTER TABLE users_1 CHANGE name nick VARCHAR(20)", pos(step + 9))
    return c


def later_events(c: Coordinator) -> list[object]:
    """What comes next for ``streaming_like``: every decision, in order."""
    out: list[object] = []
    step = 100
    for i in range(3, 6):
        step += 1
        out += c.on_ddl(shard(i), f"ALTER TABLE orders_{i} CHANGE a z INT", pos(step))
    out += c.command(parse_command(f"unlock {T} --shard {shard(5)} --action skip"))
    for i in range(3, 6):
        step += 1
        out += c.on_ddl(shard(i, "items"), f"ALTER TABLE items_{i} ADD COLUMN w INT", pos(step))
    out += c.command(parse_command(f"unlock {U} --retry"))
    out += c.schema_fingerprints(shard(4, "items"), [(pos(step + 1), "fp-4b")])
    return out


def through_json(c: Coordinator) -> Coordinator:
    return restore(json.loads(json.dumps(snapshot(c))), c.router, c.configs)


def test_a_restored_state_is_the_same_state_and_decides_the_same() -> None:
    c = streaming_like()
    saved = snapshot(c)
    assert json.loads(json.dumps(saved)) == saved  # JSON values only: nothing changes on disk
    again = through_json(c)
    assert snapshot(again) == saved
    assert [v.__dict__ for v in again.locks()] == [v.__dict__ for v in c.locks()]
    assert later_events(again) == later_events(c)
    assert snapshot(again) == snapshot(c)


def test_restored_shards_have_every_field_of_a_shard() -> None:
    """Restore builds shard states from their fields directly (no constructor): one with a
    field missing, or an unknown one, is refused rather than made."""
    c = through_json(streaming_like())
    made = ShardState(shard(0), 1, parse_create_table(BASE.format(t="orders_0")))
    for st in c.targets[T].shards.values():
        assert {k for k in vars(st) if not k.startswith("_index")} == set(vars(made))
    fields = dict(vars(made))
    assert ShardState.of(dict(fields)) == made
    del fields["fingerprint"]
    with pytest.raises(TypeError, match=r"missing \['fingerprint'\], unknown \[\]"):
        ShardState.of(dict(fields))
    with pytest.raises(TypeError, match=r"missing \[\], unknown \['colour'\]"):
        ShardState.of({**vars(made), "colour": "red"})


@pytest.mark.parametrize("enabled", [True, False])
def test_saving_and_restoring_leave_the_garbage_collector_as_they_found_it(enabled: bool) -> None:
    c = streaming_like()
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        through_json(c)
        assert gc.isenabled() is enabled
        with pytest.raises(StateError):
            restore({**snapshot(c), "targets": [{}]}, c.router, c.configs)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("restored", [False, True])
def test_a_dropped_coordinator_is_freed_at_once(restored: bool) -> None:
    """The job drops its coordinator every batch for the one restored from the state: no
    reference cycle keeps it for the garbage collector's next full pass."""
    c = through_json(streaming_like()) if restored else streaming_like()
    parts: list[object] = [c, *c.targets.values()]
    for t in c.targets.values():
        parts += [t.shards, t.index, *t.shards.values()]
    dropped = [weakref.ref(part) for part in parts]
    was = gc.isenabled()
    gc.disable()
    try:
        del c, t, parts
        assert [ref() for ref in dropped if ref() is not None] == []
    finally:
        (gc.enable if was else gc.disable)()


def test_each_distinct_schema_and_alter_is_saved_once() -> None:
    c = Coordinator(Router((Route(T, table="orders_*"),)), {T: TargetConfig()})
    for i in range(64):
        c.register(shard(i), parse_create_table(BASE.format(t=f"orders_{i}")), pos(0))
    for i in range(32):
        c.on_ddl(shard(i), f"ALTER TABLE orders_{i} CHANGE a z INT", pos(i + 1))
    data = snapshot(c)
    # the shards' schema (and the applied one), and the schema after the rename
    assert len(data["schemas"]) == 2
    assert len(data["alters"]) == 1  # 32 held shards' pending renames share their specs
    shards = data["targets"][0]["shards"]
    assert {json.dumps(s["schema"]) for s in shards} == {"0"}  # named after their table
    assert data["targets"][0]["applied"] == 0
    held = [s for s in shards if "pending" in s]
    assert len(held) == 32 and {s["pending"][0]["alter"] for s in held} == {0}


def test_restored_shards_of_one_shape_share_its_decoded_schema() -> None:
    c = through_json(streaming_like())
    first, second = (c.shard_state(shard(i)) for i in (0, 2))
    assert first is not None and second is not None
    assert first.schema == second.schema and first.schema.name == "orders_0"
    assert first.schema.columns is second.schema.columns  # decoded once, renamed
    pending = [c.shard_state(shard(i)).pending[0].change for i in range(3)]  # type: ignore[union-attr]
    assert pending[0] is not None and pending[0].specs is pending[1].specs is pending[2].specs  # type: ignore[union-attr]


def test_a_schema_named_otherwise_keeps_its_name() -> None:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig()})
    c.register(shard(0), parse_create_table(BASE.format(t="orders_0")))
    st = c.shard_state(shard(0))
    assert st is not None
    st.schema = st.schema.renamed("old_name")
    data = snapshot(c)
    assert data["targets"][0]["shards"][0]["schema"] == [0, "old_name"]
    again = through_json(c).shard_state(shard(0))
    assert again is not None and again.schema.name == "old_name"


# --- the previous version ----------------------------------------------------------------

V1 = Path(__file__).parents[1] / "fixtures" / "state" / "v1.json"
SCENARIOS = Path(__file__).parents[1] / "scenarios"


def live(case: str) -> Coordinator:
    """The coordinator a version 1 fixture case was saved from, built again."""
    if case == "streaming_like":
        return streaming_like()
    path, _, steps = case.partition("@")
    engine = MemoryEngine(load_scenario(SCENARIOS / path))
    engine.start()
    for index, step in enumerate(engine.scenario.steps[: int(steps)]):
        engine.step(index, step)
    return engine.coordinator


@pytest.mark.parametrize("case", sorted(json.loads(V1.read_text())))
def test_a_version_1_state_restores_to_the_state_it_was_saved_from(case: str) -> None:
    saved = json.loads(V1.read_text())[case]
    assert saved["version"] == 1
    expected = live(case)
    c = restore(saved, expected.router, expected.configs)
    assert snapshot(c) == snapshot(expected)
    assert snapshot(through_json(c)) == snapshot(expected)


def test_the_version_1_fixture_covers_what_a_state_holds() -> None:
    states = json.loads(V1.read_text()).values()
    shards = [s for st in states for t in st["targets"] for s in t["shards"]]
    targets = [t for st in states for t in st["targets"]]
    assert any(d.get("index") == 0 for s in shards for d in s["pending"])  # an ALTER
    assert any("create" in d for s in shards for d in s["pending"])
    assert any(d["error"] for s in shards for d in s["pending"])
    assert any(s["post"] for s in shards) and any(not s["admitted"] for s in shards)
    for field in ("awaiting", "fingerprint", "renamed", "last_alter", "project", "conflict"):
        assert any(s.get(field) for s in shards), field
    for field in ("expected", "ready", "owed", "refused"):
        assert any(t[field] for t in targets), field
    deferred = {d["kind"] for t in targets if t["refused"] for d in t["refused"]["deferred"]}
    assert deferred == {"alter", "hold", "release", "truncate"}
    for field in ("ghosts", "unregistered", "ddl_origins"):
        assert any(st[field] for st in states), field


# --- refusals ----------------------------------------------------------------------------


def test_a_state_of_a_newer_version_is_refused_saying_what_to_do() -> None:
    c = streaming_like()
    data = {**snapshot(c), "version": VERSION + 1}
    with pytest.raises(StateError) as e:
        restore(data, c.router, c.configs)
    message = str(e.value)
    assert f"version {VERSION + 1}" in message and "reads versions 1, 2" in message
    assert "newer shardmerge" in message and "new checkpoint" in message


@pytest.mark.parametrize("version", [0, None, "2"])
def test_a_state_of_an_unknown_version_is_refused(version: object) -> None:
    c = streaming_like()
    with pytest.raises(StateError, match=r"reads versions 1, 2\. Restore the state"):
        restore({**snapshot(c), "version": version}, c.router, c.configs)


def test_a_damaged_state_is_refused() -> None:
    c = streaming_like()
    data = snapshot(c)
    del data["targets"][0]["shards"][0]["schema"]
    with pytest.raises(StateError, match=r"damaged .*KeyError"):
        restore(data, c.router, c.configs)
    data = snapshot(c)
    data["targets"][0]["shards"][0]["schema"] = 99
    with pytest.raises(StateError, match=r"damaged .*IndexError"):
        restore(data, c.router, c.configs)


@pytest.mark.parametrize(
    "position",
    [("mysql-bin.000001", 4), datetime(2026, 1, 1), float("nan"), {"offset": 4}, b"4"],
    ids=["tuple", "datetime", "nan", "dict", "bytes"],
)
def test_a_position_that_is_not_json_is_refused_not_stringified(position: object) -> None:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig()})
    for i in range(2):
        c.register(shard(i), parse_create_table(BASE.format(t=f"orders_{i}")))
    c.on_ddl(shard(0), "ALTER TABLE orders_0 CHANGE a z INT", position)
    with pytest.raises(
        StateError, match=rf"{shard(0)}.*cannot be saved.*not {type(position).__name__}"
    ):
        snapshot(c)


def test_an_origin_that_is_not_json_is_refused() -> None:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig()})
    c.register(shard(0), parse_create_table(BASE.format(t="orders_0")))
    c.on_ddl(
        shard(0), "ALTER TABLE orders_0 ADD COLUMN c INT", 1, ["f", 1, 0, datetime(2026, 1, 1)]
    )
    with pytest.raises(StateError, match=r"DDL origin.*not datetime"):
        snapshot(c)


# --- ALTER specifications ----------------------------------------------------------------

ALTERS = [
    "ALTER TABLE t ADD COLUMN c INT NOT NULL DEFAULT 1 FIRST, "
    "ADD COLUMN d VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_bin AFTER a",
    "ALTER TABLE t ADD COLUMN IF NOT EXISTS e ENUM('x','y') NULL, DROP COLUMN IF EXISTS f",
    "ALTER TABLE t ADD COLUMN g INT GENERATED ALWAYS AS (a + 1) STORED",
    "ALTER TABLE t MODIFY a DECIMAL(12,2) UNSIGNED ZEROFILL AFTER id",
    "ALTER TABLE t CHANGE a z BIGINT AUTO_INCREMENT, ADD UNIQUE KEY uz (z)",
    "ALTER TABLE t RENAME COLUMN a TO y",
    "ALTER TABLE t ALTER COLUMN a SET DEFAULT 5, ALTER COLUMN b DROP DEFAULT",
    "ALTER TABLE t ADD INDEX ix (a, b), ADD FULLTEXT INDEX ft (b), DROP INDEX iz",
    "ALTER TABLE t DROP CONSTRAINT uq",
    "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES p (id)",
    "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)",
    "ALTER TABLE t RENAME INDEX ix TO iy",
    "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    "ALTER TABLE t DEFAULT CHARSET = latin1",
]


def test_every_kind_of_alter_specification_round_trips() -> None:
    kinds = set()
    for sql in ALTERS:
        (change,) = parse_ddl(sql)
        assert isinstance(change, AlterTable)
        text = json.dumps(specs_to_json(change.specs))
        assert specs_from_json(json.loads(text)) == change.specs, sql
        kinds |= {type(s).__name__ for s in change.specs}
    assert kinds == {cls.__name__ for cls in get_args(AlterSpec)}  # a new kind needs a row


def test_pending_statements_keep_what_they_say_exactly() -> None:
    c = Coordinator(Router((Route(T, table="orders_*"),)), {T: TargetConfig()})
    for i in range(2):
        c.register(shard(i), parse_create_table(BASE.format(t=f"orders_{i}")))
    held = [
        "ALTER TABLE orders_0 CHANGE a z INT",  # holds the shard; the rest queue behind it
        "ALTER TABLE db_0.orders_0 ADD CONSTRAINT fk FOREIGN KEY (id) REFERENCES p (id)",
        "TRUNCATE TABLE orders_0",
        "ALTER TABLE orders_0 ADD COLUMN",
    ]
    for n, sql in enumerate(held):
        c.on_ddl(shard(0), sql, n + 1)
    before = c.shard_state(shard(0))
    after = through_json(c).shard_state(shard(0))
    assert before is not None and after is not None
    assert [d.sql for d in after.pending] == held
    assert after.pending == before.pending
    fk = after.pending[1].change
    assert isinstance(fk, AlterTable) and fk.table.db == "db_0" and fk.ignored
    assert fk.ignored == before.pending[1].change.ignored  # type: ignore[union-attr]


def test_a_temporal_default_saved_as_written_restores_as_the_server_stores_it() -> None:
    # States saved before 2026-11-28 kept ``DEFAULT 0`` of a TIMESTAMP as '0'.
    from schemas.codec import schema_from_json, schema_to_json
    from schemas.ddl import parse_create_table

    schema = parse_create_table(
        "CREATE TABLE t (a TIMESTAMP NOT NULL DEFAULT 0, b DATETIME(3) DEFAULT '2020-01-01',"
        " c DATETIME DEFAULT CURRENT_TIMESTAMP, d INT DEFAULT 0)"
    )
    saved = schema_to_json(schema)
    assert schema_from_json(saved) == schema
    saved["columns"][0]["default"] = "'0'"
    saved["columns"][1]["default"] = "'2020-01-01'"
    assert schema_from_json(saved) == schema
