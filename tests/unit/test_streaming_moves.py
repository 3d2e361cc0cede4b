"""The streaming job's move rules (streaming.batch.moves) without Spark: which rows of a moving
shard the row plan writes, drops, keeps or lets wait for the marker watermark, which
statements wait, and what a marker row that does not fit becomes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coordinator.coordinator import Coordinator, RowRoute
from coordinator.decisions import Decision, Release, Rename
from coordinator.ids import Position, ShardId, TargetId
from coordinator.moves import Move
from coordinator.routing import Extract, Route, Router
from coordinator.rowplan import RowPlan
from schemas.ddl import parse_create_table
from streaming.batch.moves import MOVE_KEEP, MOVE_QUEUE, MOVE_WAIT, MoveKeeper
from streaming.batch.plan import NO_MOVED, Planner, Segment
from streaming.source.control import position_of

TARGET = TargetId("shop", "orders")
FROM = ShardId("s3", "db_3", "orders_7")
TO = ShardId("s9", "db_9", "orders_23")
OTHER = ShardId("s1", "db_1", "orders_1")
ROUTER = Router((Route(TARGET, table="orders_*", extract=Extract(source_column="_src")),))
WRITE = RowPlan(RowRoute("write", TARGET, 1))
CREATE = "CREATE TABLE orders_23 (id INT PRIMARY KEY, amount INT)"


def pos(source_pos: int) -> Position:
    return ["bin.1", source_pos, 0, 1_700_000_000_000 + source_pos, source_pos]


def event(shard: ShardId, at: int, op: str = "ddl", ddl: str | None = None, after: Any = None):
    return {
        "source": shard.source, "db": shard.db, "tbl": shard.table, "op": op, "ddl": ddl,
        "after": None if after is None else json.dumps(after), "before": None,
        "pos_file": "bin.1", "pos": at, "pos_row": 0, "ts_ms": 1_700_000_000_000 + at,
        "offset": at, "topic": f"{shard.source}.{shard.db}.{shard.table}", "partition": 0,
    }  # fmt: skip


def marker(source: str, db: str, at: int, phase: str, move: str = "m1") -> dict[str, Any]:
    return event(ShardId(source, db, "shardmerge_move"), at, "c", after={
        "move_id": move, "phase": phase})  # fmt: skip


class Host:
    """What a batch gives the keeper, recorded."""

    def __init__(self) -> None:
        self.c = Coordinator(ROUTER)
        for shard in (FROM, OTHER):
            table = f"CREATE TABLE {shard.table} (id INT PRIMARY KEY, amount INT)"
            self.c.register(shard, parse_create_table(table))
        self.batch = 5
        self.ran: list[Decision] = []
        self.discarded: list[tuple[ShardId, int]] = []
        self.released: list[Release] = []
        self.replayed: list[dict[str, Any]] = []
        self.dead: list[str] = []

    def run_decisions(self, decisions: list[Decision]) -> None:
        self.ran += decisions

    def discard_stashed(self, target: TargetId, shard: ShardId, version: int) -> None:
        self.discarded.append((shard, version))

    def release(self, d: Release) -> None:
        self.released.append(d)

    def replay_control(self, r: dict[str, Any], planner: Planner) -> None:
        self.replayed.append(r)

    def dead_control(self, r: dict[str, Any], why: str) -> None:
        self.dead.append(why)


def keeper(keys: str | None = None) -> MoveKeeper:
    return MoveKeeper([Move("m1", (FROM,), TO, keys)], ROUTER, None)


def fates(k: MoveKeeper, shard: ShardId, host: Host) -> list[tuple[Any, ...]]:
    """The segments the keeper makes of one segment of ``shard`` covering every row:
    (after, upto, action, version, moved) each."""
    planner = Planner(host.c)
    planner.segments = [Segment(shard, None, None, WRITE)]
    k.plan(planner, host.c, [])
    return [
        (s.after and s.after[1], s.upto and s.upto[1], s.plan.route.action,
         s.plan.route.version, s.moved)
        for s in planner.segments
    ]  # fmt: skip


def test_before_any_event_of_to_the_old_side_writes_as_any_shard() -> None:
    host, k = Host(), keeper()
    assert fates(k, FROM, host) == [(None, None, "write", 1, None)]
    assert not k.rereads()


def test_while_copying_rows_beyond_the_watermark_wait_then_the_freeze_decides() -> None:
    host, k = Host(), keeper()
    assert k.take(event(TO, 10, ddl=CREATE), pos(10), host)
    assert k.moves.state("m1") == "copying" and k.rereads()
    k.marker(marker("s3", "db_3", 20, "heartbeat"), pos(20), host)
    # up to s3's watermark (20) the old side's rows write; beyond it they wait
    assert fates(k, FROM, host) == [
        (None, 20, "write", 1, None),
        (20, None, "hold", MOVE_WAIT, None),
    ]
    # the copy: up to s9's watermark (none yet) nothing is known: every row waits
    assert fates(k, TO, host) == [(None, None, "hold", MOVE_WAIT, None)]
    k.marker(marker("s3", "db_3", 30, "frozen"), pos(30), host)
    k.marker(marker("s9", "db_9", 40, "heartbeat"), pos(40), host)
    assert fates(k, FROM, host) == [
        (None, 30, "write", 1, None),
        (30, None, "hold", MOVE_KEEP, None),
    ]
    assert fates(k, TO, host) == [(None, 40, "drop", 0, None), (40, None, "hold", MOVE_WAIT, None)]
    k.marker(marker("s9", "db_9", 50, "switched"), pos(50), host)
    assert k.moves.state("m1") == "switching" and not k.rereads()
    assert fates(k, TO, host) == [(None, 50, "drop", 0, None), (50, None, "hold", MOVE_QUEUE, None)]


def test_the_switch_discards_the_kept_rows_rehomes_and_releases_the_queue() -> None:
    host, k = Host(), keeper()
    k.marker(marker("s9", "db_9", 5, "heartbeat"), pos(5), host)
    assert k.take(event(TO, 4, ddl=CREATE), pos(4), host)  # before the watermark: recorded now
    assert k.copies["m1"].shard_state(TO) is not None and not k.pending
    k.marker(marker("s3", "db_3", 30, "frozen"), pos(30), host)
    k.marker(marker("s9", "db_9", 50, "switched"), pos(50), host)
    truncate = event(FROM, 35, op="t")
    assert k.take(truncate, pos(35), host)  # after the freeze: deferred to the switch
    planner = Planner(host.c)
    k.settle(host, planner)
    assert k.moves.state("m1") == "switched" and k.unmet == {}
    assert host.discarded == [(FROM, MOVE_KEEP)]
    (rename,) = [d for d in host.ran if type(d).__name__ == "Rename"]
    assert (rename.old, rename.new, rename.match, rename.values, rename.position) == (
        FROM,
        TO,
        (("_src", "s3"),),
        (("_src", "s9"),),
        pos(30),
    )
    assert host.released == [Release(TARGET, TO, MOVE_QUEUE)]
    assert host.replayed == [truncate]
    assert host.c.shard_state(TO) is not None and host.c.shard_state(FROM) is None
    # A later batch reads rows of the old side from before its freeze (its topic lagged):
    # written as the new side's rows (its plan, and a rename of the batch's rows).
    renames: list[Rename] = []
    planner = Planner(host.c)
    planner.segments = [Segment(FROM, None, None, RowPlan(RowRoute("unknown")))]
    k.plan(planner, host.c, renames)
    assert [(s.upto and s.upto[1], s.after and s.after[1], s.plan.route.action,
             s.plan.route.target) for s in planner.segments] == [
        (30, None, "write", TARGET), (None, 30, "drop", TARGET)
    ]  # fmt: skip
    ((old, new, at),) = [(r.old, r.new, r.position) for r in renames]
    assert (old, new, at) == (FROM, TO, pos(30))


def test_statements_beyond_the_watermark_wait_in_order() -> None:
    host, k = Host(), keeper()
    k.take(event(TO, 10, ddl=CREATE), pos(10), host)
    alter = event(FROM, 12, ddl="ALTER TABLE orders_7 ADD COLUMN c INT")
    assert not k.take(alter, pos(12), host)  # an ALTER of the old side: the lock's, whatever comes
    truncate, after = event(FROM, 13, op="t"), event(FROM, 14, ddl="ALTER TABLE orders_7 ADD d INT")
    assert k.take(truncate, pos(13), host) and k.take(
        after, pos(14), host
    )  # waits; what follows too
    assert k.pending == [event(TO, 10, ddl=k.pending[0]["ddl"]), truncate, after]
    k.marker(marker("s3", "db_3", 20, "heartbeat"), pos(20), host)
    k.settle(host, Planner(host.c))
    # s3's watermark passed them, before any freeze: the coordinator's, in their order
    assert host.replayed == [truncate, after]
    assert [r["tbl"] for r in k.pending] == ["orders_23"]  # s9's watermark has not moved


def test_a_marker_row_that_does_not_fit_is_a_dead_letter() -> None:
    host, k = Host(), keeper()
    k.marker(marker("s3", "db_3", 5, "frozen", move="m9"), pos(5), host)
    k.marker(marker("s9", "db_9", 6, "switched"), pos(6), host)  # before any freeze
    k.marker(marker("s3", "db_3", 7, "sideways"), pos(7), host)
    assert [why.split(":")[0] for why in host.dead] == ["marker row refused"] * 3
    assert "no move 'm9' is declared" in host.dead[0]
    assert "before every from source wrote 'frozen'" in host.dead[1]
    assert "phase 'sideways'" in host.dead[2]
    assert k.moves.state("m1") == "declared" and k.watermark == {"s3": pos(7), "s9": pos(6)}


def test_a_split_judges_each_row_by_its_key() -> None:
    host, k = Host(), keeper("MOD(id, 2) = 1")
    k.take(event(TO, 10, ddl=CREATE), pos(10), host)
    k.marker(marker("s3", "db_3", 30, "frozen"), pos(30), host)
    assert k.take(event(FROM, 40, op="t"), pos(40), host)  # deferred: the kept keys wait behind it
    assert fates(k, FROM, host) == [
        (None, 30, "write", 1, True), (30, None, "hold", MOVE_KEEP, True),
        (None, 40, "write", 1, False), (40, None, "hold", -3, False),
    ]  # fmt: skip
    planner = Planner(host.c)
    k.plan(planner, host.c, [])
    assert planner.moved != NO_MOVED and "% 2 = 1" in planner.moved


def test_the_state_goes_through_json_unchanged() -> None:
    host, k = Host(), keeper()
    k.take(event(TO, 10, ddl=CREATE), pos(10), host)
    k.take(event(FROM, 13, op="t"), pos(13), host)
    k.marker(marker("s3", "db_3", 30, "frozen"), pos(30), host)
    saved = json.loads(json.dumps(k.to_json()))
    again = k.restored(saved)
    assert again.to_json() == k.to_json()
    assert fates(again, FROM, host) == fates(k, FROM, host)


@pytest.mark.parametrize("state", ["switched", "aborted"])
def test_after_the_end_of_a_move_nothing_waits(state: str) -> None:
    k = keeper()
    k.moves.progress["m1"].state = state  # type: ignore[assignment]
    assert not k.rereads()
    assert not k.uncertain(TO, pos(99), "ALTER TABLE orders_23 ADD c INT")


def test_an_operators_switch_positions_stand_for_the_markers() -> None:
    from coordinator.moves import MoveCommand, MoveError, parse_move_command

    host, k = Host(), keeper()
    k.take(event(TO, 10, ddl=CREATE), pos(10), host)
    k.marker(marker("s9", "db_9", 11, "heartbeat"), pos(11), host)
    k.settle(host, Planner(host.c))  # the copy's CREATE, recorded
    with pytest.raises(MoveError, match="give the freeze position of every from source"):
        k.command(parse_move_command("move switch m1 --frozen s4=bin.1:30 --switched b:1"), host)
    cmd = parse_move_command("move switch m1 --frozen s3=bin.1:30 --switched bin.1:50")
    assert cmd == MoveCommand("switch", "m1", (("s3", ("bin.1", 30)),), ("bin.1", 50))
    k.command(cmd, host)
    assert k.moves.state("m1") == "switching"
    # the freeze at bin.1:30: an event at 29 is before it, one at 30 after it
    assert fates(k, FROM, host) == [
        (None, 30, "write", 1, None),
        (30, None, "hold", MOVE_KEEP, None),
    ]
    k.settle(host, Planner(host.c))
    assert k.moves.state("m1") == "switched"
    assert pos(29) < k.moves.progress["m1"].frozen["s3"] < pos(30)


def test_a_copy_statement_sent_again_is_taken_once_and_one_refused_is_a_dead_letter() -> None:
    host, k = Host(), keeper()
    k.marker(marker("s9", "db_9", 50, "heartbeat"), pos(50), host)
    alter = event(TO, 12, ddl="ALTER TABLE orders_23 ADD COLUMN c INT")
    for r in (event(TO, 10, ddl=CREATE), alter, alter):  # the ALTER sent twice
        assert k.take(r, position_of(r), host)
    copy = k.copies["m1"].shard_state(TO)
    assert copy is not None and [c.name for c in copy.schema.columns] == ["id", "amount", "c"]
    assert host.dead == []
    host, k = Host(), keeper()  # the copy's CREATE never read: its ALTER cannot be taken
    k.marker(marker("s9", "db_9", 50, "heartbeat"), pos(50), host)
    assert k.take(alter, position_of(alter), host)
    assert len(host.dead) == 1 and "the copy's statement refused" in host.dead[0]
    assert k.copies["m1"].shard_state(TO) is None


def test_a_rename_event_named_after_its_new_table_is_the_moving_tables() -> None:
    """Debezium names a RENAME TABLE event after the new name: the old side's rename after
    its freeze is still deferred to the switch, not the lock's (there the switch would find
    the old side gone and run while it is held)."""
    host, k = Host(), keeper()
    k.take(event(TO, 10, ddl=CREATE), pos(10), host)
    k.marker(marker("s3", "db_3", 20, "frozen"), pos(20), host)
    k.marker(marker("s9", "db_9", 21, "heartbeat"), pos(21), host)
    k.settle(host, Planner(host.c))
    retired = ShardId("s3", "db_3", "orders_7_retired")
    rename = event(retired, 22, ddl="RENAME TABLE orders_7 TO orders_7_retired")
    k.marker(marker("s3", "db_3", 23, "heartbeat"), pos(23), host)
    assert k.take(rename, pos(22), host)
    assert [r["tbl"] for r in k.deferred["m1"]] == ["orders_7"]
    # a rename of a table no move names stays the coordinator's
    other = event(ShardId("s1", "db_1", "orders_9"), 24, ddl="RENAME TABLE orders_1 TO orders_9")
    assert not k.take(other, pos(24), host)
