"""A type change whose rows arrive before its DDL: the schema fingerprint tells.

Positions here are step numbers (a shard's stream order), as in the memory engine.
"""

from __future__ import annotations

from coordinator import (
    Coordinator,
    Hold,
    Release,
    Route,
    Router,
    ShardId,
    TargetConfig,
    TargetId,
    restore,
    snapshot,
)
from schemas import parse_create_table

T = TargetId("shardddl", "tb")
S1, S2 = ShardId.parse("s1.db1.tb1"), ShardId.parse("s2.db1.tb1")


def coord() -> Coordinator:
    c = Coordinator(Router((Route(T),)), {T: TargetConfig("optimistic", False)})
    for s in (S1, S2):
        c.register(s, parse_create_table("CREATE TABLE tb1 (id INT PRIMARY KEY, a INT)"))
    return c


def test_rows_with_the_fingerprint_they_always_had_write() -> None:
    c = coord()
    assert c.schema_fingerprints(S1, [(1, "fp-int")]) == []
    assert c.schema_fingerprints(S1, [(2, "fp-int"), (3, "fp-int")]) == []
    assert c.route_row(S1).action == "write"


def test_a_changed_fingerprint_waits_for_its_ddl_and_the_ddl_releases_it() -> None:
    c = coord()
    c.schema_fingerprints(S1, [(1, "fp-int")])
    # a MODIFY a BIGINT ran at position 5 upstream; its rows (from 6) came first
    out = c.schema_fingerprints(S1, [(2, "fp-int"), (6, "fp-bigint")])
    assert [type(d) for d in out] == [Hold]
    assert isinstance(out[0], Hold) and out[0].position == 6
    assert "fingerprint" in out[0].reason and "fp-bigint" in out[0].reason
    assert c.route_row(S1).action == "hold"
    assert c.locks()[0].stage == "waiting"
    # more rows of the new schema while waiting change nothing
    assert c.schema_fingerprints(S1, [(7, "fp-bigint")]) == []
    out = c.on_ddl(S1, "ALTER TABLE tb1 MODIFY a BIGINT", 5)
    assert any(isinstance(d, Release) and d.shard == S1 for d in out)
    assert c.route_row(S1).action == "write"
    # rows after the DDL teach the new fingerprint; late rows from before it teach nothing
    assert c.schema_fingerprints(S1, [(4, "fp-int"), (6, "fp-bigint"), (8, "fp-bigint")]) == []
    state = c.shard_state(S1)
    assert state is not None and state.fingerprint == "fp-bigint"


def test_order_of_the_batch_does_not_matter() -> None:
    c = coord()
    out = c.schema_fingerprints(S1, [(9, "fp-new"), (1, "fp-old")])
    assert [getattr(d, "position", None) for d in out] == [9]


def test_each_shard_has_its_own_fingerprint() -> None:
    c = coord()
    assert c.schema_fingerprints(S1, [(1, "fp-a")]) == []
    assert c.schema_fingerprints(S2, [(1, "fp-b")]) == []  # another shard, another connector
    assert c.locks()[0].stage == "none"


def test_the_fingerprint_survives_a_restart() -> None:
    c = coord()
    c.schema_fingerprints(S1, [(1, "fp-int")])
    again = restore(snapshot(c), c.router, c.configs)
    out = again.schema_fingerprints(S1, [(3, "fp-bigint")])
    assert [type(d) for d in out] == [Hold]


def test_a_gh_ost_cut_over_is_the_change_the_rows_after_it_follow() -> None:
    # The cut-over RENAME carries no ALTER of tb1 itself, yet tb1's rows after it are the
    # shadow's, of the new schema: they teach the new fingerprint instead of waiting.
    c = coord()
    assert c.schema_fingerprints(S1, [(1, "fp-int")]) == []
    shadow = ShardId.parse("s1.db1._tb1_gho")
    c.on_ddl(shadow, "CREATE TABLE _tb1_gho (id INT PRIMARY KEY, a INT)", 2)
    c.on_ddl(shadow, "ALTER TABLE _tb1_gho MODIFY a BIGINT", 3)
    c.on_ddl(S1, "RENAME TABLE tb1 TO _tb1_del, _tb1_gho TO tb1", 5)
    assert c.schema_fingerprints(S1, [(4, "fp-int"), (6, "fp-bigint")]) == []
    assert c.route_row(S1).action == "write"
    assert c.locks()[0].stage == "none"


def test_an_operator_skip_of_the_wait_learns_the_fingerprint_again() -> None:
    from coordinator.commands import parse_command

    c = coord()
    c.schema_fingerprints(S1, [(1, "fp-int")])
    assert [type(d) for d in c.schema_fingerprints(S1, [(6, "fp-bigint")])] == [Hold]
    # No DDL will come (say, the connector lost it): the operator lets the rows go.
    c.command(parse_command(f"unlock {T} --shard {S1} --action skip"))
    assert c.route_row(S1).action == "write"
    # The rows after the skip carry the new fingerprint; they do not wait again.
    assert c.schema_fingerprints(S1, [(7, "fp-bigint")]) == []
    assert c.locks()[0].stage == "none"
