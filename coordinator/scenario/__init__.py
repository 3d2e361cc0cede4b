"""Scenario files: the project's test-case language and its dry-run planner.

See ``docs/scenarios.md``. :func:`run_files` runs files on an engine and returns one
result per file; the ``memory`` engine needs neither Kafka nor Spark.
"""

from coordinator.scenario.model import Scenario, ScenarioFileError, load_scenario
from coordinator.scenario.runner import ScenarioResult, run_files

__all__ = ["Scenario", "ScenarioFileError", "ScenarioResult", "load_scenario", "run_files"]
