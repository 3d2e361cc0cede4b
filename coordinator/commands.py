"""Operator commands as values, parsed from the words an operator types.

``unlock TARGET --shard SHARD --action skip|exec``,
``unlock TARGET --shard SHARD --replace "SQL" [--replace "SQL" ...]``,
``unlock TARGET --force-remove`` and ``unlock TARGET --retry`` (run a downstream change the
sink refused again, after the operator fixed the downstream table). The same words work
on the command line (``shardmerge unlock ...``) and in scenario files
(``{operator: "unlock ..."}``).
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import Any, Literal, get_args

from coordinator.ids import ShardId, TargetId
from shardmerge.errors import ShardMergeError

__all__ = [
    "CommandError",
    "OperatorCommand",
    "add_unlock_arguments",
    "parse_command",
    "refusal",
]

Action = Literal["skip", "exec", "replace", "force-remove", "retry"]


class CommandError(ShardMergeError):
    """An operator command is malformed; the message shows the expected form."""


@dataclass(frozen=True)
class OperatorCommand:
    """A command as a value: what the inbox stores, the batch applies and the API takes.
    ``words()`` is its display (and scenario) form; ``parse_command`` reads it back."""

    target: TargetId
    action: Action
    shard: ShardId | None = None
    statements: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        target: TargetId,
        action: str,
        shard: ShardId | None = None,
        statements: tuple[str, ...] = (),
    ) -> OperatorCommand:
        """A command whose parts agree (the checks ``unlock``'s arguments get)."""
        if action not in ACTIONS:
            raise CommandError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
        if action in ("force-remove", "retry"):
            if shard is not None or statements:
                raise CommandError(f"{action} takes no shard and no statements")
        elif shard is None:
            raise CommandError(f"{action} needs the held shard (source.db.table)")
        elif action == "replace":
            if not statements or not all(s.strip() for s in statements):
                raise CommandError("replace needs one or more non-empty statements")
        elif statements:
            raise CommandError(f"{action} takes no statements (replace does)")
        checked: Action = action  # type: ignore[assignment]
        return cls(target, checked, shard, tuple(statements))

    def to_json(self) -> dict[str, Any]:
        return {
            "target": str(self.target),
            "action": self.action,
            "shard": str(self.shard) if self.shard is not None else None,
            "statements": list(self.statements),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorCommand:
        try:
            target = TargetId.parse(str(data["target"]))
            shard = ShardId.parse(str(data["shard"])) if data.get("shard") else None
        except (KeyError, ValueError) as e:
            raise CommandError(f"a stored command is malformed ({e}): {data!r}") from e
        statements = data.get("statements") or []
        if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
            raise CommandError(f"a stored command's statements are not strings: {data!r}")
        return cls.of(target, str(data.get("action")), shard, tuple(statements))

    def words(self) -> str:
        """The ``unlock ...`` words: every part quoted, so a name with a space or a quote
        reads back as itself (``parse_command``)."""
        text = f"unlock {shlex.quote(str(self.target))}"
        if self.shard is not None:
            text += f" --shard {shlex.quote(str(self.shard))}"
        if self.action == "replace":
            text += "".join(f" --replace {shlex.quote(s)}" for s in self.statements)
        elif self.action in ("force-remove", "retry"):
            text += f" --{self.action}"
        else:
            text += f" --action {self.action}"
        return text


ACTIONS: tuple[str, ...] = get_args(Action)
USAGE = (
    "unlock TARGET --shard SOURCE.DB.TABLE --action skip|exec, "
    'unlock TARGET --shard SOURCE.DB.TABLE --replace "SQL", unlock TARGET --force-remove, '
    "or unlock TARGET --retry"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CommandError(f"{message}; expected {USAGE}")


def add_unlock_arguments(parser: argparse.ArgumentParser, *, cancel: bool = False) -> None:
    """The arguments of ``unlock``; with ``cancel`` (the command line, not the stored
    words) also ``--cancel ID``, which withdraws a queued command and takes no target."""
    parser.add_argument(
        "target", nargs="?" if cancel else None, help="the downstream table, db.table"
    )
    if cancel:
        parser.add_argument(
            "--cancel",
            metavar="ID",
            help="withdraw a queued command (its id as unlock printed it, or as "
            "`shardmerge locks` lists it); alone, without a target",
        )
    parser.add_argument("--shard", help="the held shard, source.db.table")
    parser.add_argument(
        "--action",
        choices=["skip", "exec"],
        help="skip: the pending DDL never runs downstream; exec: it runs as written",
    )
    parser.add_argument(
        "--replace",
        action="append",
        metavar="SQL",
        help="replace the pending DDL with this statement (repeat for several)",
    )
    parser.add_argument(
        "--force-remove",
        action="store_true",
        help="drop the lock: every held shard's pending DDL is skipped",
    )
    parser.add_argument(
        "--retry",
        action="store_true",
        help="run again a downstream change the sink refused (stage conflict), once the "
        "downstream table was fixed by hand; then release every held row",
    )


def command_from_args(args: argparse.Namespace) -> OperatorCommand:
    try:
        target = TargetId.parse(args.target)
        shard = ShardId.parse(args.shard) if args.shard else None
    except ValueError as e:
        raise CommandError(f"{e}; expected {USAGE}") from e
    retry = bool(getattr(args, "retry", False))
    chosen = [bool(args.action), bool(args.replace), bool(args.force_remove), retry]
    if sum(chosen) != 1:
        raise CommandError(
            f"give exactly one of --action, --replace, --force-remove, --retry; expected {USAGE}"
        )
    if args.force_remove:
        return OperatorCommand(target, "force-remove")
    if retry:
        return OperatorCommand(target, "retry")
    if shard is None:
        raise CommandError(f"--shard is required; expected {USAGE}")
    if args.replace:
        return OperatorCommand(target, "replace", shard, tuple(args.replace))
    action: Action = args.action
    return OperatorCommand(target, action, shard)


def parse_command(text: str) -> OperatorCommand:
    """Parse ``unlock ...`` words (as in a scenario's ``operator`` step)."""
    try:
        words = shlex.split(text)
    except ValueError as e:  # an unbalanced quote
        raise CommandError(f"{e} in {text!r}; expected {USAGE}") from e
    if not words or words[0] != "unlock":
        raise CommandError(f"unknown operator command {text!r}; expected {USAGE}")
    parser = _Parser(prog="unlock", add_help=False)
    add_unlock_arguments(parser)
    return command_from_args(parser.parse_args(words[1:]))


def refusal(command: OperatorCommand, locks: list[dict[str, Any]]) -> str | None:
    """Why ``command`` cannot apply to the job as its latest saved state shows it (``locks``:
    the state file's ``locks``, one per target: ``target``, ``blocked``, ...), or None.

    Checked when a command is given (``shardmerge unlock``, the ops API), so that a
    mistyped target or shard, or a replacement that is not one ALTER or TRUNCATE of the
    held shard's table, is refused at once with the reason instead of becoming a command
    error at the next batch. The batch checks again (the state may have moved on)."""
    lock = next((lock for lock in locks if lock["target"] == str(command.target)), None)
    if lock is None:
        known = ", ".join(sorted(lock["target"] for lock in locks)) or "none"
        return f"no target {command.target} in the job's state (targets: {known})"
    if command.shard is None or command.action not in ("skip", "exec", "replace"):
        return None
    if str(command.shard) not in lock["blocked"]:
        held = ", ".join(lock["blocked"]) or "none"
        return f"shard {command.shard} is not held in {command.target} (held: {held})"
    for i, sql in enumerate(command.statements, 1):
        why = _not_a_replacement(sql, command.shard)
        if why is not None:
            return f"replacement statement {i} {why}"
    return None


def _not_a_replacement(sql: str, shard: ShardId) -> str | None:
    from schemas.changes import AlterTable, TruncateTable
    from schemas.ddl import parse_ddl
    from schemas.errors import DDLError

    try:
        changes = parse_ddl(sql)
    except DDLError as e:
        return f"does not parse: {e}"
    if len(changes) != 1 or not isinstance(changes[0], AlterTable | TruncateTable):
        return "is not one ALTER TABLE or TRUNCATE TABLE statement"
    name = changes[0].table
    same_db = name.db is None or name.db.lower() == shard.db.lower()
    if not same_db or name.table.lower() != shard.table.lower():
        return f"changes table {name}, not the held shard's table {shard.db}.{shard.table}"
    return None
