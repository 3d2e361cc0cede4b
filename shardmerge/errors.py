"""The one root exception of shardmerge.

Every error a user can meet derives from :class:`ShardMergeError`, so a caller can catch
one type. Messages carry the path to the problem (``at column "c": INT vs VARCHAR(10)``)
and, where an operator must act, what to do.
"""

from __future__ import annotations

__all__ = ["ShardMergeError"]


class ShardMergeError(Exception):
    """Root of every error raised by shardmerge."""
