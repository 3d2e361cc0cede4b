"""The lock's index against the full rescans it replaced, on random histories.

Every view the lock rules read (held shards in hold order, conflict, stage, the distinct
schemas and final schemas, the groups of conflict DDLs, the counts) is kept up to date by
``coordinator/index.py`` instead of being computed from every shard. The reference
functions below are those rescans, as they were written before the index. A random history
of registrations, DDLs (column changes, conflict DDLs, unparseable statements, TRUNCATE,
CREATE/DROP/RENAME TABLE, DROP DATABASE, gh-ost cut-overs), rows ahead of their DDL,
refused downstream changes and operator commands runs on three coordinators: one as shipped,
one whose views and settle rules are the references, and one restored from the shipped
one's state before each step (its index built in one pass, then kept up to date). After
every step the three took the same decisions and have the same state, and the shipped and
restored ones' views equal the references'.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator import (
    ApplyDDL,
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
from coordinator.optimistic import OptimisticRules, contradiction, terminated
from coordinator.pessimistic import PessimisticRules
from coordinator.target import ShardState, Target
from schemas import apply, compare, join, parse_create_table
from schemas.changes import AlterTable
from schemas.errors import Incompatible, SchemaError
from shardmerge.errors import ShardMergeError

T = TargetId("shop", "orders")
BASE = "CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR(10))"
SHARDS = [
    ShardId("s1", "db1", "t1"),
    ShardId("s1", "db1", "t2"),
    ShardId("s1", "db2", "t1"),
    ShardId("s2", "db1", "t1"),
    ShardId("s2", "db1", "t3"),
    ShardId("s1", "db1", "t4"),
]
DDLS = [
    "ALTER TABLE {t} ADD COLUMN c INT",
    "ALTER TABLE {t} ADD COLUMN n INT NOT NULL",
    "ALTER TABLE {t} DROP COLUMN b",
    "ALTER TABLE {t} CHANGE a c INT",
    "ALTER TABLE {t} CHANGE a c INT",
    "ALTER TABLE {t} CHANGE a d INT",
    "ALTER TABLE {t} MODIFY a BIGINT",
    "ALTER TABLE {t} MODIFY a TINYINT",
    "ALTER TABLE {t} MODIFY a VARCHAR(10)",
    "ALTER TABLE {t} FROBNICATE",
    "TRUNCATE TABLE {t}",
    "DROP TABLE {t}",
    BASE,
    "CREATE TABLE {t} (id INT PRIMARY KEY, a VARCHAR(5))",
    "RENAME TABLE {t} TO {u}",
    "CREATE TABLE _{t}_gho LIKE {t}",
    "ALTER TABLE _{t}_gho ADD COLUMN g INT",
    "RENAME TABLE {t} TO _{t}_del, _{t}_gho TO {t}",
    "DROP DATABASE db2",
]
EXTRACTS = [Extract(), Extract(table_column="tb"), Extract("src", "db", "tb")]
ALTERS = 9  # the first DDLS change columns: a rollout runs one of them on every shard
KINDS = ["register", "ddl", "ddl", "ddl", "rollout", "rollout", "await", "skip", "exec"]
KINDS += ["replace", "force-remove", "retry", "refuse"]


# --- the full rescans the index replaced ----------------------------------------------


def ref_held_shards(t: Target) -> list[ShardState]:
    return sorted(
        (s for s in t.shards.values() if s.held or s.awaiting is not None or t.refused is not None),
        key=lambda s: s.held_seq,
    )


def ref_conflict(t: Target) -> str | None:
    reasons = dict.fromkeys(s.conflict for s in ref_held_shards(t) if s.conflict)
    if t.refused is not None:
        reasons = {t.refused.why: None, **reasons}
    return "; ".join(reasons) if reasons else None


def ref_stage(t: Target) -> str:
    if ref_conflict(t) is not None:
        return "conflict"
    if any(s.held or s.awaiting is not None for s in t.shards.values()):
        return "waiting"
    return "none"


def ref_schemas(t: Target) -> list[Any]:
    return list(dict.fromkeys(s.schema for s in t.shards.values() if s.admitted))


def ref_finals(t: Target) -> list[Any]:
    return list(dict.fromkeys(s.final for s in t.shards.values() if s.admitted))


def ref_post_groups(t: Target) -> dict[Any, list[ShardState]]:
    groups: dict[Any, list[ShardState]] = {}
    for s in ref_held_shards(t):
        if s.post is not None:
            groups.setdefault((s.schema, s.post), []).append(s)
    return groups


def ref_terminated(t: Target, posts: list[ShardState]) -> Any:
    finals = ref_finals(t)
    try:
        joined = finals[0]
        for final in finals[1:]:
            joined = join(joined, final)
    except Incompatible:
        return None
    pairs = {(s.schema, s.post) for s in posts}
    for prev in {p for p, _ in pairs}:
        try:
            compare(joined, prev)
            return None
        except Incompatible:
            pass
    for prev, post in pairs:
        for final in finals:
            try:
                larger = join(prev, final)
            except Incompatible:
                larger = final
            try:
                if compare(larger, post) < 0:
                    return None
            except Incompatible:
                return None
    return joined


def ref_optimistic_settle(self: OptimisticRules, t: Target, out: list[Any]) -> None:
    posts = [s for s in ref_held_shards(t) if s.post is not None]
    groups: dict[Any, list[ShardState]] = {}
    for s in posts:
        s.conflict = None
        groups.setdefault((s.schema, s.post), []).append(s)
    shapes = list(groups.values())
    for i, xs in enumerate(shapes):
        for ys in shapes[i + 1 :]:
            reason = contradiction(xs[0], ys[0])
            if reason:
                for s in xs + ys:
                    s.conflict = s.conflict or reason
    if not posts or any(s.conflict for s in t.shards.values()):
        return
    joined = ref_terminated(t, posts)
    if joined is not None:
        self.resolve(t, joined, out)


def ref_pessimistic_settle(self: PessimisticRules, t: Target, out: list[Any]) -> None:
    if t.expected is None or any(s.conflict for s in t.shards.values()):
        return
    admitted = [s for s in t.shards.values() if s.admitted]
    if any(s.shard not in t.ready for s in admitted):
        return
    ddl = t.expected
    assert isinstance(ddl.change, AlterTable) and t.applied is not None
    try:
        downstream = apply(AlterTable(ddl.change.table, ddl.change.specs), t.applied)
    except SchemaError as e:
        st = t.shards[t.ready[0]]
        st.conflict = f"{ddl.sql!r} cannot run downstream on {t.id}: {e}"
        return
    reason = f"every shard of {t.id} ran {ddl.sql!r}"
    t.run_downstream(ddl.change.specs, downstream, reason, out)
    self._finish(t, [t.shards[s] for s in t.ready], out)


def ref_told_apart(t: Target, shard: ShardId) -> bool:
    return t.extract.tells_apart(shard, [s for s in t.shards if s != shard])


@contextlib.contextmanager
def rescanning() -> Iterator[None]:
    """The coordinator as it was before the index: every view a rescan."""
    with contextlib.ExitStack() as stack:
        for name, value in {
            "held_shards": ref_held_shards,
            "conflict": property(ref_conflict),
            "stage": property(ref_stage),
            "schemas": ref_schemas,
            "finals": ref_finals,
            "_told_apart": ref_told_apart,
        }.items():
            stack.enter_context(mock.patch.object(Target, name, value))
        stack.enter_context(mock.patch.object(OptimisticRules, "settle", ref_optimistic_settle))
        stack.enter_context(mock.patch.object(PessimisticRules, "settle", ref_pessimistic_settle))
        yield


# --- the checks ----------------------------------------------------------------------


def same_objects(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def check_views(c: Coordinator) -> None:
    for t in c.targets.values():
        held = ref_held_shards(t)
        assert same_objects(t.held_shards(), held)
        assert t.conflict == ref_conflict(t)
        assert t.stage == ref_stage(t)
        assert same_objects(t.schemas(), ref_schemas(t))
        assert same_objects(t.finals(), ref_finals(t))
        index = t.index
        assert index.admitted == sum(1 for s in t.shards.values() if s.admitted)
        assert index.conflicts == sum(1 for s in t.shards.values() if s.conflict)
        assert same_objects(index.waiting_conflicts(), [s for s in held if s.conflict])
        groups = ref_post_groups(t)
        assert [shape for shape, _ in index.post_groups()] == list(groups)
        assert same_objects(
            [first for _, first in index.post_groups()], [g[0] for g in groups.values()]
        )
        for shape, members in groups.items():
            assert {id(s) for s in index.post_shards(shape)} == {id(s) for s in members}
            for reason in {s.conflict for s in members} | {None, "x"}:
                agree = all(s.conflict == reason for s in members)
                assert index.post_conflicts_are(shape, reason) == agree
        posts = [s for s in held if s.post is not None]
        if posts:
            mine, theirs = terminated(t), ref_terminated(t, posts)
            assert mine == theirs and getattr(mine, "name", None) == getattr(theirs, "name", None)
        for shard in t.shards:
            assert t._told_apart(shard) == ref_told_apart(t, shard)


def coordinator(mode: str, extract: Extract) -> Coordinator:
    c = Coordinator(Router((Route(T, extract=extract),)), {T: TargetConfig(mode)})
    for shard in SHARDS[:3]:
        c.register(shard, parse_create_table(BASE.format(t=shard.table)))
    return c


def step(c: Coordinator, kind: str, a: int, b: int, i: int, last: list[Any]) -> list[Any]:
    """One event or command; ``a`` and ``b`` pick what it is about, ``last`` is what the
    step before decided (a refusal refuses its first downstream change)."""
    shard = SHARDS[a % len(SHARDS)]
    t = c.targets[T]
    held = sorted(s.shard for s in t.held_shards() if s.held)
    if kind == "register":  # a table known at start (once: a new one comes as CREATE TABLE)
        if shard in c.where:
            return []
        return c.register(shard, parse_create_table(BASE.format(t=shard.table)), i)
    if kind == "ddl":
        other = SHARDS[(a // len(SHARDS) + b) % len(SHARDS)].table  # a rename's new name
        sql = DDLS[b % len(DDLS)].format(t=shard.table, u=other if a % 2 else f"r{other}")
        return c.on_ddl(shard, sql, i)
    if kind == "rollout":  # every shard runs the same ALTER, from the a-th one on
        shards = sorted(t.shards, key=str)
        shards = shards[a % len(shards) :] + shards[: a % len(shards)] if shards else []
        out = []
        for n, s in enumerate(shards):
            out += c.on_ddl(s, DDLS[b % ALTERS].format(t=s.table), [i, n])
        return out
    if kind == "await":
        return c.await_ddl(shard, i, "rows ahead of a DDL")
    if kind == "refuse":
        at = next((n for n, d in enumerate(last) if isinstance(d, ApplyDDL)), None)
        if at is not None:
            c.refuse(T, last[at:], "the sink cannot do it; fix it, then --retry")
        return []
    if kind in ("force-remove", "retry"):
        return c.command(parse_command(f"unlock {T} --{kind}"))
    if not held:
        return []
    target = held[b % len(held)]
    if kind == "replace":
        sql = f"ALTER TABLE {target.table} ADD COLUMN r INT"
        return c.command(parse_command(f'unlock {T} --shard {target} --replace "{sql}"'))
    return c.command(parse_command(f"unlock {T} --shard {target} --action {kind}"))


def outcome(c: Coordinator, *args: Any) -> tuple[Any, list[Any]]:
    try:
        return None, step(c, *args)
    except ShardMergeError as e:
        return (type(e).__name__, str(e)), []


steps = st.lists(
    st.tuples(st.sampled_from(KINDS), st.integers(0, 11), st.integers(0, 40)), max_size=30
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(["optimistic", "pessimistic"]),
    extract=st.sampled_from(EXTRACTS),
    history=steps,
)
def test_indexed_views_equal_the_full_rescans(
    mode: str, extract: Extract, history: list[tuple[str, int, int]]
) -> None:
    shipped, reference = coordinator(mode, extract), coordinator(mode, extract)
    restored = coordinator(mode, extract)  # the shipped one restored from its state each step
    last: list[Any] = []
    for i, (kind, a, b) in enumerate(history, start=1):
        done = outcome(shipped, kind, a, b, i, last)
        with rescanning():
            assert outcome(reference, kind, a, b, i, last) == done
        assert outcome(restored, kind, a, b, i, last) == done
        last = done[1]
        assert snapshot(shipped) == snapshot(reference) == snapshot(restored)
        check_views(shipped)
        check_views(restored)
        restored = restore(snapshot(shipped), shipped.router, shipped.configs)
        check_views(restored)


def test_the_random_histories_reach_every_stage_and_resolve_locks() -> None:
    """The histories are not all trivial: locks wait, conflict and resolve."""
    seen: set[str] = set()
    resolved = False

    @settings(max_examples=300, deadline=None, database=None)
    @given(mode=st.sampled_from(["optimistic", "pessimistic"]), history=steps)
    def run(mode: str, history: list[tuple[str, int, int]]) -> None:
        nonlocal resolved
        c = coordinator(mode, EXTRACTS[2])
        last: list[Any] = []
        for i, (kind, a, b) in enumerate(history, start=1):
            _, last = outcome(c, kind, a, b, i, last)
            if T in c.targets:
                seen.add(c.targets[T].stage)
            resolved |= any(isinstance(d, ApplyDDL) and "resolved" in d.reason for d in last)

    run()
    assert seen == {"none", "waiting", "conflict"}
    assert resolved
