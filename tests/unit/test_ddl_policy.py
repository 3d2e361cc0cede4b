"""The schema-change policy per DDL kind (coordinator/policy.py): classification, each word
in both modes, the settings' validation, and the state round trip."""

from __future__ import annotations

import json

import pytest

from coordinator import Coordinator, Route, Router, ShardId, TargetConfig, TargetId
from coordinator.commands import parse_command
from coordinator.decisions import ApplyDDL, Hold, Truncate
from coordinator.policy import Policy, alter_verdict, partition_kind, spec_kinds
from coordinator.routing import Extract
from coordinator.state import restore, snapshot
from schemas import parse_create_table
from schemas.changes import AlterTable, ModifyColumn
from schemas.ddl import parse_ddl
from streaming.config import TargetSettings

T = TargetId("shop", "orders")
S1, S2 = ShardId.parse("s1.db1.orders"), ShardId.parse("s2.db1.orders")
BASE = "CREATE TABLE orders (id INT PRIMARY KEY, a INT NOT NULL, b INT, KEY kb (b))"
SCHEMA = parse_create_table(BASE)


def alter(sql: str) -> AlterTable:
    (change,) = parse_ddl(sql)
    assert isinstance(change, AlterTable)
    return change


# --- classification ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kinds"),
    [
        ("ADD COLUMN c INT", [("add_column",)]),
        ("DROP COLUMN b", [("drop_column",)]),
        ("MODIFY b BIGINT", [("modify_column",)]),
        ("ALTER COLUMN b SET DEFAULT 3", [("modify_column",)]),
        ("RENAME COLUMN b TO c", [("rename_column",)]),
        ("CHANGE b c INT", [("rename_column",)]),
        ("CHANGE b c BIGINT", [("rename_column", "modify_column")]),
        ("CHANGE b b BIGINT", [("modify_column",)]),
        ("ADD INDEX ka (a)", [("add_index",)]),
        ("DROP INDEX kb", [("drop_index",)]),
        ("RENAME INDEX kb TO kc", [("drop_index", "add_index")]),
        ("DEFAULT CHARSET utf8mb4", [("table_options",)]),
        ("ADD COLUMN c INT, DROP COLUMN b", [("add_column",), ("drop_column",)]),
    ],
)
def test_each_alter_specification_has_its_kinds(spec: str, kinds: list[tuple[str, ...]]) -> None:
    change = alter(f"ALTER TABLE orders {spec}")
    assert [spec_kinds(s, SCHEMA) for s in change.specs] == kinds


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("ALTER TABLE orders TRUNCATE PARTITION p0", "truncate_partition"),
        ("alter table orders drop  partition p0, p1", "drop_partition"),
        ("ALTER TABLE orders ADD PARTITION (PARTITION p9 VALUES LESS THAN (9))", None),
        ("ALTER TABLE orders DROP COLUMN partition_id", None),
    ],
)
def test_partition_statements_have_their_kind(sql: str, kind: str | None) -> None:
    assert partition_kind(sql) == kind


def test_a_statement_with_one_fail_is_held_whole_and_others_split() -> None:
    change = alter("ALTER TABLE orders ADD COLUMN c INT, MODIFY b BIGINT, DROP COLUMN a")
    failing = Policy.of({"modify_column": "fail", "add_column": "ignore"})
    v = alter_verdict(failing, change, SCHEMA)
    assert v.fail == ("modify_column", "fail") and v.change is None
    split = alter_verdict(
        Policy.of({"add_column": "ignore", "drop_column": "keep"}), change, SCHEMA
    )
    assert split.fail is None and split.project
    assert split.notes == (("add_column", "ignore"), ("drop_column", "keep"))
    assert split.change is not None
    modify, kept = split.change.specs
    assert isinstance(modify, ModifyColumn) and modify.column.name == "b"
    # `a` is NOT NULL without default: kept, it becomes nullable (later rows write NULL)
    assert isinstance(kept, ModifyColumn) and kept.column.name == "a" and kept.column.nullable


def test_keep_of_a_column_with_a_default_changes_nothing() -> None:
    v = alter_verdict(
        Policy.of({"drop_column": "keep"}), alter("ALTER TABLE orders DROP b"), SCHEMA
    )
    assert v.change is None and not v.project and v.notes == (("drop_column", "keep"),)


def test_the_default_policy_leaves_every_statement_as_it_is() -> None:
    change = alter("ALTER TABLE orders DROP COLUMN a")
    v = alter_verdict(Policy(), change, SCHEMA)
    assert v.change is change and v.notes == () and not Policy()


# --- the settings ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"drop_colum": "keep"}, "unknown DDL kind 'drop_colum'"),
        ({"add_column": "keep"}, "add_column: 'keep' is not a policy for it"),
        ({"drop_table": "keep"}, "choose one of forward, ignore, warn, fail"),
        ({"modify_column": "stop"}, "modify_column: 'stop'"),
    ],
)
def test_settings_refuse_unknown_kinds_and_words(policy: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TargetSettings.model_validate({"policy": policy})


def test_settings_give_the_coordinator_its_policy() -> None:
    settings = TargetSettings.model_validate(
        {"policy": {"drop_column": "keep", "add_index": "forward"}}
    )
    assert settings.config().policy == Policy((("drop_column", "keep"),))


# --- each word, on the coordinator ------------------------------------------------------


def coord(
    mode: str, policy: dict[str, str], extract: bool = False, strict: bool = False
) -> Coordinator:
    ex = Extract(source_column="_source") if extract else Extract()
    c = Coordinator(
        Router((Route(T, extract=ex),)),
        {T: TargetConfig(mode, strict, Policy.of(policy))},  # type: ignore[arg-type]
    )
    for s in (S1, S2):
        c.register(s, parse_create_table(BASE))
    return c


def kinds_of(decisions: list[object]) -> list[str]:
    return [type(d).__name__ for d in decisions]


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
@pytest.mark.parametrize("word", ["ignore", "warn"])
def test_ignored_ddl_runs_nothing_and_holds_nothing(mode: str, word: str) -> None:
    c = coord(mode, {"add_column": word, "truncate_table": word})
    assert c.on_ddl(S1, "ALTER TABLE orders ADD COLUMN c INT", 1) == []
    assert c.on_ddl(S1, "TRUNCATE TABLE orders", 2) == []
    assert c.route_row(S1).action == "write" and c.route_row(S1).project
    t = c.targets[T]
    assert t.stage == "none" and not t.downstream().has_column("c")  # type: ignore[union-attr]
    assert t.policy_counts == {("add_column", word): 1, ("truncate_table", word): 1}


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_fail_holds_the_shard_in_conflict_without_stopping_a_strict_target(mode: str) -> None:
    c = coord(mode, {"modify_column": "fail"}, strict=mode == "optimistic")
    out = c.on_ddl(S1, "ALTER TABLE orders MODIFY b BIGINT", 1)
    assert kinds_of(out) == ["Hold"]
    (view,) = c.locks()
    assert view.stage == "conflict" and view.blocked == (S1,)
    assert view.conflict is not None
    for word in (str(S1), "MODIFY b BIGINT", "modify_column", "'fail'", "--action skip"):
        assert word in view.conflict
    # the operator runs it downstream: optimistic at once; pessimistic, S2 then owes it
    out = c.command(parse_command(f"unlock {T} --shard {S1} --action exec"))
    assert next(d for d in out if isinstance(d, ApplyDDL)).statement.endswith("BIGINT NULL")
    assert c.locks()[0].stage == "none"


def test_fail_then_skip_keeps_the_downstream_as_it_was() -> None:
    c = coord("optimistic", {"drop_column": "fail"})
    c.on_ddl(S1, "ALTER TABLE orders DROP COLUMN b", 1)
    out = c.command(parse_command(f"unlock {T} --shard {S1} --action skip"))
    assert kinds_of(out) == ["Release"] and c.route_row(S1).project


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_keep_leaves_the_column_downstream_after_every_shard_dropped_it(mode: str) -> None:
    c = coord(mode, {"drop_column": "keep"})
    out = [*c.on_ddl(S1, "ALTER TABLE orders DROP COLUMN a", 1)]
    out += c.on_ddl(S2, "ALTER TABLE orders DROP COLUMN a", 2)
    column = c.targets[T].downstream().column("a")  # type: ignore[union-attr]
    assert column is not None and column.nullable
    assert c.locks()[0].stage == "none" and not c.locks()[0].blocked
    assert [d.statement for d in out if isinstance(d, ApplyDDL)] == [
        "ALTER TABLE `orders` MODIFY COLUMN `a` INT NULL"
    ]


def test_forward_drop_column_drops_it_when_the_last_shard_did() -> None:
    c = coord("optimistic", {})
    c.on_ddl(S1, "ALTER TABLE orders DROP COLUMN b", 1)
    c.on_ddl(S2, "ALTER TABLE orders DROP COLUMN b", 2)
    assert not c.targets[T].downstream().has_column("b")  # type: ignore[union-attr]


@pytest.mark.parametrize(("word", "truncates"), [("forward", True), ("ignore", False)])
def test_truncate_policy(word: str, truncates: bool) -> None:
    c = coord("pessimistic", {"truncate_table": word}, extract=True)
    out = c.on_ddl(S1, "TRUNCATE TABLE orders", 1)
    assert any(isinstance(d, Truncate) for d in out) is truncates


def test_a_failed_truncate_executed_deletes_only_its_shards_rows() -> None:
    c = coord("optimistic", {"truncate_table": "fail"}, extract=True)
    assert kinds_of(c.on_ddl(S1, "TRUNCATE TABLE orders", 1)) == ["Hold"]
    out = c.command(parse_command(f"unlock {T} --shard {S1} --action exec"))
    (truncate,) = [d for d in out if isinstance(d, Truncate)]
    assert truncate.match == (("_source", "s1"),)


@pytest.mark.parametrize(("word", "stage"), [("forward", "conflict"), ("ignore", "none")])
def test_partition_maintenance_policy(word: str, stage: str) -> None:
    c = coord("optimistic", {"drop_partition": word})
    c.on_ddl(S1, "ALTER TABLE orders DROP PARTITION p0", 1)
    assert c.locks()[0].stage == stage


@pytest.mark.parametrize(("word", "held"), [("ignore", False), ("fail", True)])
def test_create_table_policy(word: str, held: bool) -> None:
    c = coord("pessimistic", {"create_table": word})
    s3 = ShardId.parse("s3.db1.orders")
    out = c.on_ddl(s3, "CREATE TABLE orders (id INT PRIMARY KEY, a INT NOT NULL, z INT)", 1)
    assert any(isinstance(d, Hold) for d in out) is held
    assert c.locks()[0].stage == ("conflict" if held else "none")
    if not held:
        assert c.route_row(s3).project  # its `z` is dropped: the downstream did not get it


def test_a_queued_ddl_meets_the_policy_when_the_shard_is_released() -> None:
    c = coord("pessimistic", {"add_column": "ignore"})
    c.on_ddl(S1, "ALTER TABLE orders MODIFY b BIGINT", 1)
    c.on_ddl(S1, "ALTER TABLE orders ADD COLUMN c INT", 2)  # queued behind the MODIFY
    c.on_ddl(S2, "ALTER TABLE orders MODIFY b BIGINT", 3)
    t = c.targets[T]
    assert t.stage == "none" and not t.downstream().has_column("c")  # type: ignore[union-attr]
    assert t.policy_counts == {("add_column", "ignore"): 1}


def test_drop_table_is_taken_and_recorded_whatever_the_policy() -> None:
    c = coord("pessimistic", {"drop_table": "warn"})
    c.on_ddl(S1, "ALTER TABLE orders MODIFY b BIGINT", 1)
    c.on_ddl(S2, "DROP TABLE orders", 2)
    assert c.locks()[0].stage == "none" and S2 not in c.targets[T].shards
    assert c.targets[T].policy_notes[-1].kind == "drop_table"


def test_the_decisions_survive_a_state_round_trip() -> None:
    c = coord("optimistic", {"add_column": "warn", "modify_column": "fail"})
    c.on_ddl(S1, "ALTER TABLE orders ADD COLUMN c INT", 1)
    c.on_ddl(S2, "ALTER TABLE orders MODIFY b BIGINT", 2)
    state = json.loads(json.dumps(snapshot(c)))
    again = restore(state, c.router, c.configs)
    assert snapshot(again) == state
    t = again.targets[T]
    assert t.policy == c.targets[T].policy and t.stage == "conflict"
    assert t.policy_counts == {("add_column", "warn"): 1, ("modify_column", "fail"): 1}
    assert [n.policy for n in t.policy_notes] == ["warn", "fail"]
    # an older state (no policy fields) still reads, with nothing recorded
    for raw in state["targets"]:
        raw.pop("policy_notes"), raw.pop("policy_counts")
    assert restore(state, c.router, c.configs).targets[T].policy_counts == {}


def test_locks_show_which_policy_decided() -> None:
    from streaming.cli.verbs import _policies
    from streaming.ops.views import _policy

    c = coord("optimistic", {"truncate_table": "ignore", "drop_column": "keep"})
    c.on_ddl(S2, "TRUNCATE TABLE orders", 1)
    data = json.loads(json.dumps({"coordinator": snapshot(c)}))
    assert _policies(data) == {
        str(T): [
            {
                "shard": str(S2),
                "sql": "TRUNCATE TABLE orders",
                "kind": "truncate_table",
                "policy": "ignore",
            }
        ]
    }
    view = _policy(c.target_views()[0])
    assert view["policy"] == {"drop_column": "keep", "truncate_table": "ignore"}
    assert view["policy_counts"] == [{"kind": "truncate_table", "policy": "ignore", "count": 1}]


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_statements_about_an_ignored_column_are_ignored_too(mode: str) -> None:
    c = coord(mode, {"add_column": "ignore"})
    c.on_ddl(S1, "ALTER TABLE orders ADD COLUMN c INT", 1)
    # before: MODIFY of a column coordination never had held the shard in conflict
    assert c.on_ddl(S1, "ALTER TABLE orders MODIFY c BIGINT, ADD INDEX ic (c)", 2) == []
    c.on_ddl(S1, "ALTER TABLE orders CHANGE c d BIGINT", 3)
    assert c.targets[T].shards[S1].ignored == ("d",)
    # the operator turns the policy back to forward: the ignored column stays ignored; a
    # column added after it goes to the end; the renamed one is followed by its new name
    forward = {T: TargetConfig(mode, False, Policy.of({}))}  # type: ignore[arg-type]
    c = restore(json.loads(json.dumps(snapshot(c))), c.router, forward)
    c.on_ddl(S1, "ALTER TABLE orders ADD COLUMN e INT AFTER d, ALTER COLUMN d SET DEFAULT 1", 4)
    c.on_ddl(S2, "ALTER TABLE orders ADD COLUMN e INT", 5)
    t = c.targets[T]
    assert t.stage == "none" and t.shards[S1].conflict is None
    assert t.shards[S1].schema.column_names() == ("id", "a", "b", "e")
    assert t.downstream().column_names() == ("id", "a", "b", "e")  # type: ignore[union-attr]
    assert [(n.kind, n.policy) for n in t.policy_notes][-1] == ("modify_column", "ignore")
    c.on_ddl(S1, "ALTER TABLE orders DROP COLUMN d", 6)
    assert c.targets[T].shards[S1].ignored == ()
    assert c.targets[T].stage == "none"


# --- `fail` for DROP and RENAME TABLE ------------------------------------------------------


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_a_failed_drop_table_holds_the_shard_until_the_operator_takes_it(mode: str) -> None:
    c = coord(mode, {"drop_table": "fail"})
    c.on_ddl(S1, "ALTER TABLE orders ADD COLUMN c INT", 1)
    out = c.on_ddl(S2, "DROP TABLE orders", 2)
    assert kinds_of(out) == ["Hold"] and S2 in c.targets[T].shards
    (view,) = c.locks()
    assert view.stage == "conflict" and S2 in view.blocked
    for word in (str(S2), "DROP TABLE orders", "drop_table", "'fail'"):
        assert word in (view.conflict or "")
    if mode == "pessimistic":  # the lock still waits for S2: nothing ran downstream
        assert not c.targets[T].downstream().has_column("c")  # type: ignore[union-attr]
    # held across a restart of the job
    state = json.loads(json.dumps(snapshot(c)))
    c = restore(state, c.router, c.configs)
    assert snapshot(c) == state
    with pytest.raises(Exception, match="cannot be replaced"):
        c.command(parse_command(f"unlock {T} --shard {S2} --replace 'SELECT 1'"))
    out = c.command(parse_command(f"unlock {T} --shard {S2} --action exec"))
    assert S2 not in c.targets[T].shards and c.locks()[0].stage == "none"
    # S2 left: the pessimistic lock resolves with S1 alone
    assert c.targets[T].downstream().has_column("c")  # type: ignore[union-attr]
    assert c.route_row(S1).action == "write"


def test_statements_after_a_held_drop_table_wait_behind_it() -> None:
    c = coord("optimistic", {"drop_table": "fail"})
    c.on_ddl(S2, "DROP TABLE orders", 1)
    # the table comes back with another column, then changes: they wait behind the DROP
    assert c.on_ddl(S2, "CREATE TABLE orders (id INT PRIMARY KEY, a INT NOT NULL, z INT)", 2) == []
    assert c.on_ddl(S2, "ALTER TABLE orders ADD COLUMN w INT", 3) == []
    assert not c.targets[T].downstream().has_column("z")  # type: ignore[union-attr]
    assert [p.sql for p in c.targets[T].shards[S2].pending][1:] == [
        "CREATE TABLE orders (id INT PRIMARY KEY, a INT NOT NULL, z INT)",
        "ALTER TABLE orders ADD COLUMN w INT",
    ]
    out = c.command(parse_command(f"unlock {T} --shard {S2} --action skip"))
    st = c.targets[T].shards[S2]
    assert st.schema.column_names() == ("id", "a", "z", "w") and not st.pending
    assert [d.statement for d in out if isinstance(d, ApplyDDL)] == [
        "ALTER TABLE `orders` ADD COLUMN `z` INT NULL AFTER `b`",
        "ALTER TABLE `orders` ADD COLUMN `w` INT NULL AFTER `z`",
    ]


def swap(policy: dict[str, str]) -> tuple[Coordinator, list[object]]:
    """Two shard tables of one database swap names through a third (one statement)."""
    a, b = ShardId.parse("s1.db1.orders_a"), ShardId.parse("s1.db1.orders_b")
    c = Coordinator(Router((Route(T, table="orders_*"),)),
                    {T: TargetConfig("optimistic", False, Policy.of(policy))})  # fmt: skip
    c.register(a, parse_create_table("CREATE TABLE orders_a (id INT PRIMARY KEY, x INT)"))
    c.register(b, parse_create_table("CREATE TABLE orders_b (id INT PRIMARY KEY, x INT, y INT)"))
    sql = "RENAME TABLE orders_a TO orders_t, orders_b TO orders_a, orders_t TO orders_b"
    return c, c.on_ddl(a, sql, 5)


def test_a_failed_rename_table_holds_the_statement_whole_and_taking_it_forwards_it() -> None:
    forwarded, _ = swap({})
    c, out = swap({"rename_table": "fail"})
    a, b = ShardId.parse("s1.db1.orders_a"), ShardId.parse("s1.db1.orders_b")
    assert kinds_of(out) == ["Hold", "Hold"]
    assert c.route_row(a).action == "hold" and c.route_row(b).action == "hold"
    state = json.loads(json.dumps(snapshot(c)))
    c = restore(state, c.router, c.configs)
    out = c.command(parse_command(f"unlock {T} --shard {b} --action exec"))
    assert "Rename" in kinds_of(out) and c.locks()[0].stage == "none"
    assert not any(s.pending for s in c.targets[T].shards.values())
    names = {s.table: st.schema.column_names() for s, st in c.targets[T].shards.items()}
    assert names == {"orders_a": ("id", "x", "y"), "orders_b": ("id", "x")}  # swapped
    assert names == {
        s.table: st.schema.column_names() for s, st in forwarded.targets[T].shards.items()
    }


def test_force_remove_takes_a_held_table_statement() -> None:
    c = coord("pessimistic", {"drop_table": "fail"})
    c.on_ddl(S2, "DROP TABLE orders", 1)
    c.command(parse_command(f"unlock {T} --force-remove"))
    assert S2 not in c.targets[T].shards and c.locks()[0].stage == "none"
