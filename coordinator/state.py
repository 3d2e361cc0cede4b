"""The coordinator's whole state as versioned JSON, and back.

``restore(snapshot(c))`` gives a coordinator that decides exactly as ``c`` would; a test
checks this after every step of every scenario.

The state is saved every micro-batch, and thousands of shards share a handful of schemas.
So each distinct schema shape is written once, in ``schemas``, and each distinct list of
ALTER specifications once, in ``alters``; shards, pending DDLs, the applied schema and
deferred decisions refer to them by index. A schema reference is the index alone when
the schema is named after its owner (a shard's schema after the shard's table, the applied
schema after the target's table), else ``[index, name]``. Restoring decodes each entry
once: shards with one shape share one decoded schema (renamed, sharing its hash), and
pending DDLs of one statement shape share their parsed specifications. Fields at their
default value are left out of a shard.

Positions and DDL origins are opaque to the coordinator; they are saved when they are
JSON (None, bool, int, finite float, str, or lists of these) and refused with
:class:`StateError` otherwise, rather than written as a string that would read back as
something else.

Version 1 (every schema written out in full, pending ALTERs as statement text parsed again
on restore) is still read: see :mod:`coordinator._state_v1`.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from coordinator import _state_v1
from coordinator.coordinator import DEFAULT_CONFIG, Coordinator, DDLOrigin, Ghost, TargetConfig
from coordinator.decisions import ApplyDDL, Decision, Hold, Release, Rename, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.index import ShardTable
from coordinator.policy import PolicyNote
from coordinator.routing import Extract, Router
from coordinator.target import PendingDDL, Refusal, ShardState, Target
from schemas.changes import (
    AlterSpec,
    AlterTable,
    CreateTable,
    DropTable,
    RenameTable,
    TruncateTable,
)
from schemas.codec import (
    CodecError,
    schema_from_json,
    schema_to_json,
    specs_from_json,
    specs_to_json,
)
from schemas.model import TableName, TableSchema
from shardmerge.errors import ShardMergeError

__all__ = ["FORMAT", "VERSION", "StateError", "restore", "snapshot"]

FORMAT = "shardmerge-coordinator"
VERSION = 2
READS = (1, 2)  # versions restore() reads

SchemaRef = int | list[Any]


class StateError(ShardMergeError):
    """The coordinator state cannot be saved or read.

    Saving: a value the state cannot hold (the message names it and where it is). Reading:
    the state was written by another shardmerge version, or damaged. A newer version's
    state needs that version of shardmerge. Otherwise restore the state directory from a
    backup, or stop the job, remove the state and checkpoint directories and replay the
    topics from the beginning."""


# --- saving -----------------------------------------------------------------------------


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while saving or restoring, if it runs.

    At 4,096 shards each allocates tens of thousands of containers, none of them garbage (a
    snapshot's are freed by reference counting once written; restore's are the new state).
    Every 700 of them (Python's default threshold) would start a collection that walks
    them, and now and then a full one that walks the whole heap, up to 0.1 s, to find
    nothing. Paused, the collector keeps counting them and collects the young generations
    once, at the first allocation after: the usual way to build many objects at once. The
    pause is process-wide, so it covers this module's work only."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def snapshot(c: Coordinator) -> dict[str, Any]:
    with _collector_paused():
        return _snapshot(c)


def _snapshot(c: Coordinator) -> dict[str, Any]:
    w = _Writer()
    targets = [w.target(t) for t in c.targets.values()]
    ghosts = [
        [str(s), {"schema": w.schema(g.schema, s.table), "statements": list(g.statements)}]
        for s, g in c.ghosts.items()
    ]
    carried = [
        [str(s), [[_json(p, s, "shadow rows from"), text] for p, text in seen]]
        for s, seen in c.carried.items()
    ]
    unregistered = [[str(s), _json(p, s, "held from")] for s, p in c.unregistered.items()]
    origins = [
        [k, _json(list(o.origin), k, "DDL origin"), list(o.digests)]
        for k, o in c.ddl_origins.items()
    ]
    return {
        "format": FORMAT,
        "version": VERSION,
        "schemas": w.schemas,
        "alters": w.alters,
        "targets": targets,
        "versions": [[str(s), v] for s, v in c.versions.items()],
        "unregistered": unregistered,
        "ghosts": ghosts,
        "carried": carried,
        "ddl_origins": origins,
    }


def _json(value: Any, *where: object) -> Any:
    """A position or origin as it is saved: ``value`` itself, once checked to be JSON
    (positions are values: the coordinator never changes one in place)."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return value
    if t is list:  # a binlog position: a few strings and numbers, checked without a call each
        for v in value:
            t = type(v)
            if not (t is str or t is int or t is bool or v is None):
                _json(v, *where)
        return value
    if t is float and math.isfinite(value):
        return value
    at = " ".join(map(str, where))
    raise StateError(
        f"{at}: {value!r} cannot be saved in the coordinator state: a position is JSON "
        f"(None, bool, int, finite float, str, or a list of them), not {t.__name__}; "
        "the engine that gives the coordinator positions must give such values"
    )


class _Writer:
    """Encodes one snapshot: each distinct schema and ALTER specification list once."""

    def __init__(self) -> None:
        self.schemas: list[dict[str, Any]] = []
        self.alters: list[list[dict[str, Any]]] = []
        self._by_shape: dict[TableSchema, int] = {}  # equal schemas (names aside) share one
        self._by_id: dict[int, int] = {}  # the same object again: no hashing, no comparing
        self._by_specs: dict[tuple[AlterSpec, ...], int] = {}

    def schema(self, schema: TableSchema, owner: str) -> SchemaRef:
        i = self._by_id.get(id(schema))
        if i is None:
            i = self._by_shape.get(schema)
            if i is None:
                i = self._by_shape[schema] = len(self.schemas)
                self.schemas.append(schema_to_json(schema, name=False))
            self._by_id[id(schema)] = i  # objects outlive the snapshot: ids stay unique
        return i if schema.name == owner else [i, schema.name]

    def specs(self, specs: tuple[AlterSpec, ...]) -> int:
        i = self._by_specs.get(specs)
        if i is None:
            i = self._by_specs[specs] = len(self.alters)
            try:
                self.alters.append(specs_to_json(specs))
            except CodecError as e:
                raise StateError(f"cannot save ALTER specifications: {e}") from e
        return i

    def pending(self, d: PendingDDL, *where: object) -> dict[str, Any]:
        out: dict[str, Any] = {"sql": d.sql}
        if d.position is not None:
            out["position"] = _json(d.position, *where, "position of", repr(d.sql))
        if d.error is not None:
            out["error"] = d.error
        if d.carried:
            out["carried"] = True
        change = d.change
        if change is None:
            return out
        name = change.old if isinstance(change, RenameTable) else change.table
        if isinstance(change, DropTable):
            out["drop"] = True
        elif isinstance(change, RenameTable):
            # held by a ``fail`` policy: the statement's pairs, taken as a whole
            out["rename"] = [change.new.table, change.new.db]
            out["renames"] = [[str(old), str(new)] for old, new in d.renames]
        elif isinstance(change, AlterTable):
            out["alter"] = self.specs(change.specs)
        elif isinstance(change, TruncateTable):
            out["truncate"] = True
        else:
            out["create"] = self.schema(change.schema, change.table.table)
            if change.if_not_exists:
                out["if_not_exists"] = True
        out["table"] = name.table
        if name.db is not None:
            out["db"] = name.db
        if isinstance(change, AlterTable | CreateTable) and change.ignored:
            out["ignored"] = list(change.ignored)
        return out

    def shard(self, s: ShardState) -> dict[str, Any]:
        name = s.shard.table
        out: dict[str, Any] = {
            "shard": str(s.shard),
            "version": s.version,
            "schema": self.schema(s.schema, name),
        }
        if s.pending:
            out["pending"] = [self.pending(d, s.shard) for d in s.pending]
        if s.post is not None:
            out["post"] = self.schema(s.post, name)
        if s.held_seq:
            out["held_seq"] = s.held_seq
        if s.project:
            out["project"] = True
        if s.ignored:
            out["ignored"] = list(s.ignored)
        if s.conflict is not None:
            out["conflict"] = s.conflict
        if s.awaiting is not None:
            out["awaiting"] = _json(s.awaiting, s.shard, "awaiting")
        if not s.admitted:
            out["admitted"] = False
        if s.renamed:
            out["renamed"] = [
                [_json(p, s.shard, "renamed at"), [[old, new] for old, new in pairs]]
                for p, pairs in s.renamed
            ]
        if s.last_alter is not None:
            out["last_alter"] = _json(s.last_alter, s.shard, "last ALTER")
        if s.fingerprint is not None:
            out["fingerprint"] = s.fingerprint
        return out

    def target(self, t: Target) -> dict[str, Any]:
        out = self._target(t)
        # Written only when there is something (states without them read as before).
        if t.policy_notes:
            out["policy_notes"] = [[n.shard, n.sql, n.kind, n.policy] for n in t.policy_notes]
        if t.policy_counts:
            out["policy_counts"] = [[k, w, n] for (k, w), n in t.policy_counts.items()]
        return out

    def _target(self, t: Target) -> dict[str, Any]:
        return {
            "id": str(t.id),
            "mode": t.mode,
            "strict": t.strict,
            "extract": {
                "source_column": t.extract.source_column,
                "db_column": t.extract.db_column,
                "table_column": t.extract.table_column,
            },
            "applied": None if t.applied is None else self.schema(t.applied, t.id.table),
            "seq": t.seq,
            "expected": None if t.expected is None else self.pending(t.expected, t.id),
            "ready": [str(s) for s in t.ready],
            "owed": [[str(s), self.pending(d, s)] for s, d in t.owed.items()],
            "shards": [self.shard(s) for s in t.shards.values()],
            "refused": None
            if t.refused is None
            else {"why": t.refused.why, "deferred": [self.decision(d) for d in t.refused.deferred]},
        }

    def decision(self, d: Decision) -> dict[str, Any]:
        """The decisions a refused target keeps."""
        match d:
            case ApplyDDL():
                return {"kind": "alter", "target": str(d.target), "alter": self.specs(d.specs),
                        "schema": self.schema(d.schema, d.target.table),
                        "statement": d.statement, "reason": d.reason}  # fmt: skip
            case Release():
                return {"kind": "release", "target": str(d.target), "shard": str(d.shard),
                        "version": d.version, "until": _json(d.until, d.shard, "release until"),
                        "project": d.project}  # fmt: skip
            case Hold():
                return {"kind": "hold", "target": str(d.target), "shard": str(d.shard),
                        "version": d.version, "position": _json(d.position, d.shard, "hold at"),
                        "reason": d.reason}  # fmt: skip
            case Rename():
                return {"kind": "rename", "target": str(d.target), "shard": str(d.old),
                        "new": str(d.new), "version": d.version,
                        "match": [[k, v] for k, v in d.match],
                        "values": [[k, v] for k, v in d.values],
                        "position": _json(d.position, d.old, "rename at")}  # fmt: skip
            case Truncate():
                return {"kind": "truncate", "target": str(d.target), "shard": str(d.shard),
                        "version": d.version, "match": [[k, v] for k, v in d.match],
                        "position": _json(d.position, d.shard, "truncate at")}  # fmt: skip
            case _:
                raise StateError(f"decision {d!r} cannot wait on a refused target")


# --- reading ----------------------------------------------------------------------------


def restore(
    data: dict[str, Any],
    router: Router,
    configs: dict[TargetId, TargetConfig] | None = None,
    default: TargetConfig = DEFAULT_CONFIG,
) -> Coordinator:
    if data.get("format") != FORMAT:
        raise StateError(f"not a coordinator state (format {data.get('format')!r})")
    version = data.get("version")
    if version not in READS:
        newer = isinstance(version, int) and version > VERSION
        raise StateError(
            f"coordinator state version {version!r}; this shardmerge reads versions "
            f"{', '.join(map(str, READS))}. "
            + (
                f"Version {version} was written by a newer shardmerge: run that version (or a "
                "later one) on this checkpoint, or start this one on a new checkpoint"
                if newer
                else "Restore the state directory from a backup, or stop the job, remove the "
                "state and checkpoint directories and replay the topics"
            )
        )
    try:
        with _collector_paused():
            if version == 1:
                data = _snapshot(_state_v1.restore(data, router, configs, default))
            return _restore(data, router, configs, default)
    except StateError:
        raise
    except (ShardMergeError, KeyError, IndexError, TypeError, ValueError) as e:
        raise StateError(
            f"coordinator state version {version} is damaged ({type(e).__name__}: {e}); "
            "restore the state directory from a backup"
        ) from e


def _restore(
    data: dict[str, Any],
    router: Router,
    configs: dict[TargetId, TargetConfig] | None,
    default: TargetConfig,
) -> Coordinator:
    r = _Reader(data["schemas"], data["alters"])
    c = Coordinator(router, configs, default)
    for raw in data["targets"]:
        t = _target_from_json(raw, r)
        t.policy = c.configs.get(t.id, c.default).policy  # the settings', never saved
        c.targets[t.id] = t
        for shard in t.shards:
            c.where[shard] = t.id
    c.versions = {r.shard(s): v for s, v in data["versions"]}
    c.unregistered = {r.shard(s): p for s, p in data["unregistered"]}
    c.ghosts = {}
    for s, g in data["ghosts"]:
        shard = r.shard(s)
        c.ghosts[shard] = Ghost(r.schema(g["schema"], shard.table), list(g["statements"]))
    # Row schemas of shadow tables (absent from a state saved before they were kept).
    c.carried = {r.shard(s): [(p, text) for p, text in seen] for s, seen in data.get("carried", [])}
    c.ddl_origins = {
        k: DDLOrigin(tuple(origin), list(digests)) for k, origin, digests in data["ddl_origins"]
    }
    return c


class _Reader:
    """Decodes each saved schema and ALTER specification list once."""

    def __init__(self, schemas: list[dict[str, Any]], alters: list[list[dict[str, Any]]]) -> None:
        try:
            self._shapes = [schema_from_json(s) for s in schemas]
            self._specs = [specs_from_json(a) for a in alters]
        except ShardMergeError as e:  # a schema that breaks the model's rules, an unknown spec
            raise StateError(f"a schema in the saved state cannot be read: {e}") from e
        self._named: dict[tuple[int, str], TableSchema] = {}
        self._shards: dict[str, ShardId] = {}  # a shard is named in several places
        self._pairs: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}

    def shard(self, text: str) -> ShardId:
        shard = self._shards.get(text)
        if shard is None:
            shard = self._shards[text] = ShardId.parse(text)
        return shard

    def schema(self, ref: SchemaRef, owner: str) -> TableSchema:
        if isinstance(ref, int):
            i, name = ref, owner
        else:
            i, name = ref
        key = (i, name)
        schema = self._named.get(key)
        if schema is None:
            schema = self._named[key] = self._shapes[i].renamed(name)
        return schema

    def specs(self, i: int) -> tuple[AlterSpec, ...]:
        return self._specs[i]

    def pairs(self, raw: list[list[str]]) -> tuple[tuple[str, str], ...]:
        """A column rename's (old, new) pairs: shards that ran one rename share one tuple."""
        pairs = tuple((old, new) for old, new in raw)
        return self._pairs.setdefault(pairs, pairs)

    def pending(self, raw: dict[str, Any]) -> PendingDDL:
        change: AlterTable | TruncateTable | CreateTable | DropTable | RenameTable | None = None
        renames: tuple[tuple[ShardId, ShardId], ...] = ()
        if "table" in raw:
            table = TableName(raw["table"], raw.get("db"))
            ignored = tuple(raw.get("ignored", ()))
            if raw.get("drop"):
                change = DropTable(table, True)
            elif "rename" in raw:
                new_table, new_db = raw["rename"]
                change = RenameTable(table, TableName(new_table, new_db))
                renames = tuple(
                    (ShardId.parse(old), ShardId.parse(new)) for old, new in raw["renames"]
                )
            elif "alter" in raw:
                change = AlterTable(table, self.specs(raw["alter"]), ignored)
            elif "create" in raw:
                schema = self.schema(raw["create"], table.table)
                change = CreateTable(table, schema, raw.get("if_not_exists", False), ignored)
            else:
                change = TruncateTable(table)
        return PendingDDL(
            raw["sql"],
            raw.get("position"),
            change,
            raw.get("error"),
            raw.get("carried", False),
            renames,
        )


# What a saved shard leaves out: its fields at their defaults (and empty lists).
_SHARD_DEFAULTS = {
    f.name: f.default
    for f in dataclasses.fields(ShardState)
    if f.default is not dataclasses.MISSING
}


def _shard_from_json(raw: dict[str, Any], r: _Reader) -> ShardState:
    fields = _SHARD_DEFAULTS | raw  # a key that is not a field: refused by ShardState.of
    fields["shard"] = shard = r.shard(raw["shard"])
    name = shard.table
    fields["schema"] = r.schema(raw["schema"], name)
    fields["pending"] = [r.pending(d) for d in raw["pending"]] if "pending" in raw else []
    if "post" in raw:
        fields["post"] = r.schema(raw["post"], name)
    if "renamed" in raw:
        fields["renamed"] = [(p, r.pairs(pairs)) for p, pairs in raw["renamed"]]
    else:
        fields["renamed"] = []
    fields["ignored"] = tuple(raw.get("ignored", ()))
    return ShardState.of(fields)


def _decision_from_json(raw: dict[str, Any], r: _Reader) -> Decision:
    target = TargetId.parse(raw["target"])
    kind = raw["kind"]
    if kind == "alter":
        return ApplyDDL(target, r.specs(raw["alter"]), r.schema(raw["schema"], target.table),
                        raw["statement"], raw["reason"])  # fmt: skip
    shard = r.shard(raw["shard"])
    if kind == "release":
        return Release(target, shard, raw["version"], raw["until"], raw["project"])
    if kind == "hold":
        return Hold(target, shard, raw["version"], raw["position"], raw["reason"])
    if kind == "truncate":
        match = tuple((k, v) for k, v in raw["match"])
        return Truncate(target, shard, raw["version"], match, raw["position"])
    if kind == "rename":
        match = tuple((k, v) for k, v in raw["match"])
        values = tuple((k, v) for k, v in raw["values"])
        new = r.shard(raw["new"])
        return Rename(target, shard, new, raw["version"], match, values, raw["position"])
    raise StateError(f"unknown decision kind {kind!r} in the saved state")


def _target_from_json(raw: dict[str, Any], r: _Reader) -> Target:
    tid = TargetId.parse(raw["id"])
    t = Target(
        id=tid,
        mode=raw["mode"],
        strict=raw["strict"],
        extract=Extract(**raw["extract"]),
        applied=None if raw["applied"] is None else r.schema(raw["applied"], tid.table),
        seq=raw["seq"],
        expected=None if raw["expected"] is None else r.pending(raw["expected"]),
        ready=[r.shard(s) for s in raw["ready"]],
        owed={r.shard(s): r.pending(d) for s, d in raw["owed"]},
    )
    t.policy_notes = [PolicyNote(*n) for n in raw.get("policy_notes", ())]
    t.policy_counts = {(k, w): n for k, w, n in raw.get("policy_counts", ())}
    refused = raw["refused"]
    if refused is not None:
        deferred = [_decision_from_json(d, r) for d in refused["deferred"]]
        t.refused = Refusal(refused["why"], deferred)
    states = [_shard_from_json(s, r) for s in raw["shards"]]
    t.shards = ShardTable({st.shard: st for st in states}, refused=refused is not None)
    return t
