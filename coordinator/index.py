"""What the lock rules ask about a target's shards, kept up to date instead of rescanned.

Internal module. At thousands of shards a lock must not look at every shard on every
event: a rollout of one DDL over n shards would then cost n², and it did (a rename rolled
out over 4,096 shards took minutes of driver time). :class:`ShardIndex` keeps, per target,
the shards sorted into the few views the rules read:

- the admitted shards by schema, and by final schema (``post`` where there is one): the
  distinct shapes, a handful whatever the number of shards, each in the order of its
  first shard;
- the shards whose rows wait (held on a DDL, awaiting one, or every shard while the
  downstream refuses a change: ``Target.held_shards``), in hold order;
- the waiting shards with a ``post`` schema, grouped by (``prev``, ``post``) shape, and
  how many of each group carry which conflict reason;
- the shards in conflict.

The index is fed by :class:`ShardTable`, the mapping of a target's shards (putting a
shard in indexes it, taking it out unindexes it), and by ``ShardState`` itself, which
reports every assignment to a field a view reads. Code that changes a shard assigns its
fields (``st.pending = [*st.pending, ddl]``) and never mutates them in place.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Hashable, Iterator, KeysView, MutableMapping, ValuesView
from typing import TYPE_CHECKING, Any, cast

from coordinator.ids import ShardId
from schemas.model import TableSchema

if TYPE_CHECKING:
    from coordinator.target import ShardState

__all__ = ["INDEXED_FIELDS", "ShardIndex", "ShardTable"]

# The ShardState fields the views read: assigning one updates the index.
INDEXED_FIELDS = frozenset(
    {"schema", "post", "admitted", "pending", "awaiting", "conflict", "held_seq"}
)

PostShape = tuple[TableSchema, TableSchema]  # (prev, post) of a shard that ran a conflict DDL


class _Group:
    """The shards of one key of a view, in the view's order.

    Shards nearly always arrive in order (a new hold has the largest sequence number, and a
    shard keeps its place among the shards), so the group is an insertion-ordered mapping,
    sorted again only after one arrived out of order. An OrderedDict, because shards leave
    from the front (the first shard of a rollout changes schema first) and a dict would
    scan the holes they leave each time its first entry is asked for."""

    __slots__ = ("members", "ordered")

    def __init__(self) -> None:
        self.members: OrderedDict[int, tuple[Any, ShardState]] = OrderedDict()
        self.ordered = True

    def add(self, st: ShardState, order: Any) -> None:
        if self.ordered and self.members and order < self.members[next(reversed(self.members))][0]:
            self.ordered = False
        self.members[id(st)] = (order, st)

    def first(self) -> tuple[Any, ShardState]:
        self._sort()
        return next(iter(self.members.values()))

    def shards(self) -> list[ShardState]:
        self._sort()
        return [st for _, st in self.members.values()]

    def _sort(self) -> None:
        if not self.ordered:
            self.members = OrderedDict(sorted(self.members.items(), key=lambda kv: kv[1][0]))
            self.ordered = True


class _View:
    """Shards grouped by a key; a shard whose key is None is not in the view."""

    __slots__ = ("groups", "size")

    def __init__(self) -> None:
        self.groups: dict[Hashable, _Group] = {}
        self.size = 0

    def add(self, key: Hashable, st: ShardState, order: Any) -> None:
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group()
        group.add(st, order)
        self.size += 1

    def discard(self, key: Hashable, st: ShardState) -> None:
        group = self.groups[key]
        del group.members[id(st)]
        if not group.members:
            del self.groups[key]
        self.size -= 1

    def count(self, key: Hashable) -> int:
        group = self.groups.get(key)
        return 0 if group is None else len(group.members)

    def shards(self, key: Hashable) -> list[ShardState]:
        group = self.groups.get(key)
        return [] if group is None else group.shards()

    def firsts(self) -> list[tuple[Hashable, ShardState]]:
        """Each key with its first shard, keys in the order of their first shards."""
        firsts = [(group.first(), key) for key, group in self.groups.items()]
        firsts.sort(key=lambda item: item[0][0])
        return [(key, first[1]) for first, key in firsts]


# A shard's place in every view: (key, order) per view, in this order.
_SCHEMAS, _FINALS, _WAITING, _POSTS, _POST_REASONS, _CONFLICTS = range(6)
Keys = tuple[tuple[Hashable, Any], ...]


class ShardIndex:
    """The views of one target's shards (see the module docstring)."""

    def __init__(self, refused: bool = False) -> None:
        self.refused = refused  # the downstream refused a change: every shard waits
        self.views = tuple(_View() for _ in range(6))
        self.states: dict[int, ShardState] = {}

    # --- what the rules read ---------------------------------------------------------

    def schemas(self) -> list[TableSchema]:
        """The distinct schemas of the admitted shards, in shard order."""
        return [st.schema for _, st in self.views[_SCHEMAS].firsts()]

    def finals(self) -> list[TableSchema]:
        """The distinct final schemas of the admitted shards, in shard order."""
        return [st.final for _, st in self.views[_FINALS].firsts()]

    @property
    def admitted(self) -> int:
        return self.views[_SCHEMAS].size

    def waiting(self) -> list[ShardState]:
        """The shards whose rows wait, in hold order."""
        return self.views[_WAITING].shards(True)

    @property
    def waiting_count(self) -> int:
        return self.views[_WAITING].size

    def post_groups(self) -> list[tuple[PostShape, ShardState]]:
        """The (prev, post) shapes of the waiting shards that ran a conflict DDL, each with
        its first shard in hold order, in that order."""
        return cast("list[tuple[PostShape, ShardState]]", self.views[_POSTS].firsts())

    def post_shards(self, shape: PostShape) -> list[ShardState]:
        return self.views[_POSTS].shards(shape)

    def post_conflicts_are(self, shape: PostShape, reason: str | None) -> bool:
        """Whether every shard of the group ``shape`` has ``reason`` as its conflict."""
        return self.views[_POST_REASONS].count((shape, reason)) == self.views[_POSTS].count(shape)

    @property
    def conflicts(self) -> int:
        """The number of shards with a conflict, waiting or not."""
        return self.views[_CONFLICTS].size

    def waiting_conflicts(self) -> list[ShardState]:
        """The waiting shards with a conflict, in hold order."""
        return self.views[_CONFLICTS].shards(True)

    @property
    def waiting_conflict_count(self) -> int:
        return self.views[_CONFLICTS].count(True)

    # --- upkeep ----------------------------------------------------------------------

    def keys(self, st: ShardState) -> Keys:
        order: int = st.__dict__["_index_order"]
        hold = (st.held_seq, order)
        waits = bool(st.pending) or st.awaiting is not None or self.refused
        admitted = st.admitted
        post = (st.schema, st.post) if waits and st.post is not None else None
        return (
            (st.schema if admitted else None, order),
            (st.final if admitted else None, order),
            (True if waits else None, hold),
            (post, hold),
            (None if post is None else (post, st.conflict), 0),
            ((waits if st.conflict else None), hold),
        )

    def attach(self, st: ShardState, order: int) -> None:
        object.__setattr__(st, "_index", self)
        object.__setattr__(st, "_index_order", order)
        keys = self.keys(st)
        for view, (key, at) in zip(self.views, keys, strict=True):
            if key is not None:
                view.add(key, st, at)
        object.__setattr__(st, "_index_keys", keys)
        self.states[id(st)] = st

    def detach(self, st: ShardState) -> None:
        for view, (key, _) in zip(self.views, st.__dict__["_index_keys"], strict=True):
            if key is not None:
                view.discard(key, st)
        del self.states[id(st)]
        for name in ("_index", "_index_order", "_index_keys"):
            del st.__dict__[name]

    def update(self, st: ShardState) -> None:
        """``st`` changed a field a view reads: move it where its keys now say."""
        old: Keys = st.__dict__["_index_keys"]
        new = self.keys(st)
        for view, (old_key, old_at), (key, at) in zip(self.views, old, new, strict=True):
            if old_at == at and (old_key is key or old_key == key):
                continue
            if old_key is not None:
                view.discard(old_key, st)
            if key is not None:
                view.add(key, st, at)
        object.__setattr__(st, "_index_keys", new)

    def set_refused(self, refused: bool) -> None:
        if refused != self.refused:
            self.refused = refused
            for st in list(self.states.values()):
                self.update(st)


_STAMPS = itertools.count()


class ShardTable(MutableMapping[ShardId, "ShardState"]):
    """A target's shards by id, in the order they came (like a dict), indexed.

    Putting a shard in indexes it; replacing one keeps the place of its id, as a dict
    does; taking one out (``pop``, ``del``) unindexes it."""

    def __init__(
        self, shards: MutableMapping[ShardId, ShardState] | None = None, refused: bool = False
    ) -> None:
        self.index = ShardIndex(refused)
        self._shards: dict[ShardId, ShardState] = {}
        self._order: dict[ShardId, int] = {}
        self._next = 0
        self.stamp = next(_STAMPS)  # new whenever a shard comes or goes, unique per table
        for shard, st in (shards or {}).items():
            self[shard] = st

    def __getitem__(self, shard: ShardId) -> ShardState:
        return self._shards[shard]

    def __setitem__(self, shard: ShardId, st: ShardState) -> None:
        old = self._shards.get(shard)
        if old is not None:
            self.index.detach(old)
        order = self._order.get(shard)
        if order is None:
            order = self._order[shard] = self._next
            self._next += 1
        self._shards[shard] = st
        self.index.attach(st, order)
        self.stamp = next(_STAMPS)

    def __delitem__(self, shard: ShardId) -> None:
        st = self._shards.pop(shard)
        del self._order[shard]
        self.index.detach(st)
        self.stamp = next(_STAMPS)

    def __iter__(self) -> Iterator[ShardId]:
        return iter(self._shards)

    def __len__(self) -> int:
        return len(self._shards)

    def __contains__(self, shard: object) -> bool:
        return shard in self._shards

    def __repr__(self) -> str:
        return f"ShardTable({self._shards!r})"

    # Views straight from the dict: walking every shard stays as fast as a dict's.
    def keys(self) -> KeysView[ShardId]:
        return self._shards.keys()

    def values(self) -> ValuesView[ShardState]:
        return self._shards.values()

    def items(self) -> Any:
        return self._shards.items()
