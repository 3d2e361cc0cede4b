"""The wheel is the job without the development kit, and its console script works so.

A cluster installs the wheel (docs/cluster.md); ``devkit/`` (local Kafka and MariaDB, the
producer, the demo, the spark and mariadb scenario engines) lives in a clone only. So the
wheel holds no ``devkit/``, nothing it holds imports ``devkit``, and ``shardmerge`` answers
its job's verbs without it and says, for a development verb, where that verb comes from.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests/scenarios/dm/dm030-add-column-optimistic.yaml"
WHEEL_PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
    "targets"
]["wheel"]["packages"]

# Run in a fresh interpreter: sys.modules["devkit"] = None makes every import of devkit fail
# as it would where only the wheel is installed (ModuleNotFoundError, name "devkit").
BLOCKED = 'import sys\nsys.modules["devkit"] = None\n'

# The job's verbs, the memory engine and --help, then the development kit's verbs.
WITHOUT_DEVKIT = f"""
import contextlib, io
from shardmerge.cli import build_parser, main

def exit_code(argv):
    try:
        return main(argv)
    except SystemExit as e:
        return e.code

shown = io.StringIO()
with contextlib.redirect_stdout(shown):
    assert exit_code(["--help"]) == 0
assert "history" in shown.getvalue() and "demo" in shown.getvalue(), shown.getvalue()
args = build_parser().parse_args(["locks", "--config", "job.yaml", "--json"])
assert (args.verb, args.config, args.json) == ("locks", "job.yaml", True)
assert args.func.__module__ == "streaming.cli.verbs"
assert exit_code(["scenario", "run", {str(SCENARIO)!r}]) == 0
assert exit_code(["demo", "--rows", "10"]) == 2
assert exit_code(["scenario", "run", "--engine", "spark", {str(SCENARIO)!r}]) == 2
kit = [m for m, v in sys.modules.items() if m.split(".")[0] == "devkit" and v is not None]
print("loaded:", sorted(kit))
"""


def python(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_package_of_the_wheel_imports_devkit() -> None:
    """Static, so an import on a path no test runs is caught as well; the development
    verbs are named as strings and imported on use (shardmerge.cli.DEV_VERBS)."""
    assert "devkit" not in WHEEL_PACKAGES
    files = [f for package in WHEEL_PACKAGES for f in sorted((ROOT / package).rglob("*.py"))]
    assert len(files) > 50
    offenders = [
        f"{f.relative_to(ROOT)} imports {m}"
        for f in files
        for m in imports_of(f)
        if m.split(".")[0] == "devkit"
    ]
    assert offenders == []


def test_the_console_script_runs_without_devkit() -> None:
    out = python(BLOCKED + WITHOUT_DEVKIT)
    assert out.returncode == 0, out.stderr
    assert "loaded: []" in out.stdout
    assert "1/1 scenario(s) passed" in out.stderr
    kit = "is part of the development kit (devkit/), which the shardmerge wheel does not ship"
    assert f"shardmerge: `shardmerge demo` {kit}" in out.stderr
    assert f"shardmerge: the spark engine {kit}" in out.stderr
    assert "scripts/bootstrap" in out.stderr


def test_the_job_verbs_load_no_devkit_and_the_dev_verbs_reach_it() -> None:
    """In a clone the kit is importable: the job's verbs still leave it alone, and a
    development verb gets its own argv (``demo --help`` is the demo's own help)."""
    probe = (
        "import sys\n"
        "from shardmerge.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('loaded:', sorted(m for m in sys.modules if m.split('.')[0] == 'devkit'))\n"
        "main(['demo', '--help'])\n"
    )
    out = python(probe)
    assert "loaded: []" in out.stdout, out.stdout + out.stderr
    assert "usage: shardmerge demo" in out.stdout, out.stderr


def uv() -> str:
    found = ROOT / ".tools/bin/uv"  # scripts/bootstrap's pinned uv
    if found.exists():
        return str(found)
    on_path = shutil.which("uv")
    if on_path is None:
        pytest.skip("no uv to build the wheel with: run scripts/bootstrap")
    return on_path


def test_the_wheel_ships_no_devkit_and_its_console_script_runs_alone(tmp_path: Path) -> None:
    """The wheel built as README's cluster command builds it (uv, hatchling), unpacked and
    run with the clone's root off sys.path: what an installed wheel sees."""
    build = [uv(), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(ROOT)]
    # Offline when uv's cache has the build backend (seconds, no network); else fetch it.
    built = subprocess.run([*build, "--offline"], capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        built = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("shardmerge-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(tmp_path / "site")
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == set(WHEEL_PACKAGES)
    assert not [n for n in names if n.startswith("devkit/")]
    site = str(tmp_path / "site")
    # The venv's editable install puts the clone's root on sys.path (.pth): taken off, so
    # shardmerge, streaming, ... come from the unpacked wheel and devkit from nowhere.
    probe = (
        f"import sys\nsys.path[:] = [{site!r}] + [p for p in sys.path if p not in ('', "
        f"{str(ROOT)!r})]\n"
        "import shardmerge.cli, streaming.cli.verbs\n"
        f"assert shardmerge.cli.__file__.startswith({site!r}), shardmerge.cli.__file__\n"
        f"assert streaming.cli.verbs.__file__.startswith({site!r}), streaming.cli.verbs.__file__\n"
        + WITHOUT_DEVKIT
    )
    out = python(probe, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "loaded: []" in out.stdout
    assert "`shardmerge demo` is part of the development kit" in out.stderr


def test_every_registered_dev_verb_and_engine_names_a_function_of_the_kit() -> None:
    """The registry is strings, so a renamed module or function is caught here, not by the
    first person to type the verb."""
    from shardmerge.cli import DEV_ENGINES, DEV_VERBS, _load

    for name, (target, _) in {**DEV_VERBS, **DEV_ENGINES}.items():
        assert target.startswith("devkit."), name
        assert callable(_load(target, name)), target
