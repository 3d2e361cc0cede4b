"""The Sink port: what the job asks of the table format its targets are written in.

Every call the batch, the executor, moves and a group's owner make of a target table goes
through a :class:`Sink`. ``streaming.storage.delta_sink.DeltaSink`` is the first implementation;
``tests/integration/test_sink_contract.py`` is the contract any sink must pass. A target is
named by its ``TargetId``; where its table lives is the sink's business.

What a sink promises:

- **Idempotent schema work.** ``create`` creates the table only when it is not there;
  ``alter`` makes each change of a decision only where the table still needs it (its
  columns are read first), so a batch run again, or an owner after another owner died
  between its change and its record, changes nothing twice. Each records its cause
  (the statement and why), which ``history`` reads back.
- **A change it cannot make is refused, with advice** (:class:`SinkError`), never half
  made: :func:`apply_downstream` turns that into a :class:`Change` that says so; the job
  then keeps the target's rows in the stash until the operator acts.
- **Exactly-once row writes.** ``merge``, ``truncate`` and ``rehome`` each carry a write
  slot (``streaming.storage.slots``): a slot the table recorded for this job already is skipped,
  so a batch run again writes nothing twice. ``last_slot`` reads the last one recorded.

The job's own storage (the stash of held rows, the dead letters, the state) is not a
target and stays on Delta beside the checkpoint, whatever the targets' sink.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame

from coordinator.decisions import ApplyDDL, CreateTarget
from coordinator.ids import TargetId
from schemas.model import ColumnType
from shardmerge.errors import ShardMergeError

__all__ = ["Change", "Sink", "SinkError", "apply_downstream", "refusal"]

Match = tuple[tuple[str, str], ...]  # columns and the values a shard's rows hold


class SinkError(ShardMergeError):
    """The sink cannot make a change; the message says what the operator can do."""


@dataclass(frozen=True)
class Change:
    """What :func:`apply_downstream` did: ``applied``, or refused with ``advice`` (the
    whole message for the operator: what cannot be done, and what to do)."""

    applied: bool
    advice: str = ""


class Sink(Protocol):
    """A table format the job writes its targets in (this module's text)."""

    # Several jobs write the tables (a group): a row write that lost a commit race to
    # another job's on data alone is run again (its slot makes that safe).
    shared: bool

    def create(self, decision: CreateTarget) -> None:
        """The target's table with the decision's schema, if it is not there; the cause
        recorded."""
        ...

    def alter(self, decision: ApplyDDL, slots: Callable[[], int], *, rewrite: bool) -> None:
        """Each change of ``decision`` the table still needs, its cause recorded; a write
        that fills or rewrites rows takes its slot from ``slots``. ``rewrite``: a type
        change the sink cannot make in place may rewrite the table. Raises
        :class:`SinkError` for a change it cannot make."""
        ...

    def in_place(self, current: ColumnType, wanted: ColumnType) -> bool:
        """Whether the sink changes a column of type ``current`` to ``wanted`` without
        rewriting its rows."""
        ...

    def columns(self, target: TargetId) -> dict[str, str]:
        """The table's columns (lower-case names) and their types as the sink names them."""
        ...

    def merge(
        self, target: TargetId, rows: DataFrame, key: list[str], columns: list[str], slot: int
    ) -> dict[str, int]:
        """Upsert or delete each row by ``key`` (its ``_action``: ``u`` or ``d``) in one
        write under ``slot``; what it did (``inserted``, ``updated``, ``deleted``; zeros
        when the slot was written already, with ``skipped``: 1 when ``rows`` were then
        not read at all, so that nothing waits for what reading them would report)."""
        ...

    def truncate(self, target: TargetId, matches: list[Match], slot: int) -> int:
        """Delete the rows of the shards ``matches`` name (an empty match: every row) in
        one write under ``slot``; the rows deleted."""
        ...

    def rehome(
        self, target: TargetId, match: Match, values: Match, slot: int, where: str | None = None
    ) -> int:
        """Rows of the shard ``match`` names (and, with ``where``, a Spark SQL condition
        on them: a split move's keys) take ``values``, in one write under ``slot``; the
        rows changed."""
        ...

    def last_slot(self, target: TargetId) -> int | None:
        """The last write slot the table recorded for this job (None: none yet)."""
        ...

    def history(self, target: TargetId, limit: int) -> list[dict[str, Any]]:
        """The table's changes, newest first: ``version``, ``timestamp`` (ISO 8601),
        ``operation`` and ``cause`` (the statement and why, for a downstream change the
        job made; None for other writes)."""
        ...


def refusal(d: ApplyDDL, e: SinkError) -> str:
    """The advice of a refused change: the sink's reason, and what the job does meanwhile."""
    return (
        f"the downstream cannot run {d.statement!r} ({d.reason}): {e}. Every row of "
        f"{d.target} waits in the stash meanwhile; once the table is fixed, run "
        f"`shardmerge unlock {d.target} --retry`"
    )


def apply_downstream(
    sink: Sink, d: CreateTarget | ApplyDDL, slots: Callable[[], int], *, rewrite: bool
) -> Change:
    """The one door of a downstream change, for a job alone (``streaming.batch.executor``) and
    for a group's owner (``streaming.group.member``): created or altered, or refused with the
    advice. Any other failure fails the batch (or the owner's pass) and runs again."""
    if isinstance(d, CreateTarget):
        sink.create(d)
        return Change(True)
    try:
        sink.alter(d, slots, rewrite=rewrite)
    except SinkError as e:
        return Change(False, refusal(d, e))
    return Change(True)
