"""The JSON views of the running job: locks, shards, progress, dead letters.

Built from the state the last batch persisted (the coordinator's pure state, restored
here without Spark), the batch observer and Spark's ``StreamingQueryProgress`` (driver
memory, read over py4j: no Spark job). Held rows and dead letters come from
:class:`~streaming.ops.tables.TableCounts`, counted after a batch, off its thread.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from typing import Any

from coordinator.coordinator import Coordinator
from coordinator.moves import kept_statement
from coordinator.state import restore
from coordinator.views import HeldView, TargetView
from schemas.model import TableSchema, name_key
from streaming.config import Settings
from streaming.ops.lag import classify
from streaming.ops.observer import BatchObserver
from streaming.source.control import commit_seconds
from streaming.storage.state_store import StateStore

__all__ = ["Views", "lag_by_partition", "lag_by_target", "progress_dicts"]


def _offsets(raw: Any) -> dict[str, dict[str, int]]:
    """Kafka source offsets (``{"topic": {"0": 12}}``), given as JSON text or a dict."""
    if raw is None:
        return {}
    data = json.loads(raw) if isinstance(raw, str) else raw
    return {t: {p: int(o) for p, o in parts.items()} for t, parts in data.items()}


def lag_by_partition(progress: dict[str, Any] | None) -> dict[tuple[str, int], int]:
    """Records behind the latest offset, per topic-partition, from one query progress: the
    Kafka source's ``latestOffset`` (what the broker had when the batch was planned)
    against its ``endOffset`` (what the batch read up to)."""
    out: dict[tuple[str, int], int] = {}
    if not progress:
        return out
    for source in progress.get("sources", []):
        if not str(source.get("description", "")).startswith("KafkaV2"):
            continue
        end = _offsets(source.get("endOffset"))
        latest = _offsets(source.get("latestOffset"))
        for topic, parts in latest.items():
            for part, offset in parts.items():
                read = end.get(topic, {}).get(part, offset)
                out[(topic, int(part))] = max(offset - read, 0)
    return out


def lag_by_target(
    lags: dict[tuple[str, int], int], settings: Settings, kinds: dict[str, tuple[Any, ...]]
) -> dict[str, int]:
    """``lags`` (per topic-partition) summed per target, as ``shardmerge lag`` attributes
    them (``streaming.ops.lag.classify``): a shard's topic to its target; a topic that
    carries several shards under ``(shared topics)``; schema-change topics and tables no
    route takes are left out. ``kinds``: a cache of each topic's attribution."""
    out: dict[str, int] = {}
    router = None
    for (topic, _), n in lags.items():
        if topic not in kinds:
            router = router or settings.router()
            kinds[topic] = classify(topic, settings.sources, router)
        kind, _, target = kinds[topic]
        key = target if kind == "shard" else "(shared topics)" if kind == "shared" else None
        if key is not None:
            out[key] = out.get(key, 0) + n
    return dict(sorted(out.items()))


def progress_dicts(query: Any) -> list[dict[str, Any]]:
    """The query's recent progress updates as plain dicts (oldest first)."""
    if query is None:
        return []
    return [json.loads(p.json) for p in query.recentProgress]


def _columns(schema: TableSchema | None) -> dict[str, str]:
    return {} if schema is None else {c.name: c.type.type_sql() for c in schema.columns}


def schema_difference(shard: TableSchema, joined: TableSchema | None) -> dict[str, Any]:
    """What a shard's schema lacks, adds or types differently, against the joined one."""
    if joined is None:
        return {"missing": [], "extra": [], "retyped": []}
    mine = {name_key(c.name): c for c in shard.columns}
    theirs = {name_key(c.name): c for c in joined.columns}
    return {
        "missing": [theirs[k].name for k in theirs if k not in mine],
        "extra": [mine[k].name for k in mine if k not in theirs],
        "retyped": [
            {"column": mine[k].name, "shard": mine[k].type.type_sql(), "joined": t}
            for k in mine
            if k in theirs and (t := theirs[k].type.type_sql()) != mine[k].type.type_sql()
        ],
    }


class Views:
    def __init__(
        self,
        settings: Settings,
        store: StateStore,
        observer: BatchObserver,
        query: Any = None,
        counts: Any = None,
    ) -> None:
        self.settings = settings
        self.observer = observer
        self.query = query
        self.counts = counts
        self.store = store  # the job's own: commands go to the inbox `shardmerge unlock` uses
        self.member: Any = None  # streaming.group.member.GroupMember, when the job is in a group
        self._recent: tuple[float, list[dict[str, Any]]] = (0.0, [])
        self._topic_kinds: dict[str, tuple[Any, ...]] = {}  # lag_by_target's cache
        # What reading the job's topics costs, counted at its start (streaming.ops.lag).
        self.read_cost: Any = None
        self._recent_lock = threading.Lock()

    def recent_progress(self) -> list[dict[str, Any]]:
        """Spark's recent query progress, fetched over py4j at most once a second (the page
        and Prometheus ask often; each ask from a new thread costs a py4j connection)."""
        with self._recent_lock:
            at, recent = self._recent
            if time.monotonic() - at > 1.0:
                recent = progress_dicts(self.query)
                self._recent = (time.monotonic(), recent)
            return recent

    # --- the state -----------------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        """The last persisted state: the observer's, or the store's before this run's first
        batch (a restarted job shows its locks at once)."""
        state: dict[str, Any] | None = self.observer.snapshot()["state"]
        if state is None:
            latest = self.store.latest()
            state = None if latest is None else latest[1]
        return state

    def coordinator(self, state: dict[str, Any] | None) -> Coordinator | None:
        if state is None:
            return None
        return restore(
            state["coordinator"],
            self.settings.router(),
            self.settings.target_configs(),
            self.settings.default_config(),
        )

    # --- locks ---------------------------------------------------------------------------

    def locks(self) -> dict[str, Any]:
        state = self.state()
        c = self.coordinator(state)
        held_rows = self.counts.held_rows() if self.counts is not None else {}
        targets = [] if c is None else [self._target(t, held_rows) for t in c.target_views()]
        failure = self.store.failure()
        return {
            "batch": None if state is None else state["batch"],
            "targets": targets,
            "waiting": self._waiting(c, targets, held_rows),
            "stopped": None
            if failure is None
            else {"batch": failure["batch"], "error": failure["error"]},
            "commands_waiting": [c["words"] for c in self.store.inbox()],
        }

    @staticmethod
    def _waiting(
        c: Coordinator | None, targets: list[dict[str, Any]], held_rows: dict[tuple[str, str], int]
    ) -> list[dict[str, Any]]:
        """Shards whose rows wait without a DDL of theirs pending (before their table's
        CREATE TABLE, ahead of a DDL not received yet), and any other shard with rows in the
        stash that no lock lists: every stashed row is on the page with why."""
        out = [
            {
                "target": str(w.target),
                "shard": str(w.shard),
                "kind": w.kind,
                "reason": w.reason,
                "since": commit_seconds(w.since),
                "rows": held_rows.get((str(w.target), str(w.shard)), 0),
            }
            for w in (c.waiting() if c is not None else [])
        ]
        listed = {(w["target"], w["shard"]) for w in out}
        listed |= {(t["target"], h["shard"]) for t in targets for h in t["held"]}
        for (target, shard), rows in sorted(held_rows.items()):
            if rows and (target, shard) not in listed:
                out.append({
                    "target": target, "shard": shard, "kind": "stashed", "since": None,
                    "rows": rows,
                    "reason": "rows in the stash that no lock or wait holds (a release that "
                    "has not replayed them yet)",
                })  # fmt: skip
        return out

    def _target(self, t: TargetView, held_rows: dict[tuple[str, str], int]) -> dict[str, Any]:
        return {
            "target": str(t.id),
            "mode": t.mode,
            "stage": t.stage,
            "conflict": t.conflict,
            "shards": len(t.shards),
            "rollout": self._rollout(t),
            "joined": _columns(t.joined),
            "held": [self._held(h, held_rows.get((str(t.id), str(h.shard)), 0)) for h in t.held],
            **_policy(t),
            "shard_schemas": [
                {"shard": str(s.shard), "held": s.held, **schema_difference(s.upstream, t.joined)}
                for s in t.shards
            ],
        }

    @staticmethod
    def _rollout(t: TargetView) -> dict[str, Any]:
        """How far the DDL in flight has come: pessimistic, the shards that ran the lock's
        DDL; optimistic, while shards are held on a DDL (one that conflicts, a rename say,
        waits until every shard ran it), the shards held on one, which ran it; otherwise
        the shards whose schema is the joined schema (synced). A held rename leaves the
        joined schema as it was, so counting the synced shards then would count the shards
        that have not run it."""
        total = len(t.shards)
        if t.mode == "pessimistic" and t.expected_sql is not None:
            done = sum(1 for h in t.held if h.ready)
            return {"ddl": t.expected_sql, "done": done, "total": total, "of": "ran it"}
        ran = [h for h in t.held if h.pending]
        if ran:
            return {"ddl": ran[0].pending[0][0], "done": len(ran), "total": total, "of": "ran it"}
        synced = sum(
            1
            for s in t.shards
            if t.joined is not None and not any(schema_difference(s.upstream, t.joined).values())
        )
        return {
            "ddl": None,
            "done": synced,
            "total": total,
            "of": "synced",
        }

    @staticmethod
    def _held(h: HeldView, rows: int) -> dict[str, Any]:
        return {
            "shard": str(h.shard),
            "pending_ddl": [sql for sql, _ in h.pending]
            or (["(rows ahead of a DDL not yet received)"] if h.awaiting is not None else []),
            "conflict": h.conflict,
            "since": commit_seconds(h.since),
            "held_rows": rows,
            "ready": h.ready,
        }

    # --- shards --------------------------------------------------------------------------

    def shards(self) -> dict[str, Any]:
        state = self.state()
        c = self.coordinator(state)
        out = []
        if c is not None:
            shards = [(s, t.id) for t in c.target_views() for s in t.shards]
            for s, tid in sorted(shards, key=lambda x: x[0].shard):
                out.append(
                    {
                        "shard": str(s.shard),
                        "target": str(tid),
                        "route": c.route_row(s.shard).action,
                        "version": s.version,
                        "columns": _columns(s.schema),
                    }
                )
        return {"batch": None if state is None else state["batch"], "shards": out}

    # --- progress ------------------------------------------------------------------------

    def progress(self) -> dict[str, Any]:
        snap = self.observer.snapshot()
        recent = self.recent_progress()
        last = recent[-1] if recent else None
        return {
            "now": time.time(),
            "batches": [
                {"batch": r.batch, "ended_at": r.ended_at, "steps": r.steps, "stats": r.stats}
                for r in snap["history"]
            ],
            "spark": [
                {
                    "batch": p.get("batchId"),
                    "timestamp": p.get("timestamp"),
                    "input_rows": p.get("numInputRows"),
                    "input_rows_per_second": p.get("inputRowsPerSecond"),
                    "processed_rows_per_second": p.get("processedRowsPerSecond"),
                    "duration_ms": p.get("durationMs", {}),
                    "lag": sum(lag_by_partition(p).values()),
                }
                for p in recent
            ],
            "lag": [
                {"topic": topic, "partition": part, "records": n}
                for (topic, part), n in sorted(lag_by_partition(last).items())
            ],
            "lag_targets": self.lag_targets(last),
            "read_cost": None if self.read_cost is None else dataclasses.asdict(self.read_cost),
            "totals": snap["totals"],
        }

    def lag_targets(self, progress: dict[str, Any] | None) -> dict[str, int]:
        """Records behind per target at the last trigger (:func:`lag_by_target`)."""
        return lag_by_target(lag_by_partition(progress), self.settings, self._topic_kinds)

    # --- the group ---------------------------------------------------------------------------

    def group(self) -> dict[str, Any]:
        """The group this job is a member of (docs/groups.md): members live or down as this
        job sees their heartbeats, the owner's term, decided and applied versions, and
        this member's counters; ``{"group": None}`` for a job that writes alone."""
        if self.member is None:
            return {"group": None}
        status: dict[str, Any] = self.member.status()
        return status

    # --- moves ---------------------------------------------------------------------------

    def moves(self) -> dict[str, Any]:
        """Each declared move (docs/moves.md): its sides, state, the freeze positions per
        source and the switch marker's, what its switch waits for, and the statements it
        keeps for the switch (``to``'s queued, ``from``'s deferred)."""
        state = self.state()
        saved = (state or {}).get("moves", {})
        progress = saved.get("progress", {})
        out = []
        for m in self.settings.moves:
            p = progress.get(m.id, {})
            out.append(
                {
                    "id": m.id,
                    "from": list(m.from_),
                    "to": m.to,
                    "keys": m.keys,
                    "state": p.get("state", "declared"),
                    "frozen": p.get("frozen", {}),
                    "switched_at": p.get("switched_at"),
                    "waits": saved.get("unmet", {}).get(m.id, []),
                    **{
                        kind: [kept_statement(r) for r in saved.get(kind, {}).get(m.id, [])]
                        for kind in ("queued", "deferred")
                    },
                }
            )
        return {"batch": None if state is None else state["batch"], "moves": out}

    # --- dead letters --------------------------------------------------------------------

    def dead_letters(self) -> dict[str, Any]:
        if self.counts is None:
            return {"by_reason": {}, "latest": [], "as_of": None, "error": None}
        counts: dict[str, Any] = self.counts.dead_letters()
        return counts


def _policy(t: TargetView) -> dict[str, Any]:
    """The target's schema-change policy (the words other than ``forward``), the latest
    decisions it took, and how many per (kind, word) since the checkpoint began."""
    return {
        "policy": dict(t.policy_words),
        "policy_decisions": [
            {"shard": n.shard, "sql": n.sql, "kind": n.kind, "policy": n.policy}
            for n in t.policy_notes
        ],
        "policy_counts": [{"kind": k, "policy": w, "count": n} for k, w, n in t.policy_counts],
    }
