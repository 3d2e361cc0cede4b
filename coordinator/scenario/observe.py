"""What an engine observed at a point in time, and checking it against expectations.

Every engine produces an :class:`Observation`; expectations are checked the same way for
all of them, so engines agree by construction on what "passes" means.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from coordinator.coordinator import Coordinator
from coordinator.ids import TargetId
from coordinator.scenario.downstream import DeadLetter
from coordinator.scenario.model import Expect, ExpectDeadLetter
from coordinator.scenario.values import canonical
from schemas.ddl import parse_type
from schemas.model import TableSchema
from shardmerge.errors import ShardMergeError

__all__ = ["Observation", "SeenDeadLetter", "check", "observe", "row_key", "sorted_rows"]


@dataclass(frozen=True)
class SeenDeadLetter:
    """A dead letter of the file's rows: its shard (``source.db.table``, the file's own
    names), the reason, and the row image it carries (after; a delete's before)."""

    shard: str
    reason: str
    image: dict[str, Any]

    @classmethod
    def of(cls, d: DeadLetter) -> SeenDeadLetter:
        return cls(str(d.shard), d.reason, d.image)

    def holds(self, key: dict[str, Any]) -> bool:
        """Whether the image holds each of ``key``'s values (names case-insensitive)."""
        lowered = {k.lower(): v for k, v in self.image.items()}
        return all(k.lower() in lowered and _same(lowered[k.lower()], v) for k, v in key.items())


@dataclass(frozen=True)
class Observation:
    schema: TableSchema | None
    rows: list[dict[str, Any]]
    locks: list[dict[str, Any]]
    error: str | None
    moves: dict[str, str] = field(default_factory=dict)  # state per move id
    dead_letters: tuple[SeenDeadLetter, ...] = ()

    def columns(self) -> dict[str, str]:
        return {c.name: c.type.type_sql() for c in self.schema.columns} if self.schema else {}

    def dead_letter_rows(self) -> list[dict[str, Any]]:
        """The dead letters as the output JSON lists them: shard, key (the image's values
        of the downstream key's columns; the whole image without them) and reason."""
        key = [k.lower() for k in self.schema.primary_key] if self.schema else []
        out = []
        for d in self.dead_letters:
            lowered = {k.lower(): (k, v) for k, v in d.image.items()}
            held = dict(lowered[k] for k in key if k in lowered) or d.image
            values = {k: canonical(v) for k, v in held.items()}
            out.append({"shard": d.shard, "key": values, "reason": d.reason})
        return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, default=str))

    def blocked(self) -> list[str]:
        return sorted(b for lock in self.locks for b in lock["blocked"])

    def stage(self, target: str) -> str:
        return next((lock["stage"] for lock in self.locks if lock["target"] == target), "none")


def observe(
    c: Coordinator,
    target: TargetId,
    schema: TableSchema | None,
    rows: list[dict[str, Any]],
    error: str | None,
    dead_letters: list[DeadLetter] | None = None,
) -> Observation:
    locks = [
        {
            "target": str(v.target),
            "mode": v.mode,
            "stage": v.stage,
            "blocked": [str(s) for s in v.blocked],
            "pending_ddl": [sql for _, sql, _ in v.pending_ddl],
            **({"conflict": v.conflict} if v.conflict else {}),
        }
        for v in c.locks()
    ]
    dead = tuple(SeenDeadLetter.of(d) for d in dead_letters or [])
    return Observation(schema, rows, locks, error, dead_letters=dead)


def _normal_type(text: str) -> str:
    try:
        return parse_type(text).type_sql()
    except ShardMergeError:
        return text.upper()


def _same(got: Any, want: Any) -> bool:
    """Values compare as ``rows`` do (an engine may read ``1.50`` as text, another as a
    number)."""
    return str(canonical(got)) == str(canonical(want))


def match_dead_letters(
    want: list[ExpectDeadLetter], seen: tuple[SeenDeadLetter, ...]
) -> tuple[list[ExpectDeadLetter], list[SeenDeadLetter]]:
    """The expected dead letters no seen one matches and the seen ones no expected one
    matches, after pairing them one to one (a dead letter matches when its shard is the
    expected one, its reason contains the expected text and its image holds the expected
    key's values). A pairing as large as can be (augmenting paths: an early expectation
    never takes the only dead letter a later one could match)."""

    def fits(w: ExpectDeadLetter, d: SeenDeadLetter) -> bool:
        return d.shard == w.shard and w.reason in d.reason and d.holds(w.key or {})

    paired: dict[int, int] = {}  # seen index -> expected index

    def pair(i: int, tried: set[int]) -> bool:
        for j, d in enumerate(seen):
            if j in tried or not fits(want[i], d):
                continue
            tried.add(j)
            if j not in paired or pair(paired[j], tried):
                paired[j] = i
                return True
        return False

    unmatched = [w for i, w in enumerate(want) if not pair(i, set())]
    return unmatched, [d for j, d in enumerate(seen) if j not in paired]


def row_key(row: dict[str, Any]) -> str:
    return json.dumps(
        {k: canonical(v) for k, v in sorted(row.items())}, sort_keys=True, default=str
    )


def check(expect: Expect, seen: Observation, where: str) -> list[str]:
    """The expectations that do not hold, each as a sentence naming ``where``."""
    failures = []
    columns = seen.columns()
    if expect.columns is not None:
        want = {k: _normal_type(v) for k, v in expect.columns.items()}
        if want != columns:
            failures.append(f"{where}: columns {columns} != expected {want}")
    if expect.nullable is not None and seen.schema is not None:
        for name, nullable in expect.nullable.items():
            col = seen.schema.column(name)
            if col is None or col.nullable != nullable:
                got = "missing" if col is None else col.nullable
                failures.append(f"{where}: column {name} nullable {got} != expected {nullable}")
    if expect.primary_key is not None:
        got_pk = list(seen.schema.primary_key) if seen.schema else []
        if got_pk != expect.primary_key:
            failures.append(f"{where}: primary key {got_pk} != expected {expect.primary_key}")
    if expect.rows is not None:
        names = (
            list(expect.columns)
            if expect.columns is not None
            else sorted({k for r in expect.rows for k in r} or set(columns))
        )

        def project(row: dict[str, Any]) -> dict[str, Any]:
            lowered = {k.lower(): v for k, v in row.items()}
            return {n: lowered.get(n.lower()) for n in names}

        got_rows = Counter(row_key(project(r)) for r in seen.rows)
        want_rows = Counter(row_key(project(r)) for r in expect.rows)
        if got_rows != want_rows:
            missing = sorted((want_rows - got_rows).elements())
            extra = sorted((got_rows - want_rows).elements())
            failures.append(f"{where}: rows differ; missing {missing}, unexpected {extra}")
    if expect.blocked is not None and sorted(expect.blocked) != seen.blocked():
        failures.append(f"{where}: blocked {seen.blocked()} != expected {sorted(expect.blocked)}")
    if expect.locks is not None:
        for target, stage in expect.locks.items():
            if seen.stage(target) != stage:
                failures.append(f"{where}: lock {target} stage {seen.stage(target)} != {stage}")
    if expect.moves is not None:
        for move, state in expect.moves.items():
            if seen.moves.get(move) != state:
                failures.append(f"{where}: move {move} {seen.moves.get(move)} != {state}")
    if expect.dead_letters is not None:
        unmet, unexpected = match_dead_letters(expect.dead_letters, seen.dead_letters)
        if unmet or unexpected:
            wanted = [w.model_dump(exclude_none=True) for w in unmet]
            found = [{"shard": d.shard, "image": d.image, "reason": d.reason} for d in unexpected]
            failures.append(
                f"{where}: dead letters differ; expected but not found {wanted}, "
                f"found but not expected {found}"
            )
    if expect.checks_error():
        if expect.error is None and seen.error is not None:
            failures.append(f"{where}: run stopped with error {seen.error!r}, expected none")
        elif expect.error is not None and (seen.error is None or expect.error not in seen.error):
            failures.append(f"{where}: error {seen.error!r} does not contain {expect.error!r}")
    return failures


def sorted_rows(seen: Observation) -> list[dict[str, Any]]:
    return sorted(({k: canonical(v) for k, v in r.items()} for r in seen.rows), key=row_key)
