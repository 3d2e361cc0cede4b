"""The coordinator's whole state as versioned JSON, and back.

``restore(snapshot(c))`` gives a coordinator that decides exactly as ``c`` would; a test
checks this after every step of every scenario. Pending DDLs are kept as their statement
text and parsed again on restore (parsing is deterministic), except new tables, whose
schema is kept as such.
"""

from __future__ import annotations

from typing import Any

from coordinator.coordinator import DEFAULT_CONFIG, Coordinator, DDLOrigin, Ghost, TargetConfig
from coordinator.decisions import ApplyDDL, Decision, Hold, Release, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.routing import Extract, Router
from coordinator.target import PendingDDL, Refusal, ShardState, Target
from schemas.changes import AlterTable, CreateTable, TruncateTable
from schemas.codec import schema_from_json, schema_to_json
from schemas.ddl import parse_ddl
from schemas.model import TableName
from shardmerge.errors import ShardMergeError

__all__ = ["FORMAT", "VERSION", "StateError", "restore", "snapshot"]

FORMAT = "shardmerge-coordinator"
VERSION = 1


class StateError(ShardMergeError):
    """The saved coordinator state cannot be read.

    It was written by another shardmerge version or damaged. Restore the state directory
    from a backup, or stop the job, remove the state and checkpoint directories and
    replay the topics from the beginning."""


def snapshot(c: Coordinator) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "targets": [_target_to_json(t) for t in c.targets.values()],
        "versions": [[str(s), v] for s, v in c.versions.items()],
        "unregistered": [[str(s), p] for s, p in c.unregistered.items()],
        "ghosts": [
            [str(s), {"schema": schema_to_json(g.schema), "statements": g.statements}]
            for s, g in c.ghosts.items()
        ],
        "ddl_origins": [[k, list(o.origin), o.digests] for k, o in c.ddl_origins.items()],
    }


def restore(
    data: dict[str, Any],
    router: Router,
    configs: dict[TargetId, TargetConfig] | None = None,
    default: TargetConfig = DEFAULT_CONFIG,
) -> Coordinator:
    if data.get("format") != FORMAT:
        raise StateError(f"not a coordinator state (format {data.get('format')!r})")
    if data.get("version") != VERSION:
        raise StateError(
            f"coordinator state version {data.get('version')!r}; this shardmerge reads {VERSION}"
        )
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


def _pending_to_json(d: PendingDDL) -> dict[str, Any]:
    out: dict[str, Any] = {"sql": d.sql, "position": d.position, "error": d.error}
    if isinstance(d.change, CreateTable):
        out["create"] = schema_to_json(d.change.schema)
    elif d.change is not None:
        out["index"] = parse_ddl(d.sql).index(d.change) if d.error is None else 0
    return out


def _pending_from_json(raw: dict[str, Any]) -> PendingDDL:
    change: AlterTable | TruncateTable | CreateTable | None = None
    if "create" in raw:
        schema = schema_from_json(raw["create"])
        change = CreateTable(TableName(schema.name), schema)
    elif "index" in raw:
        parsed = parse_ddl(raw["sql"])[raw["index"]]
        if not isinstance(parsed, AlterTable | TruncateTable):
            raise StateError(f"pending DDL {raw['sql']!r} is not an ALTER or TRUNCATE")
        change = parsed
    return PendingDDL(raw["sql"], raw["position"], change, raw["error"])


def _shard_to_json(s: ShardState) -> dict[str, Any]:
    return {
        "shard": str(s.shard),
        "version": s.version,
        "schema": schema_to_json(s.schema),
        "pending": [_pending_to_json(d) for d in s.pending],
        "post": None if s.post is None else schema_to_json(s.post),
        "held_seq": s.held_seq,
        "project": s.project,
        "conflict": s.conflict,
        "awaiting": s.awaiting,
        "admitted": s.admitted,
        "renamed": [[pos, [list(pair) for pair in pairs]] for pos, pairs in s.renamed],
        "last_alter": s.last_alter,
        "fingerprint": s.fingerprint,
    }


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


def _target_to_json(t: Target) -> dict[str, Any]:
    return {
        "id": str(t.id),
        "mode": t.mode,
        "strict": t.strict,
        "extract": {
            "source_column": t.extract.source_column,
            "db_column": t.extract.db_column,
            "table_column": t.extract.table_column,
        },
        "applied": None if t.applied is None else schema_to_json(t.applied),
        "seq": t.seq,
        "expected": None if t.expected is None else _pending_to_json(t.expected),
        "ready": [str(s) for s in t.ready],
        "owed": [[str(s), _pending_to_json(d)] for s, d in t.owed.items()],
        "shards": [_shard_to_json(s) for s in t.shards.values()],
        "refused": None
        if t.refused is None
        else {"why": t.refused.why, "deferred": [_decision_to_json(d) for d in t.refused.deferred]},
    }


def _decision_to_json(d: Decision) -> dict[str, Any]:
    """The decisions a refused target keeps (an ALTER keeps its statement, parsed again)."""
    match d:
        case ApplyDDL():
            return {"kind": "alter", "target": str(d.target), "statement": d.statement,
                    "schema": schema_to_json(d.schema), "reason": d.reason}  # fmt: skip
        case Release():
            return {"kind": "release", "target": str(d.target), "shard": str(d.shard),
                    "version": d.version, "until": d.until, "project": d.project}  # fmt: skip
        case Hold():
            return {"kind": "hold", "target": str(d.target), "shard": str(d.shard),
                    "version": d.version, "position": d.position, "reason": d.reason}  # fmt: skip
        case Truncate():
            return {"kind": "truncate", "target": str(d.target), "shard": str(d.shard),
                    "version": d.version, "match": [list(m) for m in d.match],
                    "position": d.position}  # fmt: skip
        case _:
            raise StateError(f"decision {d!r} cannot wait on a refused target")


def _decision_from_json(raw: dict[str, Any]) -> Decision:
    target = TargetId.parse(raw["target"])
    kind = raw["kind"]
    if kind == "alter":
        change = parse_ddl(raw["statement"])[0]
        assert isinstance(change, AlterTable)
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
    raise StateError(f"unknown decision kind {kind!r} in the saved state")


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
