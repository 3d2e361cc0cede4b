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
shard in indexes it, taking it out unindexes it; a table made from many shards, as restore
makes one, indexes them in one pass), and by ``ShardState`` itself, which reports every
assignment to a field a view reads to the index it holds a weak reference to. Code that
changes a shard assigns its fields (``st.pending = [*st.pending, ddl]``) and never mutates
them in place.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Iterator, KeysView, MutableMapping, ValuesView
from operator import itemgetter
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
    scan the holes they leave each time its first entry is asked for. Each member's order
    is kept apart, in ``orders``: no tuple per member for the garbage collector to walk."""

    __slots__ = ("members", "ordered", "orders")

    def __init__(self) -> None:
        self.members: OrderedDict[int, ShardState] = OrderedDict()
        self.orders: dict[int, Any] = {}
        self.ordered = True

    @classmethod
    def of(cls, members: list[tuple[Any, ShardState]]) -> _Group:
        """A group of ``(order, shard)`` members, sorted once (stably: members of one order
        keep the order they came in, as :meth:`add` keeps them)."""
        members.sort(key=_ORDER)
        orders, states = zip(*members, strict=True) if members else ((), ())
        keys = list(map(id, states))
        group = cls()
        group.members = OrderedDict(zip(keys, states, strict=True))
        group.orders = dict(zip(keys, orders, strict=True))
        return group

    def add(self, st: ShardState, order: Any) -> None:
        key = id(st)
        if self.ordered and self.members and order < self.orders[next(reversed(self.members))]:
            self.ordered = False
        self.members[key] = st
        self.orders[key] = order

    def discard(self, st: ShardState) -> None:
        key = id(st)
        del self.members[key]
        del self.orders[key]

    def first(self) -> tuple[Any, ShardState]:
        self._sort()
        key, st = next(iter(self.members.items()))
        return self.orders[key], st

    def shards(self) -> list[ShardState]:
        self._sort()
        return list(self.members.values())

    def _sort(self) -> None:
        if not self.ordered:
            orders = self.orders
            self.members = OrderedDict(sorted(self.members.items(), key=lambda kv: orders[kv[0]]))
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
        group.discard(st)
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


_ORDER = itemgetter(0)

# The views, in this order. A shard's keys are one per view (None: not in it); its order in
# a view is its hold order, (held_seq, place), in _WAITING, _POSTS and _CONFLICTS, and its
# place among the target's shards in the others (_POST_REASONS is only ever counted).
_SCHEMAS, _FINALS, _WAITING, _POSTS, _POST_REASONS, _CONFLICTS = range(6)
_BY_HOLD = (False, False, True, True, False, True)
Keys = tuple[Hashable, Hashable, Hashable, Hashable, Hashable, Hashable]


class ShardIndex:
    """The views of one target's shards (see the module docstring)."""

    def __init__(self, refused: bool = False) -> None:
        self.refused = refused  # the downstream refused a change: every shard waits
        self.views = tuple(_View() for _ in range(6))
        self.states: dict[int, ShardState] = {}
        # What a shard keeps of its index: a weak reference, so that a coordinator is freed
        # as soon as it is dropped (the job drops one every batch), not left for the garbage
        # collector's next full pass; the shards and the index would otherwise refer to each
        # other, and so would every object of the coordinator.
        self.ref = weakref.ref(self)

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
        """``st``'s key in each view (None: not in it)."""
        waits = bool(st.pending) or st.awaiting is not None or self.refused
        admitted = st.admitted
        post = (st.schema, st.post) if waits and st.post is not None else None
        return (
            st.schema if admitted else None,
            st.final if admitted else None,
            True if waits else None,
            post,
            None if post is None else (post, st.conflict),
            (waits if st.conflict else None),
        )

    def attach(self, st: ShardState, order: int) -> None:
        fields = st.__dict__
        held = st.held_seq
        keys = self.keys(st)
        for view, key, by_hold in zip(self.views, keys, _BY_HOLD, strict=True):
            if key is not None:
                view.add(key, st, (held, order) if by_hold else order)
        fields["_index"] = self.ref
        fields["_index_order"] = order
        fields["_index_held"] = held
        fields["_index_keys"] = keys
        self.states[id(st)] = st

    def attach_all(self, states: Iterable[ShardState]) -> None:
        """Index ``states``, the n-th at order n, into an index that has no shard yet.

        Restoring the state puts thousands of shards in at once: each view's groups are
        collected in one pass and sorted once, instead of one insert per shard."""
        if self.states:
            raise ValueError("attach_all is for an index that has no shard yet")
        collected: list[dict[Hashable, list[tuple[Any, ShardState]]]] = [{} for _ in self.views]
        # The members of a key by the key's id as well: restored shards of one shape share
        # one schema object, which finds its group without comparing schemas. (Every key is
        # kept by its shard until the end: no id is reused meanwhile.)
        by_id: list[dict[int, list[tuple[Any, ShardState]]]] = [{} for _ in self.views]
        for order, st in enumerate(states):
            fields = st.__dict__
            held = st.held_seq
            keys = self.keys(st)
            for groups, known, key, by_hold in zip(collected, by_id, keys, _BY_HOLD, strict=True):
                if key is None:
                    continue
                member = ((held, order) if by_hold else order, st)
                members = known.get(id(key))
                if members is None:
                    members = groups.get(key)
                    if members is None:
                        members = groups[key] = []
                    known[id(key)] = members
                members.append(member)
            fields["_index"] = self.ref
            fields["_index_order"] = order
            fields["_index_held"] = held
            fields["_index_keys"] = keys
            self.states[id(st)] = st
        for view, groups in zip(self.views, collected, strict=True):
            for key, members in groups.items():
                view.groups[key] = _Group.of(members)
                view.size += len(members)

    def detach(self, st: ShardState) -> None:
        for view, key in zip(self.views, st.__dict__["_index_keys"], strict=True):
            if key is not None:
                view.discard(key, st)
        del self.states[id(st)]
        for name in ("_index", "_index_order", "_index_held", "_index_keys"):
            del st.__dict__[name]

    def update(self, st: ShardState) -> None:
        """``st`` changed a field a view reads: move it where its keys now say."""
        fields = st.__dict__
        old: Keys = fields["_index_keys"]
        held = st.held_seq
        moved = held != fields["_index_held"]  # a new hold order: out of, and back into, views
        fields["_index_held"] = held
        order = fields["_index_order"]
        new = self.keys(st)
        for view, old_key, key, by_hold in zip(self.views, old, new, _BY_HOLD, strict=True):
            if (old_key is key or old_key == key) and not (moved and by_hold):
                continue
            if old_key is not None:
                view.discard(old_key, st)
            if key is not None:
                view.add(key, st, (held, order) if by_hold else order)
        fields["_index_keys"] = new

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
        self._next = 0  # the order of the next new shard (a shard keeps its own in the index)
        self.stamp = next(_STAMPS)  # new whenever a shard comes or goes, unique per table
        if shards:  # all at once: one pass per view (see ShardIndex.attach_all)
            self._shards = dict(shards)
            self._next = len(self._shards)
            self.index.attach_all(self._shards.values())

    def __getitem__(self, shard: ShardId) -> ShardState:
        return self._shards[shard]

    def __setitem__(self, shard: ShardId, st: ShardState) -> None:
        old = self._shards.get(shard)
        if old is not None:
            order: int = old.__dict__["_index_order"]
            self.index.detach(old)
        else:
            order = self._next
            self._next += 1
        self._shards[shard] = st
        self.index.attach(st, order)
        self.stamp = next(_STAMPS)

    def __delitem__(self, shard: ShardId) -> None:
        st = self._shards.pop(shard)
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
