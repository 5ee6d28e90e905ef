"""What a new user runs in the first hour, through the real ``rmtui`` command.

Each test runs the command as a person types it (a subprocess) and checks what they would
notice: the files on disk, the answer on stdout, the one-line hint on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rmtui.engine.memory.config import CONFIG_FILE, LOCAL_FILE, set_config_value
from rmtui.engine.memory.config_schema import SCHEMAS, Key
from rmtui.engine.memory.roots import init_root
from tests.retrieve_kit import write_small_root
from tests.supervisor_kit import git, track_config

#: One key of every value type, per file: (key, what is typed, what the file then holds).
#: A table key needs its role's model first (the original's rule), hence the model_id rows.
SAMPLES = {
    CONFIG_FILE: [
        ("sync.enabled", "true", True),
        ("pruner.generation_commits", "12", 12),
        ("insight.watch.trigger_points", "2.5", 2.5),
        ("update.model.model_id", "openai:gpt-x", "openai:gpt-x"),
        ("update.model.kwargs", "{temperature = 0.2, stop = [\"x\"]}", {"temperature": 0.2, "stop": ["x"]}),
        ("review.sources", '[{kind = "codex", path = "/tmp/s"}]', [{"kind": "codex", "path": "/tmp/s"}]),
    ],
    LOCAL_FILE: [
        ("retrieve.fallback_to_agent", "false", False),
        ("retrieve.top_k", "5", 5),
        ("retrieve.min_similarity", "0.3", 0.3),
        ("update.approval", "required", "required"),
        ("update-correction.model.model_id", '"openai:gpt-y"', "openai:gpt-y"),
        ("update-correction.model.kwargs", "{seed = 7}", {"seed": 7}),
    ],
}


def _schema_types(node, out: set[type]) -> set[type]:
    for spec in node.values():
        if isinstance(spec, Key):
            out.update(spec.types)
        else:
            _schema_types(spec, out)
    return out


def _dig(data: dict, dotted: str):
    for part in dotted.split("."):
        data = data[part]
    return data


@pytest.mark.parametrize("file", [CONFIG_FILE, LOCAL_FILE])
def test_config_set_reads_back_and_validates_every_value_type(root, cli, file):
    rp = str(root.path)
    covered = {type(expected) for _, _, expected in SAMPLES[file]}
    assert _schema_types(SCHEMAS[file], set()) <= covered  # a new value type in a schema needs a row here
    for key, typed, expected in SAMPLES[file]:
        r = cli("--headless", "config", "set", key, typed, "--root", rp)
        assert r.code == 0, (key, r.stderr)
        assert r.stdout.startswith(f"{key} = ") and f"(in {file})" in r.stdout
        got = cli("--headless", "config", "get", key, "--root", rp, "--json").json()
        assert got == {"key": key, "value": expected, "file": file}
        on_disk = tomllib.loads((root.path / file).read_text(encoding="utf-8"))
        assert _dig(on_disk, key) == expected and type(_dig(on_disk, key)) is type(expected)
    # booleans read back as TOML spells them, the way `config set` takes them
    bool_key = SAMPLES[file][0][0]
    assert cli("--headless", "config", "get", bool_key, "--root", rp).stdout.strip() in ("true", "false")
    r = cli("--headless", "validate", "--root", rp)
    assert r.code == 0 and r.stdout.startswith("valid:"), r.stdout + r.stderr
    assert cli("--headless", "status", "--root", rp).code == 0


def test_config_set_of_a_boolean_in_a_tracked_file_lands_one_commit(root, cli):
    track_config(root)
    head = git(root.path, "rev-parse", "HEAD")
    r = cli("--headless", "config", "set", "sync.enabled", "true", "--root", str(root.path), "--json")
    assert r.code == 0, r.stderr
    assert r.json()["value"] is True and r.json()["landed_commit"] == git(root.path, "rev-parse", "HEAD") != head
    assert tomllib.loads(git(root.path, "show", "HEAD:rightmemory.toml"))["sync"]["enabled"] is True
    # a wrong type is refused with the rule, and the file keeps its value
    r = cli("--headless", "config", "set", "sync.enabled", "12", "--root", str(root.path))
    assert r.code == 2 and "'sync.enabled' must be bool, got int" in r.stderr
    assert tomllib.loads((root.path / CONFIG_FILE).read_text(encoding="utf-8"))["sync"]["enabled"] is True


# -- init --force on a clone of an upstream whose HEAD names a branch nobody pushed ---------------

def _bare_upstream_with_unpushed_head(tmp_path, *branches: str) -> tuple[Path, str]:
    """A bare upstream whose HEAD names ``trunk`` (never pushed) and a root pushed as ``branches``."""
    upstream = tmp_path / "upstream.git"
    git(tmp_path, "init", "-q", "--bare", str(upstream))
    git(upstream, "symbolic-ref", "HEAD", "refs/heads/trunk")
    first = init_root(tmp_path / "first").path
    (first / "MEMORY.md").write_text("# Memory\n\n## Tools {#tools}\n\n- `pytest` tests run with pytest → []\n",
                                     encoding="utf-8")
    git(first, "commit", "-q", "-am", "a first fact")
    git(first, "remote", "add", "origin", upstream.as_uri())
    for b in branches:
        git(first, "push", "-q", "origin", f"main:{b}")
    return upstream, git(first, "rev-parse", "HEAD")


def test_init_force_on_a_clone_adopts_the_upstreams_memory_branch_and_pull_works(tmp_path, cli):
    upstream, head = _bare_upstream_with_unpushed_head(tmp_path, "main")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", upstream.as_uri(), str(clone))  # "remote HEAD refers to nonexistent ref"
    assert not (clone / "MEMORY.md").exists()
    r = cli("--headless", "init", "--force", str(clone))
    assert r.code == 0, r.stderr
    assert "adopted the upstream's memory branch origin/main" in r.stdout
    assert git(clone, "rev-parse", "HEAD") == head  # the upstream's history, no new root commit
    assert git(clone, "rev-parse", "--abbrev-ref", "@{u}") == "origin/main"
    assert "pytest" in (clone / "MEMORY.md").read_text(encoding="utf-8")
    assert (clone / "rightmemory.toml").is_file() and (clone / "rmtui.toml").is_file()
    assert cli("--headless", "config", "set", "sync.enabled", "true", "--root", str(clone)).code == 0
    pull = cli("--headless", "sync", "pull", "--root", str(clone))
    assert pull.code == 0, pull.stdout + pull.stderr
    assert git(clone, "rev-parse", "HEAD") == head


def test_init_on_a_clone_with_several_memory_branches_names_the_command_and_writes_nothing(tmp_path, cli):
    upstream, _ = _bare_upstream_with_unpushed_head(tmp_path, "main", "laptop")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", upstream.as_uri(), str(clone))
    r = cli("--headless", "init", "--force", str(clone))
    assert r.code == 2
    assert f"`git -C {clone} checkout --track origin/laptop`" in r.stderr
    assert f"`git -C {clone} checkout --track origin/main`" in r.stderr
    assert sorted(c.name for c in clone.iterdir()) == [".git"]  # nothing written, nothing committed
    assert subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "-q", "HEAD"]).returncode != 0
    # the command it names works
    git(clone, "checkout", "-q", "--track", "origin/laptop")
    r = cli("--headless", "init", "--force", str(clone))
    assert r.code == 0 and git(clone, "rev-parse", "--abbrev-ref", "@{u}") == "origin/laptop"


def test_init_of_a_clone_of_an_empty_upstream_starts_a_new_root(tmp_path, cli):
    upstream = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(upstream))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", upstream.as_uri(), str(clone))
    r = cli("--headless", "init", "--force", str(clone))
    assert r.code == 0 and "adopted" not in r.stdout
    assert git(clone, "log", "--format=%s") == "init: rightmemory root"


# -- a command run inside a root's work tree finds it --------------------------------------------

def _root_of_status(cli, cwd, env=None) -> tuple[int, str]:
    r = cli("--headless", "status", "--json", cwd=cwd, env=env)
    return r.code, (r.json()["root"] if r.code == 0 else r.stderr)


def test_commands_inside_a_roots_work_tree_find_it_as_git_does(isolated_home, tmp_path, cli):
    root = init_root(tmp_path / "root").path
    other = init_root(tmp_path / "other").path
    deep = root / "notes" / "deep"
    deep.mkdir(parents=True)
    env = {"RIGHTMEMORY_ROOT": str(other)}
    assert _root_of_status(cli, root, env) == (0, str(root))  # the work tree wins over RIGHTMEMORY_ROOT
    assert _root_of_status(cli, deep, env) == (0, str(root))  # found upward, as git finds .git
    # inside a supervisor worktree of the root, the root is found (never the worktree itself)
    r = cli("--headless", "maintain", "begin", "--json", cwd=root)
    assert r.code == 0, r.stderr
    wt = Path(r.json()["worktree"])
    assert wt.is_relative_to(root / ".runtime") and (wt / "MEMORY.md").is_file()
    assert _root_of_status(cli, wt, env) == (0, str(root))
    assert cli("--headless", "maintain", "abort", cwd=wt).code == 0
    # the nearer of a profile file and a work tree wins; the explicit flags win over both
    project = deep / "project"
    project.mkdir()
    assert cli("--headless", "profile", "create", "o", str(other)).code == 0
    (project / ".rightmemory-profile").write_text("o\n", encoding="utf-8")
    assert _root_of_status(cli, project) == (0, str(other))
    (tmp_path / ".rightmemory-profile").write_text("o\n", encoding="utf-8")
    assert _root_of_status(cli, deep) == (0, str(root))
    r = cli("--headless", "status", "--json", "--root", str(other), cwd=deep)
    assert r.code == 0 and r.json()["root"] == str(other)
    # outside every root, the old order goes on: RIGHTMEMORY_ROOT, then ~/.rightmemory
    (tmp_path / ".rightmemory-profile").unlink()
    assert _root_of_status(cli, tmp_path, env) == (0, str(other))
    code, err = _root_of_status(cli, tmp_path)
    assert code == 2 and f"memory root {isolated_home / '.rightmemory'} is not a Git repository" in err  # profiles.toml


def test_a_code_project_with_a_memory_md_is_not_taken_for_a_root(tmp_path, cli):
    plain = tmp_path / "code"
    git(tmp_path, "init", "-q", str(plain))
    (plain / "MEMORY.md").write_text("# Notes for the agent\n", encoding="utf-8")
    (plain / ".gitignore").write_text("__pycache__/\n*.pyc\n", encoding="utf-8")
    other = init_root(tmp_path / "other").path
    assert _root_of_status(cli, plain, {"RIGHTMEMORY_ROOT": str(other)}) == (0, str(other))
    assert not (plain / ".runtime").exists()


# -- small things that made a person guess -------------------------------------------------------

def test_a_headless_command_without_headless_says_what_to_run_in_one_line(root, cli):
    r = cli("status", "--root", str(root.path))
    assert r.code == 2 and r.stdout == ""
    assert r.stderr == f"rmtui: `status` is a headless command: run `rmtui --headless status --root {root.path}`\n"
    assert cli("--headless", "status", "--root", str(root.path)).code == 0  # and that command works
    r = cli("--headless", "demo", "--path", str(root.path))  # the other way round
    assert r.code == 2 and r.stderr == f"rmtui: `demo` opens the workbench: run `rmtui demo --path {root.path}`\n"


def _subcommands(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), helps.get(name)
                yield from _subcommands(sub, (*path, name))


def test_every_subcommand_says_what_it_does_in_help(cli):
    from rmtui.cli import build_parser

    missing = [" ".join(p) for p, text in _subcommands(build_parser()) if not text]
    assert missing == []
    for group, verbs in (("maintain", ("begin", "status", "land", "abort")),
                         ("evidence", ("list", "show", "approve", "cancel", "reject"))):
        r = cli("--headless", group, "--help")
        assert r.code == 0
        for verb in verbs:  # each subcommand on a line of its own, with words after it
            assert re.search(rf"^\s+{verb}\s+\w+", r.stdout, re.M), (group, verb, r.stdout)


def test_a_cold_retrieve_says_what_it_waits_for_and_a_warm_one_says_nothing(root, tmp_path):
    write_small_root(root)
    set_config_value(root.path, "embedding.idle_timeout_seconds", 30)
    set_config_value(root.path, "embedding.dense_budget_seconds", 90)
    services = tmp_path / "services"
    env = {**os.environ, "RMTUI_SERVICE_DIR": str(services)}
    argv = [sys.executable, "-m", "rmtui", "--headless", "retrieve", "--root", str(root.path), "--top", "1"]
    try:
        cold = subprocess.run([*argv, "--session", "s1", "who owns billing"], capture_output=True, text=True,
                              env=env, timeout=180)
        assert cold.returncode == 0, cold.stderr
        assert "rmtui: starting the local embedding model" in cold.stderr
        assert re.search(r"^rmtui: embedding memory passages \(\d+ of \d+\)…$", cold.stderr, re.M), cold.stderr
        assert "bob-role" in cold.stdout and "warning" not in cold.stderr
        warm = subprocess.run([*argv, "--session", "s2", "does anyone have a dog"], capture_output=True,
                              text=True, env=env, timeout=60)
        assert warm.returncode == 0 and warm.stderr == "" and "carol-dog" in warm.stdout
    finally:  # the service this test started
        for state in services.glob("*/state.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                os.kill(json.loads(state.read_text())["pid"], signal.SIGTERM)


# -- the rmtui command on the PATH (scripts/link-command.sh, run by scripts/install.sh) ----------

def _link(home: Path, path: str) -> subprocess.CompletedProcess:
    """scripts/link-command.sh for the venv running these tests (install.sh passes none: .venv)."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "link-command.sh"
    return subprocess.run(["bash", str(script), sys.prefix], capture_output=True, text=True, timeout=60,
                          env={"HOME": str(home), "PATH": path})


def test_the_install_links_rmtui_into_local_bin_and_says_when_that_is_not_on_the_path(tmp_path):
    bindir = tmp_path / ".local" / "bin"
    r = _link(tmp_path, "/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    venv_rmtui = Path(sys.prefix) / "bin" / "rmtui"
    assert (bindir / "rmtui").is_symlink() and (bindir / "rmtui").resolve() == venv_rmtui.resolve()
    assert f"the rmtui command: {bindir}/rmtui" in r.stdout
    assert f"{bindir} is not on your PATH" in r.stdout
    # from the PATH, in another folder, the command runs
    run = subprocess.run(["rmtui", "--headless", "init", str(tmp_path / "m")], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path), "PATH": f"{bindir}:/usr/bin:/bin"},
                         timeout=120)
    assert run.returncode == 0 and (tmp_path / "m" / "MEMORY.md").is_file(), run.stderr
    # again with the folder on the PATH: no hint; a file there that is not a link is left alone
    assert "not on your PATH" not in _link(tmp_path, f"{bindir}:/usr/bin:/bin").stdout
    (bindir / "rmtui").unlink()
    (bindir / "rmtui").write_text("#!/bin/sh\necho pipx\n", encoding="utf-8")
    r = _link(tmp_path, f"{bindir}:/usr/bin:/bin")
    assert r.returncode == 0 and "is not a link (left as it is)" in r.stdout
    assert (bindir / "rmtui").read_text(encoding="utf-8") == "#!/bin/sh\necho pipx\n"


def test_status_no_longer_lists_sync_enabled_as_ignored(root, cli):
    rp = str(root.path)
    assert cli("--headless", "config", "set", "sync.enabled", "true", "--root", rp).code == 0
    st = cli("--headless", "status", "--root", rp)
    assert st.code == 0 and "sync.enabled" not in st.stdout and "ignored by rmtui" not in st.stdout
    assert cli("--headless", "config", "set", "sync.stale_pull_after_hours", "8", "--root", rp).code == 0
    st = cli("--headless", "status", "--root", rp, "--json").json()
    assert st["config"]["ignored"] == ["sync.stale_pull_after_hours"]  # rmtui paces its own pull check
