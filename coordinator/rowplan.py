"""What an engine may know about a shard to route its rows, as a value.

An engine that writes many rows at once (the streaming job writes a whole micro-batch in
one MERGE) needs, per shard, a few facts about the coordinator's state: where the rows go,
from which position on they wait, which column renames a row positioned before them must
go through, and where the shard's last ALTER was. :func:`row_plan` hands them out as a
frozen value, so that no engine reads :class:`~coordinator.target.ShardState` internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.coordinator import Coordinator, RowRoute
from coordinator.ids import Position, ShardId

__all__ = ["Renames", "RowPlan", "row_plan"]

# A column rename a shard ran: its position, and the (old, new) names it changed.
Renames = tuple[Position, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class RowPlan:
    """How to treat the rows of one shard, now.

    - ``route``: write, hold, drop or unknown (see :class:`RowRoute`).
    - ``hold_from``: with a ``hold`` route, rows at or after this position wait; rows
      before it arrived late (their topic lags the schema-change topic) and are written.
      None with a ``hold`` route: every row waits (the target refused a change, or the
      table is not registered yet).
    - ``late_renames``: column renames, in order, that a row positioned before each one
      must go through because the downstream no longer has the old name.
    - ``last_alter``: a row positioned before it that names a column the downstream lacks
      is behind that DDL (the column was dropped), not ahead of one still to come.
    """

    route: RowRoute
    hold_from: Position = None
    late_renames: tuple[Renames, ...] = ()
    last_alter: Position = None


def row_plan(c: Coordinator, shard: ShardId) -> RowPlan:
    """The row plan of ``shard`` in ``c``'s current state (reads, never changes it)."""
    route = c.route_row(shard)
    st = c.shard_state(shard)
    if st is None:
        return RowPlan(route)  # a table not registered yet: all its rows wait
    t = c.targets[c.where[shard]]
    hold_from: Position = None
    if route.action == "hold" and t.refused is None:
        hold_from = st.pending[0].position if st.held else st.awaiting
    downstream = t.downstream()
    renames: tuple[Renames, ...] = ()
    if downstream is not None:
        renames = tuple(
            (position, pairs)
            for position, pairs in st.renamed
            if any(not downstream.has_column(old) for old, _ in pairs)
        )
    return RowPlan(route, hold_from, renames, st.last_alter)
