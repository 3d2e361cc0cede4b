"""docker-compose.yml (for users with Docker) is a valid Compose file.

Checked with docker-compose 1.x, which validates without a Docker engine; scripts/test
installs it (scripts/install-mariadb)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_docker_compose_config_accepts_the_file() -> None:
    done = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert {"kafka", "mariadb-1", "mariadb-2", "connect", "shardmerge"} <= set(services)
