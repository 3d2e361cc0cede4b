"""Rows that prove a DDL came before them: their schema fingerprint changed.

Internal module. Debezium orders no topic against another, so a shard's rows can arrive
before the DDL that changed their table. A row naming a column the target lacks shows it
(the engine calls :meth:`Coordinator.await_ddl`); a type change alone does not, but the
row's schema fingerprint (``schema_fp``: a hash of the value schema the connector sent)
does. Each shard keeps the fingerprint its rows carry since its last DDL, learned from
the first such row; a later row with another fingerprint is ahead of a DDL that has not
arrived, and the shard waits for it from that row on, as for an unknown column. The
shard's next DDL forgets the fingerprint: rows after it teach the new one.

A shard's rows arrive in position order (one topic partition per table), which is what
makes "the first row after the DDL" the right teacher. Rows positioned at or before the
shard's last DDL belong to an older schema and teach nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.ids import Position
from coordinator.target import ShardState

__all__ = ["fingerprint_wait", "fingerprints_change"]


def fingerprint_wait(st: ShardState, seen: Iterable[tuple[Position, str]]) -> Position | None:
    """Where ``st``'s rows start waiting for a DDL not yet received, or None.

    ``seen``: the fingerprints a batch's rows of the shard carry, each with the position of
    the first row carrying it (rows without a fingerprint left out), in any order. Learns
    the shard's fingerprint when it has none. A held or waiting shard learns nothing: its
    rows are kept and come again when they replay.
    """
    if st.held or st.awaiting is not None:
        return None
    after = sorted(
        ((p, fp) for p, fp in seen if st.last_alter is None or p > st.last_alter),
        key=lambda item: item[0],
    )
    for position, fp in after:
        if st.fingerprint is None:
            st.fingerprint = fp
        elif fp != st.fingerprint:
            return position
    return None


def fingerprints_change(st: ShardState | None, seen: Iterable[tuple[Position, str]]) -> bool:
    """Whether :func:`fingerprint_wait` would change ``st`` (learn its fingerprint, or
    start a wait): a group appends a record for the call only then (coordinator/group.py),
    not one per shard per batch."""
    if st is None or st.held or st.awaiting is not None:
        return False
    return any(
        st.fingerprint is None or fp != st.fingerprint
        for p, fp in seen
        if st.last_alter is None or p > st.last_alter
    )
