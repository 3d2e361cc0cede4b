"""Durable state of the job next to Spark's checkpoint: coordinator state per batch,
batch intents, and the operator command inbox.

Layout under ``CHECKPOINT/shardmerge/``:

- ``state/<batch>.json``: the coordinator after batch ``<batch>`` (written last in a batch,
  atomically). A batch starts from the newest state of an *earlier* batch, so a batch that
  Spark runs again starts from the same state as the first time.
- ``intent/<batch>.json``: the operator commands a batch applies, fixed before it writes
  anything, so a re-run applies exactly the same ones.
- ``commands/<time>-<id>.json``: commands from ``shardmerge unlock``, waiting for the next
  batch. A command stays until a state records it as applied.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["StateStore"]


def _write_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{uuid.uuid4().hex}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    with open(tmp) as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class StateStore:
    def __init__(self, checkpoint: str | Path) -> None:
        self.root = Path(checkpoint) / "shardmerge"

    # --- coordinator state --------------------------------------------------------------

    def _states(self) -> list[int]:
        folder = self.root / "state"
        if not folder.is_dir():
            return []
        return sorted(int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit())

    def load_before(self, batch: int) -> dict[str, Any] | None:
        """The state saved by the newest batch before ``batch`` (None for a fresh job)."""
        earlier = [b for b in self._states() if b < batch]
        if not earlier:
            return None
        data: dict[str, Any] = json.loads(
            (self.root / "state" / f"{earlier[-1]:012d}.json").read_text()
        )
        return data

    def latest(self) -> tuple[int, dict[str, Any]] | None:
        states = self._states()
        if not states:
            return None
        return states[-1], json.loads((self.root / "state" / f"{states[-1]:012d}.json").read_text())

    def save(self, batch: int, data: dict[str, Any]) -> None:
        _write_atomic(self.root / "state" / f"{batch:012d}.json", data)
        (self.root / "failed.json").unlink(missing_ok=True)
        for old in self._states()[:-20]:  # keep a short history for inspection
            (self.root / "state" / f"{old:012d}.json").unlink(missing_ok=True)

    def save_failure(self, data: dict[str, Any]) -> None:
        """What the coordinator saw when a batch stopped the job (a strict conflict): for
        ``shardmerge locks`` and the operator. The batch itself runs again from the state
        before it."""
        _write_atomic(self.root / "failed.json", data)

    def failure(self) -> dict[str, Any] | None:
        path = self.root / "failed.json"
        if not path.exists():
            return None
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    # --- operator commands ---------------------------------------------------------------

    def submit(self, words: str) -> str:
        command_id = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        _write_atomic(
            self.root / "commands" / f"{command_id}.json", {"id": command_id, "words": words}
        )
        return command_id

    def inbox(self) -> list[dict[str, str]]:
        folder = self.root / "commands"
        if not folder.is_dir():
            return []
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]

    def intent(self, batch: int, applied: set[str]) -> list[dict[str, str]]:
        """The commands batch ``batch`` applies: fixed the first time the batch runs."""
        path = self.root / "intent" / f"{batch:012d}.json"
        if path.exists():
            fixed: list[dict[str, str]] = json.loads(path.read_text())
            return fixed
        chosen = [c for c in self.inbox() if c["id"] not in applied]
        _write_atomic(path, chosen)
        return chosen

    def forget_commands(self, applied: set[str]) -> None:
        for c in self.inbox():
            if c["id"] in applied:
                (self.root / "commands" / f"{c['id']}.json").unlink(missing_ok=True)
