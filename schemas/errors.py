"""The schema-level errors, under the project's root :class:`ShardMergeError`."""

from __future__ import annotations

from shardmerge.errors import ShardMergeError

__all__ = ["DDLError", "Incompatible", "SchemaError"]


class SchemaError(ShardMergeError):
    """A schema or a schema change is invalid (unknown column, duplicate column, ...)."""


class Incompatible(ShardMergeError):
    """Two schemas have no order (``compare``) or no upper bound (``join``).

    ``path`` names where they differ, outermost first, e.g. ``('column "c"',)``;
    ``detail`` says how (``INT vs VARCHAR(10)``).
    """

    def __init__(self, detail: str, path: tuple[str, ...] = ()) -> None:
        self.detail = detail
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.path:
            return self.detail
        return f"at {' / '.join(self.path)}: {self.detail}"

    def under(self, step: str) -> Incompatible:
        """The same error seen one level further out (``step`` is prepended to the path)."""
        return Incompatible(self.detail, (step, *self.path))


class DDLError(ShardMergeError):
    """A DDL statement could not be parsed or is not supported.

    The statement and the reason are kept so that the lock shows them to the operator,
    who can then skip the statement, replace it, or execute it as is
    (``shardmerge unlock TARGET --shard SHARD --action skip|exec``).
    """

    def __init__(self, statement: str, reason: str) -> None:
        self.statement = statement
        self.reason = reason
        super().__init__(f"cannot handle DDL {statement!r}: {reason}")
