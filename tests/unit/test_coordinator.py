"""The locks step by step: which decisions each event produces, in which order."""

from __future__ import annotations

import pytest

from coordinator import (
    ApplyDDL,
    ConflictError,
    Coordinator,
    CreateTarget,
    Extract,
    Hold,
    Release,
    Route,
    Router,
    ShardId,
    TargetConfig,
    TargetId,
    Truncate,
    parse_command,
    restore,
    snapshot,
)
from coordinator.commands import CommandError
from coordinator.locks import OperatorError
from coordinator.optimistic import terminated
from coordinator.routing import TableKind
from schemas import compare, join, parse_create_table
from schemas.errors import Incompatible

T = TargetId("shardddl", "tb")
S1, S2, S3 = (ShardId.parse(s) for s in ("s1.db1.tb1", "s2.db1.tb1", "s2.db1.tb2"))
BASE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR(10))"


NO_EXTRACT = Extract()


def coord(mode: str = "optimistic", shards=(S1, S2, S3), strict=False, extract=NO_EXTRACT):
    c = Coordinator(Router((Route(T, extract=extract),)), {T: TargetConfig(mode, strict)})
    for s in shards:
        c.register(s, parse_create_table(BASE.format(t=s.table)))
    return c


def kinds(decisions) -> list[str]:
    return [type(d).__name__ for d in decisions]


def stage(c: Coordinator) -> str:
    return c.locks()[0].stage


# --- registration and routing ---------------------------------------------------------


def test_first_shard_creates_the_target_and_others_join_silently():
    c = Coordinator(Router((Route(T),)))
    first = c.register(S1, parse_create_table(BASE.format(t="tb1")))
    assert kinds(first) == ["CreateTarget"]
    assert isinstance(first[0], CreateTarget) and first[0].schema.column_names() == ("id", "a", "b")
    assert c.register(S2, parse_create_table(BASE.format(t="tb1"))) == []


def test_shadow_and_trash_tables_are_never_routed_even_by_a_catch_all_rule():
    router = Router((Route(T),))
    assert router.kind(ShardId.parse("s1.db1._tb1_gho")) is TableKind.SHADOW
    assert router.kind(ShardId.parse("s1.db1._tb1_new")) is TableKind.SHADOW
    assert router.kind(ShardId.parse("s1.db1._tb1_del")) is TableKind.TRASH
    assert router.kind(ShardId.parse("s1.db1._tb1_ghc")) is TableKind.TRASH
    assert router.kind(ShardId.parse("s1.db1.tb1")) is TableKind.SHARD
    assert Router((Route(T, table="orders_*"),)).kind(S1) is TableKind.UNROUTED


def test_first_matching_route_wins():
    other = TargetId("x", "y")
    router = Router((Route(other, source="s2", table="tb2"), Route(T)))
    assert router.target(S3) == other
    assert router.target(S2) == T


def test_rows_of_unregistered_routed_tables_are_reported_not_dropped():
    c = coord(shards=(S1,))
    assert c.route_row(S2).action == "unknown"
    assert c.route_row(ShardId.parse("s1.db1._tb1_gho")).action == "drop"


def test_shards_whose_rows_wait_without_a_ddl_lock_are_listed_with_why():
    c = coord(shards=(S1, S3))
    assert c.waiting() == []
    # S2's rows came before its CREATE TABLE; S1's rows carry a change whose DDL is late
    assert kinds(c.await_ddl(S2, 7, "x")) == ["Hold"]
    assert kinds(c.await_ddl(S1, 9, "rows ahead")) == ["Hold"]
    assert [(w.target, w.shard, w.kind, w.since) for w in c.waiting()] == [
        (T, S1, "ahead_of_ddl", 9),
        (T, S2, "before_create", 7),
    ]
    assert "CREATE TABLE" in c.waiting()[1].reason
    kept = restore(snapshot(c), c.router, {T: TargetConfig("optimistic")})
    assert kept.waiting() == c.waiting()  # kept in the saved state
    c.register(S2, parse_create_table("CREATE TABLE tb1 (a INT PRIMARY KEY, b INT)"), 8)
    assert [w.shard for w in c.waiting()] == [S1]
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN c INT", 10)  # its DDL arrives: no longer waiting
    assert c.waiting() == []


# --- optimistic -----------------------------------------------------------------------


def test_optimistic_add_column_runs_at_once_and_holds_nothing():
    c = coord()
    d = c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN c INT", 10)
    assert kinds(d) == ["ApplyDDL"]
    assert isinstance(d[0], ApplyDDL)
    assert d[0].statement == "ALTER TABLE `tb` ADD COLUMN `c` INT NULL AFTER `b`"
    assert d[0].schema.has_column("c")
    assert c.route_row(S1).action == "write" and stage(c) == "none"
    assert c.on_ddl(S2, "ALTER TABLE tb1 ADD COLUMN c INT", 11) == []


def test_optimistic_drop_column_runs_when_the_last_shard_drops_it():
    c = coord()
    assert c.on_ddl(S1, "ALTER TABLE tb1 DROP COLUMN b", 1) == []
    assert c.on_ddl(S2, "ALTER TABLE tb1 DROP COLUMN b", 2) == []
    d = c.on_ddl(S3, "ALTER TABLE tb2 DROP COLUMN b", 3)
    assert [s.__class__.__name__ for s in d[0].specs] == ["DropColumn"]
    assert not d[0].schema.has_column("b")


def test_optimistic_rename_waits_for_every_shard_then_runs_once_and_replays_in_hold_order():
    c = coord()
    d1 = c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 5)
    assert d1 == [Hold(T, S1, 1, 5, d1[0].reason)]
    assert "CHANGE a c INT" in d1[0].reason
    assert stage(c) == "waiting" and c.route_row(S1).action == "hold"
    d2 = c.on_ddl(S2, "ALTER TABLE tb1 CHANGE a c INT", 6)
    assert kinds(d2) == ["Hold"]
    d3 = c.on_ddl(S3, "ALTER TABLE tb2 CHANGE a c INT", 7)
    # The last shard is held and released in the same call: its stash is empty.
    assert kinds(d3) == ["Hold", "ApplyDDL", "Release", "Release", "Release"]
    apply_ddl = d3[1]
    assert isinstance(apply_ddl, ApplyDDL)
    assert apply_ddl.statement.startswith("ALTER TABLE `tb` CHANGE COLUMN `a` `c` INT")
    assert [r.shard for r in d3 if isinstance(r, Release)] == [S1, S2, S3]
    assert stage(c) == "none" and c.locks()[0].blocked == ()


def test_optimistic_conflict_ddl_condition_two_keeps_waiting_while_any_shard_has_the_old_column():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1)
    t = c.targets[T]
    assert terminated(t) is None


def test_optimistic_rename_to_different_names_is_a_conflict_naming_both_statements():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1)
    c.on_ddl(S2, "ALTER TABLE tb1 CHANGE a d INT", 2)
    lock = c.locks()[0]
    assert lock.stage == "conflict"
    assert lock.conflict is not None
    assert "CHANGE a c INT" in lock.conflict and "CHANGE a d INT" in lock.conflict
    assert set(lock.blocked) == {S1, S2}


def test_optimistic_impossible_join_is_a_conflict_with_the_schema_path():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN x INT", 1)
    d = c.on_ddl(S2, "ALTER TABLE tb1 ADD COLUMN x VARCHAR(10)", 2)
    assert kinds(d) == ["Hold"]
    assert c.locks()[0].stage == "conflict"
    assert 'at column "x"' in (c.locks()[0].conflict or "")


def test_strict_mode_raises_a_conflict_error_naming_shard_and_statement():
    c = coord(strict=True)
    with pytest.raises(ConflictError, match=r"conflict.*s1\.db1\.tb1.*CHANGE a c INT"):
        c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1)


def test_ddl_of_a_held_shard_is_queued_and_processed_after_release():
    c = coord(shards=(S1, S2))
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1)
    assert c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN d INT", 3) == []
    d = c.on_ddl(S2, "ALTER TABLE tb1 CHANGE a c INT", 4)
    assert kinds(d) == ["Hold", "ApplyDDL", "Release", "ApplyDDL", "Release", "Release"]
    assert d[2] == Release(T, S1, 1, until=3)
    assert d[4] == Release(T, S1, 1, until=None)
    assert d[5] == Release(T, S2, 1, until=None)


def test_unparseable_ddl_holds_in_conflict_with_the_parser_reason_and_exec_is_refused():
    c = coord()
    d = c.on_ddl(S1, "ALTER TABLE tb1 FROBNICATE a", 1)
    assert kinds(d) == ["Hold"]
    lock = c.locks()[0]
    assert lock.stage == "conflict" and "FROBNICATE" in (lock.conflict or "")
    with pytest.raises(OperatorError, match="replace"):
        c.command(parse_command(f"unlock {T} --shard {S1} --action exec"))


def test_skip_keeps_the_old_schema_and_projects_the_replay():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN x INT", 1)
    c.on_ddl(S2, "ALTER TABLE tb1 ADD COLUMN x VARCHAR(10)", 2)
    d = c.command(parse_command(f"unlock {T} --shard {S2} --action skip"))
    assert d == [Release(T, S2, 1, None, project=True)]
    assert c.route_row(S2).project is True
    assert not c.targets[T].shards[S2].schema.has_column("x")
    assert stage(c) == "none"


def test_operator_errors_name_what_is_held():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1)
    with pytest.raises(OperatorError, match=r"s2\.db1\.tb1 is not held.*held: s1\.db1\.tb1"):
        c.command(parse_command(f"unlock {T} --shard {S2} --action skip"))
    with pytest.raises(OperatorError, match="no target"):
        c.command(parse_command(f"unlock nowhere.tb --shard {S2} --action skip"))


def test_truncate_needs_extract_columns_that_tell_the_shard_apart():
    with_source = coord(extract=Extract(source_column="_source"))
    # s2 has two tables: the source column alone cannot tell them apart.
    d = with_source.on_ddl(S2, "TRUNCATE TABLE tb1", 1)
    assert kinds(d) == ["Hold"] and "extract" in (with_source.locks()[0].conflict or "")
    d = with_source.on_ddl(S1, "TRUNCATE TABLE tb1", 2)
    # The TRUNCATE's own position: the shard's rows before it are gone too.
    assert d == [Truncate(T, S1, 1, (("_source", "s1"),), 2)]


def test_drop_and_recreate_gives_a_new_table_version():
    c = coord()
    c.on_ddl(S1, "DROP TABLE tb1", 1)
    assert c.route_row(S1).action == "unknown"
    c.on_ddl(S1, BASE.format(t="tb1"), 2)
    assert c.route_row(S1).version == 2


# --- pessimistic ----------------------------------------------------------------------


def test_pessimistic_holds_each_shard_until_all_ran_the_same_ddl():
    c = coord("pessimistic")
    assert kinds(c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN c INT", 1)) == ["Hold"]
    assert kinds(c.on_ddl(S2, "alter table `tb1` add `C` int(11)", 2)) == ["Hold"]
    d = c.on_ddl(S3, "ALTER TABLE tb2 ADD c INT", 3)
    assert kinds(d) == ["Hold", "ApplyDDL", "Release", "Release", "Release"]
    assert stage(c) == "none"


def test_pessimistic_different_ddl_at_the_same_position_is_a_conflict():
    c = coord("pessimistic")
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN c INT", 1)
    c.on_ddl(S2, "ALTER TABLE tb1 ADD COLUMN c BIGINT", 2)
    lock = c.locks()[0]
    assert lock.stage == "conflict"
    assert "ADD COLUMN c BIGINT" in (lock.conflict or "") and "s1.db1.tb1" in (lock.conflict or "")


def test_pessimistic_column_position_is_part_of_the_ddl():
    c = coord("pessimistic", shards=(S1, S2))
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN c INT FIRST", 1)
    c.on_ddl(S2, "ALTER TABLE tb1 ADD COLUMN c INT", 2)
    assert stage(c) == "conflict"


def test_pessimistic_truncate_with_extract_holds_nothing():
    c = coord("pessimistic", extract=Extract(db_column="_db", table_column="_t"))
    assert kinds(c.on_ddl(S3, "TRUNCATE TABLE tb2", 1)) == ["Truncate"]
    assert stage(c) == "none"


# --- gh-ost ---------------------------------------------------------------------------


def test_gh_ost_cut_over_turns_into_the_recorded_ddl_on_the_real_table():
    c = coord(shards=(S1, S2))
    gho = ShardId.parse("s1.db1._tb1_gho")
    assert c.on_ddl(gho, "CREATE TABLE _tb1_gho LIKE tb1", 1) == []
    assert c.on_ddl(gho, "ALTER TABLE _tb1_gho ADD COLUMN c INT", 2) == []
    d = c.on_ddl(S1, "RENAME TABLE tb1 TO _tb1_del, _tb1_gho TO tb1", 3)
    assert kinds(d) == ["ApplyDDL"] and d[0].schema.has_column("c")
    assert c.targets[T].shards[S1].schema.has_column("c")
    assert c.ghosts == {}


GHO = ShardId.parse("s1.db1._tb1_gho")
CUT_OVER = "RENAME TABLE tb1 TO _tb1_del, _tb1_gho TO tb1"


def test_a_migration_begun_before_the_job_cuts_over_as_its_schema_difference():
    c = coord(shards=(S1, S2))
    # the snapshot has the shadow with its ALTER applied: no ALTER statement is ever seen
    shadow = "CREATE TABLE _tb1_gho (id INT PRIMARY KEY, a BIGINT, b VARCHAR(10), c INT)"
    assert c.register(GHO, parse_create_table(shadow)) == []
    d = c.on_ddl(S1, CUT_OVER, 3)
    assert kinds(d) == ["ApplyDDL"]
    assert d[0].schema.has_column("c") and d[0].schema.column("a").type.type_sql() == "BIGINT"
    assert c.ghosts == {}


def test_a_shadow_with_the_real_schema_changes_nothing_at_its_cut_over():
    c = coord(shards=(S1, S2))
    c.register(GHO, parse_create_table(BASE.format(t="_tb1_gho")))
    assert c.on_ddl(S1, CUT_OVER, 3) == []
    assert stage(c) == "none" and c.ghosts == {}


def test_a_begun_migration_that_drops_and_adds_columns_waits_with_the_statement():
    c = coord(shards=(S1, S2))
    c.register(
        GHO, parse_create_table("CREATE TABLE _tb1_gho (id INT PRIMARY KEY, a2 INT, b VARCHAR(10))")
    )
    c.on_ddl(S1, CUT_OVER, 3)
    lock = c.locks()[0]
    assert lock.stage == "conflict" and list(lock.blocked) == [S1]
    text = lock.conflict or ""
    assert "DROP COLUMN `a`" in text and "ADD COLUMN `a2`" in text
    assert "a column rename cannot be told" in text and "--action replace" in text


def test_a_cut_over_from_a_shadow_never_seen_waits_for_the_operator():
    c = coord(shards=(S1, S2))
    c.on_ddl(S1, CUT_OVER, 3)
    lock = c.locks()[0]
    assert lock.stage == "conflict" and list(lock.blocked) == [S1]
    assert "the job never saw that table" in (lock.conflict or "")


# --- an at-least-once upstream ------------------------------------------------------


def binlog(pos: int, file: str = "mysql-bin.000007", at: int | None = None) -> list[object]:
    """(file, position, row, commit time ms); by default the time grows with the position."""
    return [file, pos, -1, 1_700_000_000_000 + pos * 1000 if at is None else at]


def test_a_ddl_sent_again_is_recognised_by_its_origin_and_a_newer_one_is_not():
    c = coord()
    rename = "ALTER TABLE tb1 CHANGE a c INT"
    assert not c.resent(S1, rename, binlog(100))
    c.on_ddl(S1, rename, 1, binlog(100))
    # the same statement from the same binlog place, with a new Kafka position
    assert c.resent(S1, rename, binlog(100))
    # an older statement of the same table, sent again with it
    assert c.resent(S1, "ALTER TABLE tb1 ADD COLUMN z INT", binlog(40))
    # another shard's statement at that origin is its own
    assert not c.resent(S2, rename, binlog(100))
    # a later statement, and a different statement at the very same origin (a snapshot
    # gives every statement one position) are new
    assert not c.resent(S1, "ALTER TABLE tb1 ADD COLUMN d INT", binlog(101))
    assert not c.resent(S1, "ALTER TABLE tb1 ADD COLUMN d INT", binlog(100))
    # without an origin nothing is ever called a re-send
    assert not c.resent(S1, rename, None)
    # the next binlog file is later than any position of the one before
    assert not c.resent(S1, rename, binlog(4, "mysql-bin.000008", at=binlog(101)[3]))


def test_a_binlog_started_again_after_a_failover_is_not_taken_for_a_resend():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN d INT", 1, binlog(9000, "mysql-bin.000042"))
    # a new server's binlog begins at its first file again, later in time
    later = binlog(500, "mysql-bin.000001", at=binlog(9000)[3] + 60_000)
    assert not c.resent(S1, "ALTER TABLE tb1 CHANGE a c INT", later)
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 2, later)
    # and that statement, sent again, is known from then on
    assert c.resent(S1, "ALTER TABLE tb1 CHANGE a c INT", later)
    assert c.resent(
        S1, "ALTER TABLE tb1 ADD COLUMN e INT", binlog(400, "mysql-bin.000001", at=later[3])
    )


def test_a_resent_truncate_is_recognised_after_the_rows_written_since():
    c = coord(extract=Extract(table_column="tbl"))
    c.on_ddl(S1, "TRUNCATE TABLE tb1", 5, binlog(300))
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN d INT", 6, binlog(400))
    assert c.resent(S1, "TRUNCATE TABLE tb1", binlog(300))


def test_statements_of_two_streams_are_compared_only_within_each():
    # A TRUNCATE on the table's own topic was read before an earlier ALTER on the
    # schema-change topic: the ALTER is new; each stream knows its own re-sends.
    c = coord(extract=Extract(table_column="tbl"))
    c.on_ddl(S1, "TRUNCATE TABLE tb1", 1, binlog(500), "s1.db1.tb1[0]")
    assert not c.resent(S1, "ALTER TABLE tb1 ADD COLUMN d INT", binlog(400), "s1[0]")
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN d INT", 2, binlog(400), "s1[0]")
    assert c.resent(S1, "ALTER TABLE tb1 ADD COLUMN d INT", binlog(400), "s1[0]")
    assert c.resent(S1, "TRUNCATE TABLE tb1", binlog(500), "s1.db1.tb1[0]")


def test_a_dropped_table_remembers_its_ddl_origin_so_a_resent_create_is_not_a_new_table():
    c = coord()
    c.on_ddl(S1, "DROP TABLE tb1", 1, binlog(10))
    c.on_ddl(S1, BASE.format(t="tb1"), 2, binlog(20))
    c.on_ddl(S1, "DROP TABLE tb1", 3, binlog(30))
    assert c.resent(S1, BASE.format(t="tb1"), binlog(20))
    assert c.route_row(S1).action == "unknown"


def test_ddl_origins_survive_the_saved_state():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1, binlog(100))
    r = restore(snapshot(c), c.router, {T: TargetConfig("optimistic")})
    assert snapshot(r) == snapshot(c)
    assert r.resent(S1, "ALTER TABLE tb1 CHANGE a c INT", binlog(100))
    assert not r.resent(S1, "ALTER TABLE tb1 CHANGE a c INT", binlog(101))


# --- commands, state ------------------------------------------------------------------


@pytest.mark.parametrize(
    "words",
    [
        "unlock shardddl.tb --action skip",
        "unlock shardddl.tb --shard s1.db1.tb1",
        "unlock shardddl.tb --shard s1.db1.tb1 --action skip --force-remove",
        "unlock shardddl --shard s1.db1.tb1 --action skip",
        "unlock shardddl.tb --shard s1.tb1 --action skip",
        "lock shardddl.tb",
        "unlock shardddl.tb --shard s1.db1.tb1 --action drop",
    ],
)
def test_malformed_commands_say_what_is_expected(words: str):
    with pytest.raises(CommandError, match="expected unlock TARGET"):
        parse_command(words)


def test_commands_round_trip_through_their_words():
    for words in (
        "unlock shardddl.tb --shard s1.db1.tb1 --action skip",
        "unlock shardddl.tb --shard s1.db1.tb1 --action exec",
        "unlock shardddl.tb --force-remove",
        "unlock shardddl.tb --shard s1.db1.tb1 --replace 'ALTER TABLE t ADD c INT'",
    ):
        assert parse_command(words).words() == words


def test_restored_state_decides_like_the_original():
    c = coord()
    c.on_ddl(S1, "ALTER TABLE tb1 CHANGE a c INT", 1)
    c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN d INT", 2)
    r = restore(snapshot(c), c.router, {T: TargetConfig("optimistic")})
    assert snapshot(r) == snapshot(c)
    for x in (c, r):
        x.on_ddl(S2, "ALTER TABLE tb1 CHANGE a c INT", 3)
    assert c.on_ddl(S3, "ALTER TABLE tb2 CHANGE a c INT", 4) == r.on_ddl(
        S3, "ALTER TABLE tb2 CHANGE a c INT", 4
    )


def test_state_of_another_format_or_version_is_refused_with_advice():
    from coordinator.state import StateError

    data = snapshot(coord())
    with pytest.raises(StateError, match="version"):
        restore({**data, "version": 99}, Router((Route(T),)))


# --- termination equals the seed's check as written ---------------------------------


def naive_terminated(states, posts) -> bool:
    finals = [s.final for s in states]
    try:
        joined = finals[0]
        for f in finals[1:]:
            joined = join(joined, f)
    except Incompatible:
        return False
    for x in posts:
        try:
            compare(joined, x.schema)
            return False
        except Incompatible:
            pass
    for x in posts:
        for y in states:
            try:
                larger = join(x.schema, y.final)
            except Incompatible:
                larger = y.final
            try:
                if compare(larger, x.post) < 0:
                    return False
            except Incompatible:
                return False
    return True


RENAMES = [
    "ALTER TABLE {t} CHANGE a c INT",
    "ALTER TABLE {t} CHANGE a d INT",
    "ALTER TABLE {t} MODIFY a DOUBLE",
    "ALTER TABLE {t} ADD COLUMN n INT NOT NULL",
    "ALTER TABLE {t} CHANGE b c VARCHAR(10)",
]


def random_lock(seed: int):
    """A lock where most shards made one conflict change, some another, some none."""
    import random

    from schemas import apply, parse_ddl

    rng = random.Random(seed)
    shards = [ShardId("s", "db", f"t{i}") for i in range(rng.randint(2, 7))]
    c = coord(shards=shards)
    t = c.targets[T]
    common = rng.choice(RENAMES)
    for shard in shards:
        r = rng.random()
        ddl = common if r < 0.85 else rng.choice(RENAMES) if r < 0.95 else None
        if ddl is not None:
            st = t.shards[shard]
            st.post = apply(parse_ddl(ddl.format(t=shard.table))[0], st.schema)
            st.pending = [object()]  # type: ignore[list-item]
    states = list(t.shards.values())
    return t, states, [s for s in states if s.post is not None]


SEEDS = range(80)


@pytest.mark.parametrize("seed", SEEDS)
def test_deduplicated_termination_agrees_with_the_seed_algorithm(seed: int):
    t, states, posts = random_lock(seed)
    if posts:
        assert (terminated(t) is not None) == naive_terminated(states, posts)


def test_the_random_locks_both_terminate_and_do_not():
    outcomes = {naive_terminated(s, p) for _, s, p in map(random_lock, SEEDS) if p}
    assert outcomes == {True, False}


# --- a downstream change the sink refuses ---------------------------------------------


def test_a_refused_downstream_change_holds_the_target_until_retry():
    c = coord("pessimistic", shards=(S1, S2))
    c.on_ddl(S1, "ALTER TABLE tb1 MODIFY a VARCHAR(20)", ["f", 1, 0, 1, 1])
    out = c.on_ddl(S2, "ALTER TABLE tb1 MODIFY a VARCHAR(20)", ["f", 2, 0, 2, 2])
    assert kinds(out) == ["Hold", "ApplyDDL", "Release", "Release"]
    out = out[1:]  # as the job does: the refused change and what follows it wait
    c.refuse(T, out, "cannot change a from INT to STRING; fix it, then --retry")
    view = c.locks()[0]
    assert view.stage == "conflict" and "--retry" in (view.conflict or "")
    assert list(view.blocked) == [S1, S2]
    assert c.route_row(S2).action == "hold" and c.route_row(S1).action == "hold"
    # A later DDL's decisions wait with the refused change, in order.
    later = c.on_ddl(S1, "ALTER TABLE tb1 ADD COLUMN z INT", ["f", 3, 0, 3, 3])
    assert later == []
    # The state keeps the refusal and what waits with it.
    c = restore(snapshot(c), c.router, {T: TargetConfig("pessimistic", False)})
    assert c.locks()[0].stage == "conflict"
    retried = c.command(parse_command("unlock shardddl.tb --retry"))
    assert kinds(retried) == ["ApplyDDL", "Release", "Release", "Hold", "Release", "Release"]
    assert retried[:3] == out
    # Every shard's waiting rows are released: S1 up to its new hold, S2 entirely.
    releases = {d.shard: d.until for d in retried[4:] if isinstance(d, Release)}
    assert releases == {S1: ["f", 3, 0, 3, 3], S2: None}
    assert c.locks()[0].stage == "waiting"  # S1's ADD COLUMN now waits for S2, as usual
    assert c.route_row(S2).action == "write"


def test_retry_without_a_refusal_is_an_operator_error():
    c = coord("optimistic", shards=(S1, S2))
    with pytest.raises(OperatorError, match="no refused downstream change"):
        c.command(parse_command("unlock shardddl.tb --retry"))


def test_a_new_table_without_a_charset_clause_matches_a_snapshot_spelled_schema():
    # A snapshot spells the table charset out (SHOW CREATE TABLE); a CREATE TABLE from the
    # binlog often does not: the database default, not a difference.
    c = Coordinator(Router((Route(T),)), {T: TargetConfig("pessimistic", False)})
    c.register(
        S1,
        parse_create_table(
            "CREATE TABLE `tb1` (`id` int(11) NOT NULL, `a` int(11) DEFAULT NULL, "
            "PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
            "COLLATE=utf8mb4_general_ci"
        ),
    )
    c.on_ddl(S3, "CREATE TABLE tb2 (id INT PRIMARY KEY, a INT)", ["f", 1, 0, 1, 1])
    assert c.locks()[0].stage == "none"
    c.on_ddl(S2, "CREATE TABLE tb1 (id INT PRIMARY KEY, a BIGINT)", ["f", 2, 0, 2, 2])
    assert c.locks()[0].stage == "conflict"  # a real difference still is one


# --- a shard renamed within its target ---------------------------------------------------


def test_a_rename_within_the_target_says_where_the_rows_go():
    from coordinator.decisions import Rename

    c = coord(extract=Extract(db_column="_db", table_column="_table"))
    out = c.on_ddl(S3, "RENAME TABLE db1.tb2 TO db9.tb7", ("f", 1))
    new = ShardId("s2", "db9", "tb7")
    assert out == [
        Rename(T, S3, new, 1, (("_db", "db1"), ("_table", "tb2")),
               (("_db", "db9"), ("_table", "tb7")), ("f", 1))
    ]  # fmt: skip
    assert new in c.where and S3 not in c.where
    # s1.db1.tb1 and s2.db1.tb1 have the same database and table: their rows cannot be told
    # apart downstream, and a rename of one rewrites none of them.
    (d,) = c.on_ddl(S1, "RENAME TABLE db1.tb1 TO db9.tb1", ("f", 2))
    assert isinstance(d, Rename) and (d.match, d.values) == ((), ())
    c = coord(extract=Extract(db_column="_db"))
    (d,) = c.on_ddl(S3, "RENAME TABLE tb2 TO tb5", ("f", 2))
    assert isinstance(d, Rename) and d.match == d.values == ()  # same database: nothing moves
    (d,) = c.on_ddl(S2, "RENAME TABLE db1.tb1 TO db8.tb1", ("f", 3))
    assert (d.match, d.values) == ((), ())  # s2.db1 also names s2.db1.tb5: not told apart
    # Without extract columns the rows are the shard's own keys; the held rows still follow.
    (d,) = coord().on_ddl(S1, "RENAME TABLE tb1 TO tb9", ("f", 4))
    assert isinstance(d, Rename) and d.new == ShardId("s1", "db1", "tb9") and d.match == ()


def test_a_rename_waiting_on_a_refused_target_survives_the_saved_state():
    from coordinator.decisions import Rename
    from coordinator.state import _decision_from_json, _Reader, _Writer

    d = Rename(T, S1, ShardId("s1", "db9", "tb1"), 3, (("_db", "db1"),), (("_db", "db9"),),
               ["mysql-bin.000002", 4, 0, 17])  # fmt: skip
    raw = _Writer().decision(d)
    assert _decision_from_json(raw, _Reader([], [])) == d
