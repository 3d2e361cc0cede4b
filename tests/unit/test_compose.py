"""docker-compose.yml (for users with Docker) is a valid Compose file.

Checked with docker-compose 1.x, which validates without a Docker engine; scripts/test
installs it (scripts/install-databases)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


SECRETS = {
    "SHARDMERGE_OPS_TOKEN": "5f1c9a3e7b2d4086c1e9a7f3b5d2c4e6a8",
    "MARIADB_ROOT_PASSWORD": "db-secret",
    "DEBEZIUM_PASSWORD": "cdc-secret",
    "GRAFANA_ADMIN_PASSWORD": "grafana-secret",
    "DOWNSTREAM_ROOT_PASSWORD": "downstream-root-secret",
    "DOWNSTREAM_PASSWORD": "downstream-secret",
}


def compose_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False, env={**clean, **env},
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_docker_compose_has_no_default_secrets() -> None:
    for missing in SECRETS:
        done = compose_config({k: v for k, v in SECRETS.items() if k != missing})
        assert done.returncode != 0 and f"set {missing}" in done.stderr, (missing, done.stderr)
    assert "change-me" not in (ROOT / "docker-compose.yml").read_text()


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_docker_compose_config_accepts_the_file() -> None:
    done = compose_config(SECRETS)
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    published = {
        name: [str(p.get("host_ip", "")) + ":" + str(p.get("published", "")) if isinstance(p, dict) else p
               for p in svc.get("ports", [])]
        for name, svc in services.items()
        if svc.get("ports")
    }  # fmt: skip
    # the database profile: a job writing the merged table into the downstream MariaDB,
    # its password from the environment
    env = services["shardmerge-database"]["environment"]
    assert env["SHARDMERGE__SINK__KIND"] == "jdbc" and env["SHARDMERGE__SINK__DIALECT"] == "mariadb"
    assert env["SHARDMERGE__SINK__PASSWORD"] == SECRETS["DOWNSTREAM_PASSWORD"]
    assert services["downstream"]["profiles"] == ["database"]
    # only the dashboard, Prometheus and Grafana, on loopback
    assert sorted(published) == ["grafana", "prometheus", "shardmerge"], published
    for name, ports in published.items():
        assert all(p.startswith("127.0.0.1:") for p in ports), (name, ports)
    assert {
        "kafka", "mariadb-1", "mariadb-2", "connect", "register-connectors", "shardmerge",
        "prometheus", "grafana",
    } <= set(services)  # fmt: skip
    job = services["shardmerge"]["environment"]
    # reachable from other containers, so a token (the settings refuse it otherwise)
    assert job["SHARDMERGE__OPS__BIND"] == "0.0.0.0" and job["SHARDMERGE__OPS__TOKEN"]
    mounted = {
        v.split(":")[0] if isinstance(v, str) else v["source"]
        for name in ("prometheus", "grafana", "register-connectors", "mariadb-1", "mariadb-2")
        for v in services[name]["volumes"]
    }
    for path in mounted:  # every mounted file of the repository exists
        assert (ROOT / path).exists() or Path(path).exists(), path
    # Debezium connects as its own user; no password reaches the connector configs or the
    # one-shot that registers them
    register = services["register-connectors"]["environment"]
    assert not any("PASSWORD" in k for k in register), register
    connect = services["connect"]["environment"]
    assert connect["DEBEZIUM_PASSWORD"] == SECRETS["DEBEZIUM_PASSWORD"]
    assert connect["CONNECT_CONFIG_PROVIDERS_ENV_PARAM_ALLOWLIST_PATTERN"] == "DEBEZIUM_PASSWORD"
    for name in ("mariadb-1", "mariadb-2"):
        env = services[name]["environment"]
        assert env["MARIADB_USER"] == "debezium", env
        assert env["MARIADB_PASSWORD"] == SECRETS["DEBEZIUM_PASSWORD"], env


def test_connectors_use_a_least_privilege_user_and_hold_no_password() -> None:
    from devkit.upstream_local import DEBEZIUM_GRANTS

    compose = (ROOT / "docker-compose.yml").read_text()
    files = sorted((DEPLOY / "connect").glob("*.json"))
    assert [f.stem for f in files] == ["src1", "src2"]
    for f in files:
        assert f"./deploy/connect/{f.name}:/connectors/{f.name}:ro" in compose, f
        config = json.loads(f.read_text())
        assert config["database.user"] == "debezium", f
        # resolved by Connect's EnvVarConfigProvider when the task starts
        assert config["database.password"] == "${env:DEBEZIUM_PASSWORD}", f
        assert not any("secret" in str(v).lower() for v in config.values()), f
    grants = (DEPLOY / "mariadb" / "debezium-grants.sql").read_text()
    statements = [line for line in grants.splitlines() if line and not line.startswith("--")]
    # the grant set the tests' real MariaDB + Debezium upstream runs with
    assert statements == [f"GRANT {DEBEZIUM_GRANTS} ON *.* TO 'debezium'@'%';"]
    script = (DEPLOY / "connect" / "register.sh").read_text()
    assert "PASSWORD" not in script.replace("${env:DEBEZIUM_PASSWORD}", "")
    assert "<<" not in script  # no JSON built from a here-document


def test_scrape_config_targets_the_jobs_port_and_the_rules_file_it_loads() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    (scrape,) = config["scrape_configs"]
    assert scrape["metrics_path"] == "/metrics"
    assert scrape["static_configs"][0]["targets"] == ["shardmerge:9464"]
    assert scrape["authorization"]["type"] == "Bearer"
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]


def test_alert_rules_and_grafana_use_only_metrics_the_job_serves() -> None:
    """Every shardmerge_ series named in the rules and the dashboard is documented in
    docs/operations.md, whose table lists what streaming/ops/metrics.py serves (the
    metrics test checks the names against a live scrape)."""
    documented = set(
        re.findall(r"^\| `(shardmerge_[a-z_]+)`", (ROOT / "docs/operations.md").read_text(), re.M)
    )
    assert documented
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    alerts = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    assert {"ShardmergeLockInConflict", "ShardmergeLagGrowing", "ShardmergeDeadLettersIncreasing",
            "ShardmergeNoBatch"} <= set(alerts)  # fmt: skip
    dashboard = json.loads((DEPLOY / "grafana/dashboards/shardmerge.json").read_text())
    exprs = list(alerts.values()) + [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for expr in exprs:
        for name in re.findall(r"shardmerge_[a-z_]+", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            assert base in documented, f"{name} in {expr!r} is not a documented metric"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_checks_the_rules_and_the_scrape_config(tmp_path: Path) -> None:
    rules = subprocess.run(
        ["promtool", "check", "rules", str(DEPLOY / "prometheus/alerts.yml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert rules.returncode == 0, rules.stdout + rules.stderr
    # The config names the paths inside the container: check a copy pointing here.
    config = (DEPLOY / "prometheus/prometheus.yml").read_text()
    config = config.replace("/etc/prometheus/alerts.yml", str(DEPLOY / "prometheus/alerts.yml"))
    (tmp_path / "token").write_text("t")
    config = config.replace("/prometheus/shardmerge-token", str(tmp_path / "token"))
    (tmp_path / "prometheus.yml").write_text(config)
    done = subprocess.run(
        ["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_per_table_connectors_route_every_shard_table_to_one_topic_per_source() -> None:
    import re

    from devkit.upstream_local import Routed, routed_config

    compose = (ROOT / "docker-compose.yml").read_text()
    reference = routed_config(Routed(logical="orders", partitions=16))
    for name in ("src1", "src2"):
        shard = json.loads((DEPLOY / "connect" / f"{name}.json").read_text())
        routed = json.loads((DEPLOY / "connect" / "per-table" / f"{name}.json").read_text())
        path = f"./deploy/connect/per-table/{name}.json:/connectors/per-table/{name}.json:ro"
        assert path in compose
        # the same capture, plus the routing transforms the project's real upstream runs
        assert {k: v for k, v in routed.items() if k in shard} == shard
        for key in ("transforms.logical.type", "transforms.shard.type",
                    "transforms.shard.partition.payload.fields", "predicates.routed.type"):  # fmt: skip
            assert routed[key] == reference[key], key
        n = routed["transforms.shard.partition.topic.num"]
        assert routed["topic.creation.routed.partitions"] == n == "16"
        regex = re.compile(routed["transforms.logical.topic.regex"])
        replacement = routed["transforms.logical.topic.replacement"].replace("$1", r"\1")
        assert regex.sub(replacement, f"{name}.db_3.orders_15") == f"{name}.orders"
        assert not regex.fullmatch(name)  # the schema-change topic keeps its name
        routed_topic = re.compile(routed["predicates.routed.pattern"])
        assert routed_topic.fullmatch(f"{name}.orders")
        assert re.fullmatch(routed["topic.creation.routed.include"], f"{name}.orders")
    # the job's source pattern reads the routed topics too
    job = (ROOT / "examples" / "job.yaml").read_text()
    pattern = re.search(r"pattern: '([^']+)'", job)
    assert pattern and re.fullmatch(pattern.group(1), "src1.orders")
