"""Internal helpers shared by the format decoders: the decode error, JSON paths, hashes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shardmerge.errors import ShardMergeError

__all__ = ["DecodeError", "canonical", "fingerprint", "join_path", "validate"]

M = TypeVar("M", bound=BaseModel)


class DecodeError(ShardMergeError):
    """A record that cannot be decoded; ``reason`` names the field (``... at payload.op``).

    Raised inside the format decoders only: :func:`tests.oracle.decode_py.decode_record`
    turns it into a :class:`~streaming.source.contract.DeadLetter`, so the job keeps the
    record and goes on.
    """

    def __init__(self, what: str, path: str) -> None:
        self.reason = f"{what} at {path}" if path else what
        super().__init__(self.reason)


def join_path(prefix: str, loc: Sequence[int | str]) -> str:
    """``("data", 0, "id")`` under ``prefix`` -> ``prefix.data[0].id``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validate(model: type[M], data: Any, prefix: str) -> M:
    """``model.model_validate(data)``; the first error becomes a DecodeError with its path."""
    if not isinstance(data, dict):
        raise DecodeError(f"expected a JSON object, got {_json_kind(data)}", prefix or "value")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = [p for p in err["loc"] if not (isinstance(p, str) and "[" in p)]
        path = join_path(prefix, loc)
        if err["type"] == "missing":
            raise DecodeError(f"missing {loc[-1] if loc else 'value'}", path) from None
        raise DecodeError(f"{err['msg']} (got {_short(err.get('input'))})", path) from None


def fingerprint(obj: Any) -> str:
    """A short stable hash of a JSON value: sha1 of its canonical JSON (sorted keys, no
    spaces, UTF-8, non-ASCII kept), first 16 hex digits. The Spark decoder computes the same
    string, so the canonical form is part of the contract."""
    return hashlib.sha1(canonical(obj).encode("utf-8")).hexdigest()[:16]


def canonical(obj: Any) -> str:
    """A JSON value's canonical text (sorted keys, no spaces, non-ASCII kept)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return {list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
