"""Moves (docs/moves.md): the classification of every event of a moving shard, one line a
case; the switch's preconditions; the ``moves:`` settings; the marker table."""

from __future__ import annotations

import pytest

from coordinator.ids import ShardId, TargetId
from coordinator.moves import Kind, Move, MoveError, Moves, MoveSettings, SwitchFacts, table_kind
from coordinator.routing import Route, Router
from schemas.ddl import parse_create_table
from streaming.config import ConfigError, load_settings

S = ShardId.parse
M1 = Move("m1", (S("s3.db_3.orders_7"),), S("s9.db_9.orders_23"))  # whole table
M2 = Move("m2", (S("s4.db_4.orders_8"),), S("s9.db_9.orders_24"), "MOD(id, 2) = 1")  # split
M3 = Move("m3", (S("s5.db_5.orders_1"), S("s6.db_6.orders_2")), S("s9.db_9.orders_30"))  # merge


def book() -> Moves:
    """m1 frozen at 10 on s3 and switched at 20 on s9, not yet switched downstream;
    m2 frozen at 10 on s4; m3 frozen at 10 on s5 only."""
    moves = Moves([M1, M2, M3])
    marker = {"move_id": "m1", "phase": "frozen"}
    moves.marker(S("s3.db_3.shardmerge_move"), marker, 10)
    moves.marker(S("s9.db_9.shardmerge_move"), {**marker, "phase": "switched"}, 20)
    moves.marker(S("s4.db_4.shardmerge_move"), {**marker, "move_id": "m2"}, 10)
    moves.marker(S("s5.db_5.shardmerge_move"), {**marker, "move_id": "m3"}, 10)
    return moves


# id | shard | position | kind | key id | -> side, after its marker, key moved, action
CASES = """
MV01 s3.db_3.orders_7   5  row   1 -> from before - apply
MV02 s3.db_3.orders_7   11 row   1 -> from after  moved drop
MV03 s3.db_3.orders_7   11 table - -> from after  - defer
MV04 s3.db_3.orders_7   5  table - -> from before - apply
MV05 s3.db_3.orders_7   11 ddl   - -> from after  - apply
MV06 s3.db_3.orders_7   5  ddl   - -> from before - apply
MV07 s9.db_9.orders_23  15 row   1 -> to   before - shadow
MV08 s9.db_9.orders_23  15 ddl   - -> to   before - record
MV09 s9.db_9.orders_23  15 table - -> to   before - record
MV10 s9.db_9.orders_23  21 row   1 -> to   after  - queue
MV11 s9.db_9.orders_23  21 ddl   - -> to   after  - queue
MV12 s9.db_9._orders_23_gho 15 ddl - -> to before - record
MV13 s3.db_3._orders_7_gho  5 ddl - -> from before - apply
MV14 s4.db_4.orders_8   11 row   1 -> from after  moved drop
MV15 s4.db_4.orders_8   11 row   2 -> from after  kept apply
MV16 s4.db_4.orders_8   5  row   1 -> from before - apply
MV17 s4.db_4.orders_8   11 ddl   - -> from after  - apply
MV18 s4.db_4.orders_8   11 table - -> from after  - defer
MV19 s5.db_5.orders_1   11 row   1 -> from after  moved drop
MV20 s6.db_6.orders_2   11 row   1 -> from before - apply
MV21 s9.db_9.orders_30  11 row   1 -> to   before - shadow
MV22 s1.db_1.orders_1   11 row   1 -> none before - apply
MV23 s3.db_4.orders_7   11 row   1 -> none before - apply
"""


def _case(line: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    left, right = line.split("->")
    name, *given = left.split()
    return name, tuple(given), tuple(right.split())


@pytest.mark.parametrize(
    "name,given,want", [_case(line) for line in CASES.strip().splitlines()], ids=lambda x: x
)
def test_classify(name: str, given: tuple[str, ...], want: tuple[str, ...]) -> None:
    shard, position, kind, key = given
    row = None if key == "-" else {"id": int(key), "amount": 1}
    c = book().classify(S(shard), int(position), kind, row)  # type: ignore[arg-type]
    moved = "-" if c.moved is None else "moved" if c.moved else "kept"
    got = (c.side, "after" if c.after_marker else "before", moved, c.action)
    assert got == want, f"{name}: {c.reason}"


def test_after_the_switch_to_applies_and_from_table_statements_apply() -> None:
    moves = book()
    moves.switched("m1", TargetId("shop", "orders"))
    assert moves.classify(S("s9.db_9.orders_23"), 21, "row", {"id": 1}).action == "apply"
    assert moves.classify(S("s3.db_3.orders_7"), 30, "table").action == "apply"
    assert moves.classify(S("s3.db_3.orders_7"), 30, "row", {"id": 1}).action == "drop"


def test_after_an_abort_from_applies_and_to_is_dropped() -> None:
    moves = book()
    moves.abort("m1")
    assert moves.classify(S("s3.db_3.orders_7"), 30, "row", {"id": 1}).action == "apply"
    assert moves.classify(S("s9.db_9.orders_23"), 30, "row", {"id": 1}).action == "drop"
    moves.abort("m2")
    moves.switched("m3", TargetId("shop", "orders"))
    with pytest.raises(MoveError, match="m3 is switched"):
        moves.abort("m3")


def test_note_counts_and_starts_the_copy() -> None:
    moves = Moves([M1])
    assert moves.state("m1") == "declared"
    moves.note(moves.classify(S("s9.db_9.orders_23"), 1, "row", {"id": 1}))
    assert (moves.state("m1"), moves.progress["m1"].shadow) == ("copying", 1)


# --- markers --------------------------------------------------------------------------


def test_the_marker_table_is_a_table_kind() -> None:
    router = Router((Route(TargetId("shop", "orders")),))
    moves = Moves([M1])
    assert table_kind(router, moves, S("s3.db_3.shardmerge_move")) is Kind.MARKER
    assert table_kind(router, moves, S("s9.any.shardmerge_move")) is Kind.MARKER
    assert table_kind(router, moves, S("s1.db_1.shardmerge_move")) is Kind.SHARD  # not a side
    assert table_kind(router, moves, S("s3.db_3._orders_7_gho")) is Kind.SHADOW


@pytest.mark.parametrize(
    "shard,row,error",
    [
        ("s3.db_3.shardmerge_move", {"move_id": "m9", "phase": "frozen"}, "no move 'm9'"),
        ("s3.db_3.shardmerge_move", {"move_id": "m1", "phase": "paused"}, "phase 'paused'"),
        ("s9.db_9.shardmerge_move", {"move_id": "m1", "phase": "frozen"}, "holds none"),
        ("s3.db_3.shardmerge_move", {"move_id": "m1", "phase": "switched"}, "is on source s9"),
        ("s9.db_9.shardmerge_move", {"move_id": "m1", "phase": "switched"}, "freeze the old"),
        ("s3.db_3.shardmerge_move", {"move_id": "m1"}, "no move_id or phase"),
    ],
)
def test_a_marker_row_that_does_not_fit_is_an_error(shard: str, row: dict, error: str) -> None:
    with pytest.raises(MoveError, match=error):
        Moves([M1]).marker(S(shard), row, 1)


def test_merge_is_frozen_when_every_from_source_froze() -> None:
    moves = book()
    assert moves.state("m3") == "declared"
    moves.marker(S("s6.db_6.shardmerge_move"), {"move_id": "m3", "phase": "frozen"}, 12)
    assert moves.state("m3") == "frozen"


# --- the switch ---------------------------------------------------------------------------

SCHEMA = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, amount INT)")
WIDER = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, amount INT, c INT)")
FROM, TO = S("s3.db_3.orders_7"), S("s9.db_9.orders_23")


def test_switch_when_every_precondition_holds() -> None:
    assert book().can_switch("m1", SwitchFacts(schemas={FROM: SCHEMA, TO: SCHEMA})) == []


@pytest.mark.parametrize(
    "facts,unmet",
    [
        (SwitchFacts(held={FROM: 7}, schemas={FROM: SCHEMA, TO: SCHEMA}), "held at position 7"),
        (
            SwitchFacts(
                migrations=[S("s3.db_3._orders_7_gho")], schemas={FROM: SCHEMA, TO: SCHEMA}
            ),
            "online DDL migration is running (shadow table s3.db_3._orders_7_gho)",
        ),
        (
            SwitchFacts(
                migrations=[S("s9.db_9._orders_23_new")], schemas={FROM: SCHEMA, TO: SCHEMA}
            ),
            "online DDL migration",
        ),
        (SwitchFacts(schemas={FROM: WIDER, TO: SCHEMA}), "ADD COLUMN `c` INT"),
        (SwitchFacts(schemas={FROM: SCHEMA, TO: None}), "does not exist"),
    ],
)
def test_an_unmet_precondition_is_named(facts: SwitchFacts, unmet: str) -> None:
    got = book().can_switch("m1", facts)
    assert len(got) == 1 and unmet in got[0], got


# A snapshot's CREATE (SHOW CREATE TABLE) states charsets; a copy made by a CREATE TABLE
# that leaves them to the server does not: the same table for the switch.
STATED = parse_create_table(
    "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20) CHARACTER SET utf8mb4 "
    "COLLATE utf8mb4_general_ci) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)
UNSTATED = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20))")
LATIN1 = parse_create_table(
    "CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20) CHARACTER SET latin1) "
    "DEFAULT CHARSET=utf8mb4"
)
LONGER = parse_create_table("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(40))")


@pytest.mark.parametrize(
    "old,new,differs",
    [
        (STATED, UNSTATED, None),
        (UNSTATED, STATED, None),
        (STATED, LATIN1, "CHARACTER SET utf8mb4"),  # both state it, differently
        (STATED, LONGER, "VARCHAR(20)"),  # the type differs whatever the charset
    ],
)
def test_the_switch_compares_what_both_sides_state(old, new, differs) -> None:
    got = book().can_switch("m1", SwitchFacts(schemas={FROM: old, TO: new}))
    if differs is None:
        assert got == []
    else:
        assert len(got) == 1 and differs in got[0], got


def test_a_migration_on_another_table_does_not_stop_the_switch() -> None:
    facts = SwitchFacts(migrations=[S("s3.db_3._other_gho")], schemas={FROM: SCHEMA, TO: SCHEMA})
    assert book().can_switch("m1", facts) == []


def test_no_switch_before_both_markers() -> None:
    unmet = Moves([M1]).can_switch("m1", SwitchFacts(schemas={FROM: SCHEMA, TO: SCHEMA}))
    assert [u.split(":")[1].split(" in ")[0].strip() for u in unmet] == [
        "no 'frozen' marker yet",
        "no 'switched' marker yet",
    ]


def test_move_state_round_trips() -> None:
    moves = book()
    again = Moves([M1, M2, M3])
    again.restore(moves.to_json())
    assert again.to_json() == moves.to_json()
    with pytest.raises(MoveError, match="'m1', which is no longer declared"):
        Moves([M2]).restore(moves.to_json())


# --- settings -----------------------------------------------------------------------------


def test_move_settings_take_one_or_several_from() -> None:
    one = MoveSettings.model_validate({"id": "m1", "from": "s3.db_3.t", "to": "s9.db_9.t"})
    merge = MoveSettings.model_validate({"id": "m", "from": ["a.b.c", "d.e.f"], "to": "g.h.i"})
    assert one.move().pattern == "move" and merge.move().pattern == "merge"
    split = MoveSettings.model_validate(
        {"id": "m2", "from": "a.b.c", "to": "g.h.i", "keys": "id < 100"}
    )
    assert split.move().pattern == "split" and split.move().moves_row({"id": 5})
    assert not split.move().moves_row({"id": 500})


BASE = """
kafka: {bootstrap: b:9092}
sources: [{pattern: 's.*'}]
routes:
  - {target: shop.orders, table: 'orders_*'}
  - {target: shop.items, table: 'items_*'}
sink: {path: /tmp/lake}
checkpoint: /tmp/cp
"""


@pytest.mark.parametrize(
    "moves,error",
    [
        ("[{id: m1, from: s3.db_3.orders_7, to: s9.db_9.orders_23}]", None),
        ("[{id: m1, from: s3.db_3.orders_7, to: s9.db_9.orders_23, keys: 'id <'}]", "moves.0.keys"),
        ("[{id: m1, from: s3.db_3.orders_7, to: s9.db_9.orders_23, keys: 'id'}]", "moves.0.keys"),
        ("[{id: m1, from: s3.orders_7, to: s9.db_9.orders_23}]", "moves.0.from"),
        ("[{id: m1, from: s3.db_3.orders_7, to: s9}]", "moves.0.to"),
        ("[{id: 'm 1', from: s3.db_3.orders_7, to: s9.db_9.orders_23}]", "moves.0.id"),
        ("[{id: m1, from: s3.db_3.orders_7, to: s9.db_9.items_2}]", "a move stays within one"),
        ("[{id: m1, from: s3.db_3.orders_7, to: s9.db_9.other}]", "moves[0].to: s9.db_9.other"),
        (
            "[{id: m1, from: s.d.orders_1, to: s.d.orders_2}, {id: m1, from: s.d.orders_3, "
            "to: s.d.orders_4}]",
            "moves[1].id: 'm1' is also moves[0]'s",
        ),
        (
            "[{id: m1, from: s.d.orders_1, to: s.d.orders_2}, {id: m2, from: s.d.orders_1, "
            "to: s.d.orders_4, keys: 'id > 5'}]",
            "only when each has keys",
        ),
        (
            "[{id: m1, from: s.d.orders_1, to: s.d.orders_2}, {id: m2, from: s.d.orders_3, "
            "to: s.d.orders_2}]",
            "moves[1].to: s.d.orders_2 is also moves[0]'s to",
        ),
        ("[{id: m1, from: s.d.orders_1, to: s.d.orders_2, marker: 'a;b'}]", "moves.0.marker"),
        ("[{id: m1, from: s.d.orders_1, to: s.d.orders_2, verify: true}]", "moves.0.verify"),
    ],
)
def test_moves_settings_errors_name_the_field(tmp_path, moves: str, error: str | None) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(BASE + f"moves: {moves}\n")
    if error is None:
        assert load_settings(path, environ={}).moves[0].id == "m1"
        return
    with pytest.raises(ConfigError) as e:
        load_settings(path, environ={})
    assert error in str(e.value) and str(path) in str(e.value)


def test_the_streaming_job_refuses_a_shard_in_two_moves(tmp_path) -> None:
    from shardmerge.errors import ShardMergeError
    from streaming.job import check_runnable

    path = tmp_path / "job.yaml"
    path.write_text(BASE)
    check_runnable(load_settings(path, environ={}))  # no moves: runs
    path.write_text(BASE + "moves: [{id: m1, from: s3.db_3.orders_7, to: s9.db_9.orders_23}]\n")
    check_runnable(load_settings(path, environ={}))  # a whole-table move: runs
    split = "{id: m1, from: s3.db_3.orders_7, to: s9.db_9.orders_23, keys: 'id > 5'}"
    path.write_text(BASE + f"moves: [{split}]\n")
    check_runnable(load_settings(path, environ={}))  # a split: runs
    other = "{id: m2, from: s3.db_3.orders_7, to: s8.db_8.orders_1, keys: 'id <= 5'}"
    path.write_text(BASE + f"moves: [{split}, {other}]\n")
    with pytest.raises(ShardMergeError, match=r"moves m1 and m2 both split s3\.db_3\.orders_7"):
        check_runnable(load_settings(path, environ={}))
