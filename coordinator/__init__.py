"""Shard DDL coordination: routing, pessimistic and optimistic locks, operator commands.

Pure: every call returns decisions as values (:mod:`coordinator.decisions`); engines
execute them. The protocol is written down in ``coordinator/PROTOCOL.md``.
"""

from coordinator.commands import OperatorCommand, parse_command
from coordinator.coordinator import Coordinator, LockView, RowRoute, TargetConfig
from coordinator.decisions import ApplyDDL, CreateTarget, Decision, Hold, Release, Truncate
from coordinator.ids import ShardId, TargetId
from coordinator.routing import Extract, Route, Router
from coordinator.state import restore, snapshot
from coordinator.target import ConflictError

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
