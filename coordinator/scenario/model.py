"""The scenario file format (see docs/scenarios.md), validated with pydantic.

Validation errors name the file and the place in it (``steps[3].insert``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coordinator.moves import MoveSettings, MoveState, check_moves
from coordinator.policy import ALLOWED, Word
from shardmerge.errors import ShardMergeError

__all__ = [
    "ENGINES",
    "SINKS",
    "Expect",
    "ExpectDeadLetter",
    "Scenario",
    "ScenarioFileError",
    "Step",
    "load_scenario",
]

Stage = Literal["none", "waiting", "conflict"]
Engine = Literal["memory", "spark", "mariadb"]
ENGINES: tuple[Engine, ...] = ("memory", "spark", "mariadb")
# Where the job writes the target: a Delta table, or a table of a database (the JDBC sink).
SinkKind = Literal["delta", "mariadb", "mysql", "postgresql"]
SINKS: tuple[SinkKind, ...] = ("delta", "mariadb", "mysql", "postgresql")


class ScenarioFileError(ShardMergeError):
    """A scenario file is invalid; the message names the file and where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Extract(_Strict):
    source_column: str | None = None
    db_column: str | None = None
    table_column: str | None = None


class Update(_Strict):
    key: dict[str, Any]
    set: dict[str, Any]


class ExpectDeadLetter(_Strict):
    """One dead letter: a row of ``shard`` (``source.db.table``) the downstream did not
    take, with ``reason`` a substring of why, and, if given, ``key``: values its row image
    holds (its after image; a delete's before)."""

    shard: str = Field(pattern=r"^[^.\s]+\.[^.\s]+\.[^.\s]+$")
    reason: str
    key: dict[str, Any] | None = None


class Expect(_Strict):
    """Expectations; each one left out is not checked (``error: null`` is checked)."""

    columns: dict[str, str] | None = None
    nullable: dict[str, bool] | None = None
    primary_key: list[str] | None = None
    rows: list[dict[str, Any]] | None = None
    blocked: list[str] | None = None
    locks: dict[str, Stage] | None = None
    error: str | None = None
    moves: dict[str, MoveState] | None = None  # state per move id (docs/moves.md)
    # Every dead letter of the file's rows so far, one to one (``[]``: none).
    dead_letters: list[ExpectDeadLetter] | None = None

    def checks_error(self) -> bool:
        return "error" in self.model_fields_set


MOVE_ACTIONS = ("copy", "freeze", "switch")
# A group's jobs (docs/scenarios.md, "Several jobs"): each names a job, `clock` seconds.
GROUP_ACTIONS = ("pause", "resume", "crash", "clock")
ACTIONS = ("sql", "insert", "update", "delete", "operator", "expect", "arrive", *MOVE_ACTIONS,
           *GROUP_ACTIONS)  # fmt: skip


class Step(_Strict):
    shard: str | None = None
    sql: str | None = None
    insert: dict[str, Any] | None = None
    update: Update | None = None
    delete: dict[str, Any] | None = None
    operator: str | None = None
    expect: Expect | None = None
    # The copy tool of a move (docs/moves.md), each naming the move's id.
    copy_: str | None = Field(None, alias="copy")  # `copy` is BaseModel's
    freeze: str | None = None
    switch: str | None = None
    # A job of the file's group: stops running batches and heartbeats (SIGSTOP), runs
    # again, or dies after appending its next batch's records and restarts from its last
    # saved state; `clock` moves the group's virtual clock on by that many seconds.
    pause: str | None = None
    resume: str | None = None
    crash: str | None = None
    clock: float | None = Field(None, gt=0)
    # A statement the job reads late (`late: true` on a `sql` step): it runs upstream at
    # its step, but reaches the job only at a later `arrive` step naming its shard (Debezium
    # orders no topic against another: the shard's rows in between reach the job first,
    # ahead of their DDL).
    late: bool = False
    arrive: str | None = None

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        actions = [k for k in ACTIONS if self.action(k) is not None]
        if len(actions) != 1:
            raise ValueError(
                f"a step has exactly one of {', '.join(ACTIONS)}; got {actions or 'none'}"
            )
        if actions[0] in MOVE_ACTIONS and self.shard:
            raise ValueError(f"a {actions[0]} step names a move, not a shard")
        if actions[0] in GROUP_ACTIONS and self.shard:
            raise ValueError(f"a {actions[0]} step names a job or seconds, not a shard")
        if actions[0] in ("sql", "insert", "update", "delete") and not self.shard:
            raise ValueError(f"a {actions[0]} step needs a shard (source.db.table)")
        if self.shard and len(self.shard.split(".")) != 3:
            raise ValueError(f"shard is written source.db.table, got {self.shard!r}")
        if self.late and actions[0] != "sql":
            raise ValueError(
                f"late is for a sql step (a statement the job reads late), not {actions[0]}"
            )
        if self.arrive is not None and (self.shard or len(self.arrive.split(".")) != 3):
            raise ValueError(
                "an arrive step names the shard (source.db.table) whose late statements "
                f"reach the job, as `arrive: {self.arrive}`; not shard:"
            )
        return self

    def action(self, kind: str) -> Any:
        """The value of the step's ``kind`` key (``copy`` included)."""
        return getattr(self, "copy_" if kind == "copy" else kind)

    @property
    def move(self) -> str | None:
        """The move a copy, freeze or switch step names."""
        return self.copy_ or self.freeze or self.switch

    @property
    def kind(self) -> str:
        for k in ACTIONS:
            if self.action(k) is not None:
                return k
        raise AssertionError("validated step without action")


class Scenario(_Strict):
    name: str
    mode: Literal["optimistic", "pessimistic"]
    strict: bool = False
    # The target's schema-change policy per DDL kind, as in the job's settings.
    policy: dict[str, Word] = Field(default_factory=dict)
    target: str = Field(pattern=r"^[^.\s]+\.[^.\s]+$")
    extract: Extract | None = None
    shards: dict[str, str]
    # Tables of `shards` that exist upstream at the start but whose CREATE the job never
    # reads (e.g. an online-DDL shadow table made before the job's first offset).
    unseen: list[str] = Field(default_factory=list)
    # Rows carry their table's schema (Debezium with `schemas.enable`).
    row_schemas: bool = False
    # Several jobs on the target (a group): per job, the shards it reads, as glob patterns
    # over "source.db.table"; the first live job in this order is the owner. Without it,
    # one job.
    jobs: dict[str, list[str]] = Field(default_factory=dict)
    # How long a job that stopped heartbeating counts as live (virtual seconds).
    lease_s: float = Field(30.0, gt=0)
    steps: list[Step] = Field(default_factory=list)
    expect: Expect | None = None
    moves: list[MoveSettings] = Field(default_factory=list)
    # Whether the copy tool writes heartbeat rows in the marker tables (after each copy
    # step and, on the spark engine, before the job catches up): false leaves the job's
    # marker watermark to the freeze and switch markers (docs/moves.md).
    heartbeats: bool = True
    # The engines the file runs on; a file for some engines only is reported as skipped
    # by the others.
    engines: list[Engine] = Field(default_factory=lambda: list(ENGINES), min_length=1)
    # The sinks whose target the file's expectations describe (a database's VARCHAR(3)
    # refuses what Delta's STRING takes); a job writing another sink reports the file as
    # skipped. The memory engine plans for the first one unless told another.
    sinks: list[SinkKind] = Field(default_factory=lambda: list(SINKS), min_length=1)
    path: str = ""

    @field_validator("policy")
    @classmethod
    def _policy_words(cls, value: dict[str, Word]) -> dict[str, Word]:
        for kind, word in value.items():
            if word not in ALLOWED.get(kind, ()):
                raise ValueError(
                    f"{kind}: {word!r}: kinds are {', '.join(ALLOWED)}; "
                    f"{kind} takes {', '.join(ALLOWED.get(kind, ()))}"
                )
        return value

    @model_validator(mode="after")
    def _jobs(self) -> Scenario:
        named = [
            (i, step.kind, step.action(step.kind))
            for i, step in enumerate(self.steps)
            if step.kind in ("pause", "resume", "crash")
        ]
        if (named or any(s.clock for s in self.steps)) and not self.jobs:
            raise ValueError("pause, resume, crash and clock steps need `jobs:`")
        for i, kind, job in named:
            if job not in self.jobs:
                raise ValueError(f"steps[{i}].{kind}: no job {job!r} (jobs: {list(self.jobs)})")
        if self.jobs and self.moves:
            raise ValueError("moves are not supported with several jobs yet")
        if self.jobs and self.engines != ["memory"]:
            raise ValueError("several jobs run on the memory engine only: engines: [memory]")
        return self

    @model_validator(mode="after")
    def _late(self) -> Scenario:
        """Every late statement reaches the job at a later ``arrive`` of its shard; every
        ``arrive`` has a late statement to hand on."""
        late: dict[str, list[int]] = {}
        for i, step in enumerate(self.steps):
            if step.late:
                late.setdefault(step.shard or "", []).append(i)
            elif step.arrive is not None and not late.pop(step.arrive, None):
                raise ValueError(f"steps[{i}].arrive: no late statement of {step.arrive} before it")
        if any(s.late for s in self.steps) and self.engines != ["memory"]:
            raise ValueError(
                "late statements run on the memory engine only (the spark engine cannot "
                "yet hold a statement back past a batch): engines: [memory]"
            )
        for shard, steps in late.items():
            raise ValueError(
                f"steps[{steps[0]}]: a late statement of {shard} never arrives (add "
                f"`arrive: {shard}` after it)"
            )
        return self

    @model_validator(mode="after")
    def _unseen(self) -> Scenario:
        for name in self.unseen:
            if name not in self.shards:
                raise ValueError(f"unseen: {name!r} is not one of the file's shards")
        return self

    @model_validator(mode="after")
    def _moves(self) -> Scenario:
        problems = check_moves([m.move() for m in self.moves])
        if problems:
            raise ValueError("; ".join(problems))
        for i, step in enumerate(self.steps):
            named = step.move
            if named is not None and named not in {m.id for m in self.moves}:
                raise ValueError(f"steps[{i}].{step.kind}: no move {named!r} is declared")
        return self

    def runs_on(self, engine: str, sink: str | None = None) -> bool:
        """Whether ``engine``, writing ``sink`` (None: whatever it writes), runs the file."""
        return engine in self.engines and (sink is None or sink in self.sinks)

    def planned_sink(self, sink: str | None = None) -> str:
        """The sink the memory engine plans for: ``sink``, or the file's first."""
        if sink is not None and sink not in SINKS:
            known = ", ".join(SINKS)
            raise ScenarioFileError(f"{self.path}: unknown sink {sink!r}: one of {known}")
        return sink if sink is not None else self.sinks[0]

    def planned_dialect(self, sink: str | None = None) -> str | None:
        """The database dialect of :meth:`planned_sink` (its columns refuse more values
        than Delta's, ``schemas.storage.limit``); None for Delta."""
        planned = self.planned_sink(sink)
        return None if planned == "delta" else planned


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ScenarioFileError(f"{path}: cannot read: {e}") from e
    except yaml.YAMLError as e:
        raise ScenarioFileError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ScenarioFileError(f"{path}: a scenario is a mapping with name, mode, target, ...")
    try:
        return Scenario.model_validate({**data, "path": str(path)})
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(file)'}: {err['msg']}"
            for err in e.errors()
        )
        raise ScenarioFileError(f"{path}: {problems}") from e
