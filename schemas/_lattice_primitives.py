"""Internal: the small algebra under :mod:`schemas.lattice` (after TiDB's ``schemacmp``).

A *lattice* here is a stateless descriptor that orders and joins plain values: ``compare(a,
b)`` is -1, 0 or 1 or raises :class:`~schemas.errors.Incompatible` when neither is ``<=`` the
other, and ``join(a, b)`` is the least upper bound or raises when none exists. Keeping the
values plain (ints, strings, tuples, dicts) and the rules in a few descriptor objects means a
comparison allocates nothing but the encoded tuples, and a MySQL widening rule is *data*: which
primitive a field is encoded into, not a branch.

Primitives: :class:`Bool`, :class:`Widening` (a number joined by max), :class:`Singleton`,
:class:`Maybe` (None is the bottom), :class:`Prefix` (a list that grows at the end),
:class:`Poset` (a finite order given as a table of covers), :class:`Tuple` (componentwise) and
:class:`Map` (keyed entries, with a rule for an entry against its absence).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from schemas.errors import Incompatible

__all__ = [
    "Bool",
    "EntryLattice",
    "Field",
    "Lattice",
    "Map",
    "Maybe",
    "Poset",
    "Prefix",
    "Singleton",
    "Tuple",
    "Widening",
    "combine",
]

T = TypeVar("T")
V = TypeVar("V")


class Lattice(Protocol[T]):
    """Orders and joins values of one kind."""

    def compare(self, a: T, b: T) -> int: ...

    def join(self, a: T, b: T) -> T: ...


class EntryLattice(Lattice[V], Protocol[V]):
    """A lattice for :class:`Map` values, which also says how a value meets its absence."""

    def absent_conflict(self, value: V) -> str | None:
        """None when ``value`` is larger than its absence, else why the two have no order."""
        ...

    def join_absent(self, value: V) -> V:
        """The least value that is larger than both ``value`` and its absence."""
        ...

    def describe(self, value: V) -> str: ...


def combine(sign: int, other: int) -> int | None:
    """The order of a product whose parts so far give ``sign`` and one more gives ``other``;
    None when they pull in opposite directions (the product has no order)."""
    if other == 0 or other == sign:
        return sign
    if sign == 0:
        return other
    return None


def _render(value: object) -> str:
    return "unspecified" if value is None else str(value)


class Bool:
    """False < True; join is ``or`` (NOT NULL < NULL)."""

    def compare(self, a: bool, b: bool) -> int:
        return (a > b) - (a < b)

    def join(self, a: bool, b: bool) -> bool:
        return a or b


class Widening:
    """A number where larger holds more (a length, a rank); join is ``max``."""

    def compare(self, a: int, b: int) -> int:
        return (a > b) - (a < b)

    def join(self, a: int, b: int) -> int:
        return a if a >= b else b


class Singleton(Generic[T]):
    """Only equal values are ordered (a flag that must match)."""

    def __init__(self, render: Callable[[T], str] = _render) -> None:
        self._render = render

    def compare(self, a: T, b: T) -> int:
        if a == b:
            return 0
        raise Incompatible(f"{self._render(a)} vs {self._render(b)}")

    def join(self, a: T, b: T) -> T:
        self.compare(a, b)
        return a


class Maybe(Generic[T]):
    """None (unspecified) is below every value; two values are ordered by ``inner``."""

    def __init__(self, inner: Lattice[T]) -> None:
        self.inner = inner

    def compare(self, a: T | None, b: T | None) -> int:
        if a is None:
            return 0 if b is None else -1
        if b is None:
            return 1
        return self.inner.compare(a, b)

    def join(self, a: T | None, b: T | None) -> T | None:
        if a is None:
            return b
        if b is None:
            return a
        return self.inner.join(a, b)


class Prefix:
    """A list that only grows at its end (ENUM/SET members): a prefix is smaller."""

    def __init__(self, render: Callable[[tuple[str, ...]], str] = str) -> None:
        self._render = render

    def compare(self, a: tuple[str, ...], b: tuple[str, ...]) -> int:
        if a == b:
            return 0
        if len(a) < len(b) and b[: len(a)] == a:
            return -1
        if len(b) < len(a) and a[: len(b)] == b:
            return 1
        raise Incompatible(f"{self._render(a)} vs {self._render(b)}")

    def join(self, a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
        return a if self.compare(a, b) >= 0 else b


class Poset:
    """A finite order written as data: ``covers[x]`` are the values directly above ``x``.

    Values not mentioned are ordered with nothing but themselves. The join is the least
    common upper bound; when the common upper bounds have no least one (or there are none),
    the join raises.
    """

    def __init__(self, covers: Mapping[str, Iterable[str]]) -> None:
        up: dict[str, set[str]] = {}

        def above(x: str) -> set[str]:
            if x not in up:
                up[x] = {x}
                for y in covers.get(x, ()):
                    up[x] |= above(y)
            return up[x]

        for x in list(covers):
            above(x)
        self._up = {x: frozenset(ys) for x, ys in up.items()}

    def _above(self, x: str) -> frozenset[str]:
        return self._up.get(x) or frozenset((x,))

    def compare(self, a: str, b: str) -> int:
        if a == b:
            return 0
        if b in self._above(a):
            return -1
        if a in self._above(b):
            return 1
        raise Incompatible(f"{a} vs {b}")

    def join(self, a: str, b: str) -> str:
        if a == b:
            return a
        common = self._above(a) & self._above(b)
        least = [x for x in common if common <= self._above(x)]
        if not least:
            raise Incompatible(f"{a} vs {b}")
        return least[0]


@dataclass(frozen=True)
class Field:
    """One component of a :class:`Tuple`.

    ``step`` is prepended to the path of errors from this component (None: not at all);
    ``name`` says what the component is when two components order the tuple both ways, and
    ``witness`` (when given) says instead where inside the component its order comes from.
    """

    lattice: Lattice[Any]
    name: str
    step: str | None = None
    witness: Callable[[Any, Any], str] | None = None

    def why(self, a: object, b: object) -> str:
        """Why this component orders ``a`` and ``b`` as it does, for messages."""
        if self.witness is not None:
            return self.witness(a, b)
        return f"{self.name} is {_render(a)} vs {_render(b)}"


class Tuple:
    """The componentwise product: ordered when no two components pull in opposite ways."""

    def __init__(self, *fields: Field) -> None:
        self.fields = fields

    def compare(self, a: Sequence[Any], b: Sequence[Any]) -> int:
        sign = 0
        first = 0
        for i, f in enumerate(self.fields):
            x, y = a[i], b[i]
            if x is y or x == y:
                continue
            try:
                s = f.lattice.compare(x, y)
            except Incompatible as e:
                raise e.under(f.step) if f.step else e from None
            merged = combine(sign, s)
            if merged is None:
                here = f.why(x, y) if f.witness else f"{_render(x)} vs {_render(y)}"
                detail = f"{here}, while {self.fields[first].why(a[first], b[first])}"
                raise Incompatible(detail, (f.step,) if f.step else ())
            if sign == 0 and s != 0:
                first = i
            sign = merged
        return sign

    def join(self, a: Sequence[Any], b: Sequence[Any]) -> tuple[Any, ...]:
        out = []
        for i, f in enumerate(self.fields):
            x, y = a[i], b[i]
            if x is y or x == y:
                out.append(x)
                continue
            try:
                out.append(f.lattice.join(x, y))
            except Incompatible as e:
                raise e.under(f.step) if f.step else e from None
        return tuple(out)


class Map(Generic[V]):
    """Entries by key; an entry is compared with its counterpart or, lacking one, with its
    absence (:class:`EntryLattice`). ``step`` names an entry in error paths.

    ``join`` keeps ``a``'s keys in ``a``'s order, then ``b``'s other keys in ``b``'s order.
    """

    def __init__(self, value: EntryLattice[V], step: Callable[[V], str]) -> None:
        self.value = value
        self.step = step

    def _side(self, value: V | None) -> str:
        return "absent" if value is None else self.value.describe(value)

    def compare(self, a: Mapping[str, V], b: Mapping[str, V]) -> int:
        sign = 0
        first: tuple[V | None, V | None] | None = None
        for key, x in a.items():
            y = b.get(key)
            if x is y or x == y:
                continue
            s = self._compare_entry(x, y)
            merged = combine(sign, s)
            if merged is None:
                raise self._conflict(x, y, first)
            if sign == 0 and s != 0:
                first = (x, y)
            sign = merged
        for key, y in b.items():
            if key in a:
                continue
            s = self._compare_entry(None, y)
            merged = combine(sign, s)
            if merged is None:
                raise self._conflict(None, y, first)
            if sign == 0 and s != 0:
                first = (None, y)
            sign = merged
        return sign

    def _compare_entry(self, x: V | None, y: V | None) -> int:
        present = x if x is not None else y
        assert present is not None
        try:
            if x is not None and y is not None:
                return self.value.compare(x, y)
            why = self.value.absent_conflict(present)
        except Incompatible as e:
            raise e.under(self.step(present)) from None
        if why is not None:
            detail = f"{why} vs absent" if x is not None else f"absent vs {why}"
            raise Incompatible(detail, (self.step(present),))
        return 1 if x is not None else -1

    def _conflict(
        self, x: V | None, y: V | None, first: tuple[V | None, V | None] | None
    ) -> Incompatible:
        assert first is not None
        fx, fy = first
        where = fx if fx is not None else fy
        assert where is not None
        present = x if x is not None else y
        assert present is not None
        detail = (
            f"{self._side(x)} vs {self._side(y)}, "
            f"while {self.step(where)} is {self._side(fx)} vs {self._side(fy)}"
        )
        return Incompatible(detail, (self.step(present),))

    def witness(self, a: Mapping[str, V], b: Mapping[str, V]) -> str:
        """The first entry that orders ``a`` and ``b``, e.g. ``column "b" is INT vs absent``."""
        for key, x in a.items():
            y = b.get(key)
            if x != y and (y is None or self.value.compare(x, y) != 0):
                return f"{self.step(x)} is {self._side(x)} vs {self._side(y)}"
        for key, y in b.items():
            if key not in a:
                return f"{self.step(y)} is absent vs {self._side(y)}"
        return "no entry"

    def join(self, a: Mapping[str, V], b: Mapping[str, V]) -> dict[str, V]:
        out: dict[str, V] = {}
        for key, x in a.items():
            y = b.get(key)
            if y is None:
                out[key] = self.value.join_absent(x)
            elif x is y or x == y:
                out[key] = x
            else:
                try:
                    out[key] = self.value.join(x, y)
                except Incompatible as e:
                    raise e.under(self.step(x)) from None
        for key, y in b.items():
            if key not in a:
                out[key] = self.value.join_absent(y)
        return out
