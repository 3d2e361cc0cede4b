"""Reading a coordinator state of version 1 (internal; see :mod:`coordinator.state`).

Version 1 wrote every schema in full, once per shard, and kept pending ALTERs as their
statement text, parsed again on restore. This is its reader as it was when version 2
replaced it; :func:`coordinator.state.restore` turns what it builds into version 2.
Delete it once no supported upgrade path starts from a version 1 state.
"""

from __future__ import annotations

from typing import Any

from coordinator.coordinator import Coordinator, DDLOrigin, Ghost, TargetConfig
from coordinator.decisions import ApplyDDL, Decision, Hold, Release, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.routing import Extract, Router
from coordinator.target import PendingDDL, Refusal, ShardState, Target
from schemas.changes import AlterTable, CreateTable, TruncateTable
from schemas.codec import schema_from_json
from schemas.ddl import parse_ddl
from schemas.model import TableName
from shardmerge.errors import ShardMergeError

__all__ = ["restore"]


class _Unreadable(ShardMergeError):
    """A version 1 state that does not read back (the caller names the state)."""


def restore(
    data: dict[str, Any],
    router: Router,
    configs: dict[TargetId, TargetConfig] | None,
    default: TargetConfig,
) -> Coordinator:
    c = Coordinator(router, configs, default)
    for raw in data["targets"]:
        t = _target_from_json(raw)
        c.targets[t.id] = t
        for shard in t.shards:
            c.where[shard] = t.id
    c.versions = {ShardId.parse(s): v for s, v in data["versions"]}
    c.unregistered = {ShardId.parse(s): p for s, p in data.get("unregistered", [])}
    c.ghosts = {
        ShardId.parse(s): Ghost(schema_from_json(g["schema"]), list(g["statements"]))
        for s, g in data["ghosts"]
    }
    c.ddl_origins = {
        k: DDLOrigin(tuple(origin), list(digests))
        for k, origin, digests in data.get("ddl_origins", [])
    }
    return c


def _pending_from_json(raw: dict[str, Any]) -> PendingDDL:
    change: AlterTable | TruncateTable | CreateTable | None = None
    if "create" in raw:
        schema = schema_from_json(raw["create"])
        change = CreateTable(TableName(schema.name), schema)
    elif "index" in raw:
        parsed = parse_ddl(raw["sql"])[raw["index"]]
        if not isinstance(parsed, AlterTable | TruncateTable):
            raise _Unreadable(f"pending DDL {raw['sql']!r} is not an ALTER or TRUNCATE")
        change = parsed
    return PendingDDL(raw["sql"], raw["position"], change, raw["error"])


def _shard_from_json(raw: dict[str, Any]) -> ShardState:
    return ShardState(
        shard=ShardId.parse(raw["shard"]),
        version=raw["version"],
        schema=schema_from_json(raw["schema"]),
        pending=[_pending_from_json(d) for d in raw["pending"]],
        post=None if raw["post"] is None else schema_from_json(raw["post"]),
        held_seq=raw["held_seq"],
        project=raw["project"],
        conflict=raw["conflict"],
        awaiting=raw.get("awaiting"),
        admitted=raw["admitted"],
        renamed=[(pos, tuple((o, n) for o, n in pairs)) for pos, pairs in raw.get("renamed", [])],
        last_alter=raw.get("last_alter"),
        fingerprint=raw.get("fingerprint"),
    )


def _decision_from_json(raw: dict[str, Any]) -> Decision:
    target = TargetId.parse(raw["target"])
    kind = raw["kind"]
    if kind == "alter":
        change = parse_ddl(raw["statement"])[0]
        if not isinstance(change, AlterTable):
            raise _Unreadable(f"deferred statement {raw['statement']!r} is not an ALTER")
        return ApplyDDL(target, change.specs, schema_from_json(raw["schema"]), raw["statement"],
                        raw["reason"])  # fmt: skip
    shard = ShardId.parse(raw["shard"])
    if kind == "release":
        return Release(target, shard, raw["version"], raw["until"], raw["project"])
    if kind == "hold":
        return Hold(target, shard, raw["version"], raw["position"], raw["reason"])
    if kind == "truncate":
        match = tuple((k, v) for k, v in raw["match"])
        return Truncate(target, shard, raw["version"], match, raw.get("position"))
    raise _Unreadable(f"unknown decision kind {kind!r}")


def _target_from_json(raw: dict[str, Any]) -> Target:
    t = Target(
        id=TargetId.parse(raw["id"]),
        mode=raw["mode"],
        strict=raw["strict"],
        extract=Extract(**raw["extract"]),
        applied=None if raw["applied"] is None else schema_from_json(raw["applied"]),
        seq=raw["seq"],
        expected=None if raw["expected"] is None else _pending_from_json(raw["expected"]),
        ready=[ShardId.parse(s) for s in raw["ready"]],
        owed={ShardId.parse(s): _pending_from_json(d) for s, d in raw["owed"]},
    )
    for s in raw["shards"]:
        st = _shard_from_json(s)
        t.shards[st.shard] = st
    refused = raw.get("refused")
    if refused is not None:
        t.refused = Refusal(refused["why"], [_decision_from_json(d) for d in refused["deferred"]])
    return t
