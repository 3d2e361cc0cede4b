"""The coordinator as a replicated state machine: several jobs, one target (seeds 002/004).

Every job of a group keeps its own :class:`Replica`: an ordinary :class:`Coordinator`
folded from one shared **group log** of records. A job never calls a mutating coordinator
method outside the fold: what it reads (its shards' tables at start, its control events,
rows ahead of a DDL) and what operators say it *appends* as a record; the fold applies the
records in log order, for every job alike. So the coordination state of a group is a
pure function of its log (rule G1 of coordinator/PROTOCOL.md, "Groups"): two replicas that
folded the same records hold equal snapshots, and a replica restored from a snapshot
folds on exactly as the one that made it.

Records are JSON values (:meth:`Record.to_json`); the log gives each the first free
sequence number, put-if-absent (``streaming.storage.group_store`` on a filesystem, or
:class:`MemoryLog`), and an append whose id is already in the log returns that record's
number instead (a batch run again appends nothing twice).

Every shard belongs to the one job that first names it in a record (its ``register`` or
one of its control events). A record of another job about that shard is refused by the
fold, the same way in every replica, and the refusal is kept with the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from coordinator.commands import OperatorCommand
from coordinator.coordinator import (
    DEFAULT_CONFIG,
    Coordinator,
    TargetConfig,
    UnknownShardError,
)
from coordinator.decisions import ApplyDDL, CreateTarget, Decision
from coordinator.ids import Position, ShardId, TargetId
from coordinator.routing import Router
from coordinator.state import restore, snapshot
from schemas.codec import schema_from_json, schema_to_json, specs_from_json, specs_to_json
from schemas.ddl import parse_create_table
from shardmerge.errors import ShardMergeError

__all__ = [
    "RECORD_FORMAT",
    "Ack",
    "Folded",
    "GroupError",
    "GroupLog",
    "MemoryLog",
    "Record",
    "Replica",
    "batch_records",
    "body_problem",
    "decision_from_json",
    "decision_to_json",
    "owner_waits_for",
    "settings_differences",
    "settings_fingerprint",
    "stale_change",
]

# The version of the records' format and of the fold that reads them: part of every
# member's settings fingerprint (a member that folds differently is refused at its join).
RECORD_FORMAT = 1

Kind = Literal[
    "register", "ddl", "await", "ahead", "shadow", "prints", "stop", "command", "join",
    "noop", "invalid",
]  # fmt: skip
# The kinds a stored record may have (``invalid`` is never stored: it stands for a stored
# record that is not one, :meth:`Record.read`).
KINDS: tuple[Kind, ...] = (
    "register", "ddl", "await", "ahead", "shadow", "prints", "stop", "command", "join",
    "noop",
)  # fmt: skip


class GroupError(ShardMergeError):
    """A record that cannot be read, or a log that is not a log."""


@dataclass(frozen=True)
class Record:
    """One entry of the group log.

    ``id`` makes an append idempotent (a job's records are named by its app id, its batch
    and their place in it). ``body`` per kind:

    - ``register``: ``{"shard", "create"}``: a table known at the job's start, with the
      CREATE TABLE of its schema (``Coordinator.register``);
    - ``ddl``: ``{"shard", "sql", "position", "origin", "channel"}``: one control event,
      in the job's order (``Coordinator.resent`` then ``on_ddl``);
    - ``await``: ``{"shard", "position", "reason"}``: rows of the shard ahead of a DDL not
      yet received, found while deciding (``Coordinator.await_ddl``);
    - ``ahead``: the same body: rows ahead of a DDL found by the write step, after the
      batch's fold and gate; the batch that appends it does not fold it (its rows were
      planned), and no batch's fold stops before it (:func:`batch_records`): its job's
      next batch folds it at its place, as every other job does;
    - ``shadow``: ``{"shard", "seen"}``: the row schemas an online-DDL shadow table's rows
      carried, ``[[position, text], ...]`` (``Coordinator.shadow_rows``);
    - ``prints``: ``{"shard", "seen"}``: the schema fingerprints the shard's rows carried,
      ``[[position, fingerprint], ...]`` (``Coordinator.schema_fingerprints``);
    - ``stop``: ``{"shard"}``: the shard's source was read to the end of its schema-change
      topics without the DDL it awaits (``Coordinator.stop_waiting``);
    - ``command``: ``{"command"}``: an operator command (``OperatorCommand.to_json``);
    - ``join``: ``{}``, or ``{"settings": {"fingerprint", "summary"}}`` (the streaming
      job: :func:`settings_fingerprint` of what its fold depends on, checked by every
      member that reads it): the job registered the tables it knows at its start (the
      streaming job: the CREATE TABLEs of its first batch) and may now append its other
      records; no job appends a record of another kind but those until every job joined,
      so every table known at the start is in the fold before any DDL (nothing to fold);
    - ``noop``: ``{"reason"}``: folds to nothing; ``shardmerge group repair --fill-gap``
      writes one where a number of the log has no record;
    - ``invalid`` (never stored): a stored record that is not one (:meth:`read`); the
      fold refuses it with the reason, in every replica alike.
    """

    id: str
    job: str
    kind: Kind
    body: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "job": self.job, "kind": self.kind, "body": dict(self.body)}

    @classmethod
    def from_json(cls, data: Any) -> Record:
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            raise GroupError(f"not a group log record: {data!r}")
        if not isinstance(data.get("id"), str) or not isinstance(data.get("job"), str):
            raise GroupError(f"a group log record needs a string id and job: {data!r}")
        if not isinstance(data.get("body"), dict):
            raise GroupError(f"a group log record's body is an object: {data!r}")
        return cls(data["id"], data["job"], data["kind"], data["body"])

    @classmethod
    def read(cls, data: Any) -> Record:
        """The stored value as a record; one that is not a record (a wrong shape, an
        unknown kind) as an ``invalid`` record with the reason, which the fold refuses
        (:meth:`Replica.fold`): the log goes on past it, the same in every replica."""
        try:
            return cls.from_json(data)
        except GroupError as e:
            d = data if isinstance(data, dict) else {}
            rid, job = d.get("id"), d.get("job")
            return cls(
                rid if isinstance(rid, str) else "", job if isinstance(job, str) else "",
                "invalid", {"reason": str(e)},
            )  # fmt: skip

    def text(self) -> str:
        """The record as it is stored: canonical JSON."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))


class GroupLog(Protocol):
    """The shared log: numbered records, never rewritten, without gaps (from 1)."""

    def append(self, record: Record) -> int:
        """The record at the first free number, or the number it has already (by id)."""
        ...

    def read(self, after: int) -> list[tuple[int, Record]]:
        """Every record numbered above ``after``, in order."""
        ...


class MemoryLog:
    """A group log in memory (the scenario engine's): every record stored as its text."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.ids: dict[str, int] = {}

    def append(self, record: Record) -> int:
        seq = self.ids.get(record.id)
        if seq is not None:
            return seq
        self.texts.append(record.text())
        seq = self.ids[record.id] = len(self.texts)
        return seq

    def read(self, after: int) -> list[tuple[int, Record]]:
        return [
            (i, Record.from_json(json.loads(t)))
            for i, t in enumerate(self.texts[after:], start=after + 1)
        ]

    def __len__(self) -> int:
        return len(self.texts)


def batch_records(
    records: Iterable[tuple[int, Record]],
    job: str,
    mine_until: int | None,
    passed: Container[int] = (),
) -> list[tuple[int, Record]]:
    """The records, in order, that a batch of ``job`` folds now (coordinator/PROTOCOL.md,
    "Groups", step 2): up to the log's end, but not past a record of its own numbered
    above ``mine_until`` (``None``: no limit) that the batch appends again.

    A batch run again finds its earlier run's records in the log and folds each where it
    appends it again, so it decides as that run did at each of them. It does not stop
    before a record it will not append again, or it would stop there for good: its
    ``join`` (appended only while a member has not joined; it folds to nothing), its
    ``ahead`` records (appended after its fold and gate, never folded by the batch that
    appends them), an ``invalid`` one (unreadable: never appended again), and the
    records numbered in ``passed`` (an earlier run's records that a later run did not
    append again; its gate notes them). After its last record the batch folds on to the
    log's end, so a batch run again after the group went on without it plans at the
    version the table has (G4)."""
    out = []
    for n, r in records:
        if (mine_until is not None and r.job == job and n > mine_until
                and r.kind not in ("join", "ahead", "invalid") and n not in passed):  # fmt: skip
            break
        out.append((n, r))
    return out


@dataclass(frozen=True)
class Folded:
    """What folding one record decided: ``decisions``, each with the version its target
    has in the fold once it is taken (``versions``); ``refused``: why the fold did not take
    the record."""

    seq: int
    record: Record
    decisions: tuple[Decision, ...]
    versions: tuple[int, ...] = ()
    refused: str | None = None


@dataclass
class Replica:
    """One job's copy of the group's coordination state, folded up to ``seq``.

    ``owners``: which job each shard belongs to. ``versions``: per target, how many
    downstream changes the fold decided (its ``CreateTarget`` is version 1, each
    ``ApplyDDL`` one more): a job writes to a target only at the version the table has
    (rule G4). ``refused``: the records the fold did not take, with why (the latest 64).
    """

    coordinator: Coordinator
    seq: int = 0
    owners: dict[ShardId, str] = field(default_factory=dict)
    versions: dict[TargetId, int] = field(default_factory=dict)
    refused: list[tuple[int, str]] = field(default_factory=list)

    @classmethod
    def new(
        cls,
        router: Router,
        configs: Mapping[TargetId, TargetConfig] | None = None,
        default: TargetConfig = DEFAULT_CONFIG,
    ) -> Replica:
        return cls(Coordinator(router, dict(configs or {}), default))

    # --- folding --------------------------------------------------------------------------

    def fold(self, records: Iterable[tuple[int, Record]]) -> list[Folded]:
        """Apply the records numbered above ``seq``, in order (``seq`` follows)."""
        out: list[Folded] = []
        for seq, record in records:
            if seq <= self.seq:
                continue
            if seq != self.seq + 1:
                raise GroupError(
                    f"group log gap: folded up to {self.seq}, next record {seq}: record "
                    f"{self.seq + 1} is missing (its file is log/{self.seq:012d}.json; "
                    f"fill it with a no-op: shardmerge group repair --fill-gap {self.seq} "
                    "--yes, docs/groups.md)"
                )
            out.append(self._fold_one(seq, record))
            self.seq = seq
        return out

    def _fold_one(self, seq: int, record: Record) -> Folded:
        c, body = self.coordinator, record.body
        problem = body_problem(record.kind, body)
        if problem is not None:
            return self._refuse(seq, record, f"malformed {record.kind} record: {problem}")
        try:
            if record.kind in ("join", "noop"):
                decisions = []
            elif record.kind == "command":
                decisions = self._command(body)
            else:
                shard = ShardId.parse(str(body["shard"]))
                owner = self.owners.setdefault(shard, record.job)
                if owner != record.job:
                    why = (
                        f"shard {shard} belongs to job {owner}; job {record.job}'s "
                        f"{record.kind} record is not taken"
                    )
                    return self._refuse(seq, record, why)
                decisions = self._shard_record(c, shard, record)
        # TypeError: a value of the right shape but an unusable type deep inside (the same
        # record raises the same in every replica: the refusal is deterministic)
        except (UnknownShardError, KeyError, ValueError, TypeError) as e:
            return self._refuse(seq, record, f"{type(e).__name__}: {e}")
        versions = []
        for d in decisions:
            if isinstance(d, CreateTarget):
                self.versions[d.target] = max(self.versions.get(d.target, 0), 1)
            elif isinstance(d, ApplyDDL):
                self.versions[d.target] = self.versions.get(d.target, 1) + 1
            versions.append(self.versions.get(d.target, 0))
        return Folded(seq, record, tuple(decisions), tuple(versions))

    def _shard_record(self, c: Coordinator, shard: ShardId, record: Record) -> list[Decision]:
        body = record.body
        position: Position = body.get("position")
        if record.kind == "register":
            return c.register(shard, parse_create_table(str(body["create"])), position)
        if record.kind in ("await", "ahead"):
            return c.await_ddl(shard, position, str(body.get("reason", "")))
        if record.kind == "shadow":
            c.shadow_rows(shard, [(p, str(text)) for p, text in body["seen"]])
            return []
        if record.kind == "prints":
            return c.schema_fingerprints(shard, [(p, str(fp)) for p, fp in body["seen"]])
        if record.kind == "stop":
            return c.stop_waiting(shard)
        sql, origin = str(body["sql"]), body.get("origin")
        channel = str(body.get("channel", ""))
        if c.resent(shard, sql, origin, channel):
            return []
        return c.on_ddl(shard, sql, position, origin, channel)

    def _command(self, body: Mapping[str, Any]) -> list[Decision]:
        """An operator command; one the coordinator cannot take leaves it as it was."""
        before = snapshot(self.coordinator)
        try:
            return self.coordinator.command(OperatorCommand.from_json(body["command"]))
        except (ShardMergeError, KeyError, TypeError, ValueError) as e:
            c = self.coordinator
            self.coordinator = restore(before, c.router, c.configs, c.default)
            raise ValueError(f"the command was not taken: {e}") from None

    def _refuse(self, seq: int, record: Record, why: str) -> Folded:
        self.refused = [*self.refused[-63:], (seq, why)]
        return Folded(seq, record, (), (), why)

    # --- saving -----------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The replica as JSON values (the coordinator's own snapshot inside)."""
        return {"coordinator": snapshot(self.coordinator), **self.meta()}

    def meta(self) -> dict[str, Any]:
        """The replica but its coordinator, as JSON values (an engine that saves the
        coordinator anyway keeps these beside it: :meth:`with_coordinator`)."""
        return {
            "seq": self.seq,
            "owners": sorted([str(s), job] for s, job in self.owners.items()),
            "versions": sorted([str(t), v] for t, v in self.versions.items()),
            "refused": [list(r) for r in self.refused],
        }

    @classmethod
    def with_coordinator(cls, coordinator: Coordinator, meta: Mapping[str, Any]) -> Replica:
        """The replica of :meth:`meta` around a coordinator restored from its own save."""
        return cls(
            coordinator,
            int(meta["seq"]),
            {ShardId.parse(s): job for s, job in meta["owners"]},
            {TargetId.parse(t): int(v) for t, v in meta["versions"]},
            [(int(seq), str(why)) for seq, why in meta["refused"]],
        )

    @classmethod
    def restore(
        cls,
        data: Mapping[str, Any],
        router: Router,
        configs: Mapping[TargetId, TargetConfig] | None = None,
        default: TargetConfig = DEFAULT_CONFIG,
    ) -> Replica:
        coordinator = restore(data["coordinator"], router, dict(configs or {}), default)
        return cls.with_coordinator(coordinator, data)


# --- the shape of a record's body -------------------------------------------------------------

_SHARD = {"register", "ddl", "await", "ahead", "shadow", "prints", "stop"}


# --- the owner's rules (G5), as the job and the memory engine both apply them ------------


@dataclass(frozen=True)
class Ack:
    """What the owner knows of one member before it moves a table to its next version:
    whether the member is ``live`` (heartbeating, or within its lease), whether it
    ``folded`` the log record that decided that version, and whether it still has a write
    ``planned_below`` that version (the memory engine's outbox; the streaming job's
    member plans its writes at its fold, so it has none once it folded)."""

    member: str
    live: bool
    folded: bool
    planned_below: bool = False


def owner_waits_for(acks: Iterable[Ack]) -> list[str]:
    """G5: the members the owner waits for before it moves a table from ``v`` to ``v+1``:
    every live one that has not folded the decision of ``v+1``, or still has a write
    planned below it. A member that is down is not waited for (it is fenced when it comes
    back: G4). Empty: the owner may run the change."""
    return [a.member for a in acks if a.live and (not a.folded or a.planned_below)]


def stale_change(
    before: Iterable[str], after: Iterable[str], have: Iterable[str], statement: str
) -> str | None:
    """Whether a table whose columns are ``have`` is where a change from the columns
    ``before`` to ``after`` starts (names compared case-blind): None (run it), ``"done"``
    (it has the change already: an owner ran it and stopped before recording it), or why
    neither (an owner that stopped past its lease must not run an old change over a newer
    one: a column added again after it was renamed). Judged on the columns the change adds
    or takes away; a change of types only is run (a sink changes a type once)."""
    old, new = {c.lower() for c in before}, {c.lower() for c in after}
    cols = {c.lower() for c in have}
    gone, added = old - new, new - old
    if gone <= cols and not (added & cols):
        return None
    if added <= cols and not (gone & cols):
        return "done"
    return (
        f"the table's columns are neither those before {statement!r} nor those after it: "
        "another owner changed it since; nothing is run"
    )


def body_problem(kind: str, body: Mapping[str, Any]) -> str | None:
    """What is wrong with a record's body for its kind (:class:`Record`), or None.

    Checked before the fold takes a record, so a record of the wrong shape is refused with
    the reason (and kept in :attr:`Replica.refused`) instead of stopping every job's fold
    with a bare error; the check reads the record alone, so every replica refuses it alike.
    """
    if kind == "invalid":
        return str(body.get("reason", "not a group log record"))
    if kind in _SHARD and not isinstance(body.get("shard"), str):
        return f"'shard' must be a string, not {body.get('shard')!r}"
    strings = {"register": ("create",), "ddl": ("sql",)}.get(kind, ())
    for key in strings:
        if not isinstance(body.get(key), str):
            return f"{key!r} must be a string, not {body.get(key)!r}"
    # a ddl record's ``origin`` is the upstream's own id of the statement, any JSON value
    # (a binlog position as a list, a GTID as text, null): not checked here
    optional = {"ddl": ("channel",), "await": ("reason",), "ahead": ("reason",)}
    for key in optional.get(kind, ()):
        if body.get(key) is not None and not isinstance(body[key], str):
            return f"{key!r} must be a string or null, not {body[key]!r}"
    if kind in ("shadow", "prints"):
        seen = body.get("seen")
        ok = isinstance(seen, list) and all(
            isinstance(x, list) and len(x) == 2 and isinstance(x[1], str) for x in seen
        )
        if not ok:
            return f"'seen' must be a list of [position, text] pairs, not {seen!r}"
    if kind == "command" and not isinstance(body.get("command"), dict):
        return f"'command' must be an object, not {body.get('command')!r}"
    if kind == "join" and "settings" in body:
        settings = body["settings"]
        if not (isinstance(settings, dict) and isinstance(settings.get("fingerprint"), str)):
            return f"'settings' must be an object with a string 'fingerprint', not {settings!r}"
    return None


# --- what a member's fold depends on -----------------------------------------------------------


def settings_fingerprint(summary: Mapping[str, Any]) -> str:
    """A stable hash of the canonical JSON of ``summary`` (what a member's fold depends
    on: its routes, its targets' modes and policies, :data:`RECORD_FORMAT`). Members whose
    fingerprints differ fold one log differently: one would be fenced, or wait in its gate,
    for good; so a member refuses to go on with one whose fingerprint differs."""
    text = json.dumps(summary, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def settings_differences(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], at: str = ""
) -> list[str]:
    """The paths (``targets.shop.orders.mode``) where two settings summaries differ, each
    with both values: ``here`` is ``mine``, ``there`` is ``theirs``."""
    out: list[str] = []
    for key in sorted(set(mine) | set(theirs), key=str):
        path = f"{at}{key}"
        a, b = mine.get(key), theirs.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += settings_differences(a, b, f"{path}.")
        elif a != b:
            out.append(f"{path} ({json.dumps(a)} here, {json.dumps(b)} there)")
    return out


# --- the target-level decisions, as the owner reads them -----------------------------------


def decision_to_json(d: CreateTarget | ApplyDDL) -> dict[str, Any]:
    """A downstream change the fold decided, as JSON (every replica decides the same one
    at the same version, so whichever job publishes it first publishes the one text)."""
    out: dict[str, Any] = {
        "target": str(d.target),
        "schema": schema_to_json(d.schema),
        "statement": d.statement,
        "reason": d.reason,
    }
    if isinstance(d, ApplyDDL):
        out["kind"] = "alter"
        out["specs"] = specs_to_json(d.specs)
    else:
        out["kind"] = "create"
    return out


def decision_from_json(data: Mapping[str, Any]) -> CreateTarget | ApplyDDL:
    try:
        target = TargetId.parse(str(data["target"]))
        schema = schema_from_json(data["schema"])
        if data["kind"] == "create":
            return CreateTarget(target, schema, str(data["statement"]), str(data["reason"]))
        if data["kind"] == "alter":
            specs = specs_from_json(data["specs"])
            return ApplyDDL(target, specs, schema, str(data["statement"]), str(data["reason"]))
    except (KeyError, TypeError, ValueError, ShardMergeError) as e:
        raise GroupError(f"not a downstream change of the group log: {data!r}: {e}") from e
    raise GroupError(f"unknown downstream change kind {data.get('kind')!r}")
