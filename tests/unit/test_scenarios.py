"""Every scenario file the project ships passes on the memory engine, and the
coordinator's state survives a JSON round trip after every step of every scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.scenario.model import load_scenario
from coordinator.scenario.runner import run_memory

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").rglob("*.yaml"))


def test_the_shipped_scenarios_are_all_here() -> None:
    shared = Path(__file__).parents[1] / "scenarios" / "dm"
    assert len(list(shared.glob("*.yaml"))) == 35


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_passes_on_memory_engine(path: Path) -> None:
    result = run_memory(load_scenario(path))
    assert result.output["failures"] == []
    assert result.ok


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_state_round_trips_at_every_step(path: Path) -> None:
    plain = run_memory(load_scenario(path))
    tripped = run_memory(load_scenario(path), roundtrip=True)
    assert tripped.output == plain.output
