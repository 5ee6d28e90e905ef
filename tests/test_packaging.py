"""The wheel carries prompts, skills and themes, and an installed copy finds them.

Builds the project's own wheel offline (hatchling, no build isolation), installs it into a
temporary folder and runs it from there in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
DATA_DIRS = ("prompts", "skills", "themes")


def _shipped(name: str) -> set[str]:
    base = PROJECT / name
    return {p.relative_to(base).as_posix() for p in base.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out), str(PROJECT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [whl] = list(out.glob("rmtui-*.whl"))
    return whl


def test_wheel_contains_prompts_skills_and_themes(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in DATA_DIRS:
        inside = {n.removeprefix(f"rmtui/_data/{data}/") for n in names if n.startswith(f"rmtui/_data/{data}/")}
        assert inside, f"no {data} in the wheel"
        assert inside == _shipped(data), data
    assert "rmtui/cli.py" in names and "rmtui/engine/memory/graph.py" in names
    assert "rmtui/_data/memory-doctrine.md" in names  # the rules the prompts include when built
    assert not any(n.startswith(("tests/", ".venv/")) or "__pycache__" in n for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "rmtui = rmtui.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_resolves_its_data_inside_the_install(wheel, tmp_path, root):
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                           "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    code = (
        "import json, rmtui, rmtui.resources as r\n"
        "print(json.dumps({'pkg': rmtui.__file__, **{n: str(r.data_dir(n)) for n in ('prompts', 'skills', 'themes')}}))\n"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert Path(found["pkg"]).is_relative_to(target)  # the installed copy, not the checkout
    for name in DATA_DIRS:
        where = Path(found[name])
        assert where == target / "rmtui" / "_data" / name
        assert {p.relative_to(where).as_posix() for p in where.rglob("*") if p.is_file()} == _shipped(name)

    # the installed copy runs the headless CLI
    cli = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "validate", "--root", str(root.path), "--json"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["valid"] is True
