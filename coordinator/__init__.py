"""Shard DDL coordination: routing, pessimistic and optimistic locks, operator commands.

Pure: every call returns decisions as values (:mod:`coordinator.decisions`); engines
execute them. The protocol is written down in ``coordinator/PROTOCOL.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardmerge.lazy import lazy_names

if TYPE_CHECKING:
    from coordinator.commands import OperatorCommand, parse_command
    from coordinator.coordinator import Coordinator, LockView, RowRoute, TargetConfig
    from coordinator.decisions import ApplyDDL, CreateTarget, Decision, Hold, Release, Truncate
    from coordinator.ids import ShardId, TargetId
    from coordinator.routing import Extract, Route, Router
    from coordinator.state import restore, snapshot
    from coordinator.target import ConflictError

# Each name and the module that defines it: a name is imported when first used, so
# importing one light module of the package (the operator CLI reads settings and the
# saved state) does not load sqlglot.
_WHERE = {
    "OperatorCommand": "coordinator.commands",
    "parse_command": "coordinator.commands",
    "Coordinator": "coordinator.coordinator",
    "LockView": "coordinator.coordinator",
    "RowRoute": "coordinator.coordinator",
    "TargetConfig": "coordinator.coordinator",
    "ApplyDDL": "coordinator.decisions",
    "CreateTarget": "coordinator.decisions",
    "Decision": "coordinator.decisions",
    "Hold": "coordinator.decisions",
    "Release": "coordinator.decisions",
    "Truncate": "coordinator.decisions",
    "ShardId": "coordinator.ids",
    "TargetId": "coordinator.ids",
    "Extract": "coordinator.routing",
    "Route": "coordinator.routing",
    "Router": "coordinator.routing",
    "restore": "coordinator.state",
    "snapshot": "coordinator.state",
    "ConflictError": "coordinator.target",
}

__all__ = [
    "ApplyDDL",
    "ConflictError",
    "Coordinator",
    "CreateTarget",
    "Decision",
    "Extract",
    "Hold",
    "LockView",
    "OperatorCommand",
    "Release",
    "Route",
    "Router",
    "RowRoute",
    "ShardId",
    "TargetConfig",
    "TargetId",
    "Truncate",
    "parse_command",
    "restore",
    "snapshot",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE)
