"""Errors and help a person can act on: each refusal is one line that says what is wrong and
what to do, and the advice it gives works when followed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from rmtui import __version__
from rmtui.engine.errors import UsageError


def test_a_missing_subcommand_lists_the_subcommands(root, cli):
    r = cli("--headless", "evidence", "--root", str(root.path))
    assert r.code == 2
    assert r.stderr.count("\n") == 1 and "evidence_cmd" not in r.stderr
    assert "`rmtui evidence` needs a subcommand: list, show, approve, cancel, reject" in r.stderr
    r = cli("--headless", "assistant", "update")
    assert r.code == 2 and "`rmtui assistant update` needs a subcommand: begin, status, complete" in r.stderr


def test_a_mistyped_command_suggests_the_closest_one(cli):
    r = cli("stauts")
    assert r.code == 2 and r.stderr == "rmtui: unknown command 'stauts'; did you mean 'status'?\n"
    r = cli("--headless", "evidence", "lsit")
    assert r.code == 2 and r.stderr == "rmtui: unknown `rmtui evidence` subcommand 'lsit'; did you mean 'list'?\n"
    r = cli("--headless", "xyzzy")  # nothing close: no guess, where to look instead
    assert r.code == 2 and r.stderr == "rmtui: unknown command 'xyzzy'; `rmtui --help` lists them\n"


def test_version(cli):
    r = cli("--version")
    assert r.code == 0 and r.stdout == f"rmtui {__version__}\n"


def test_a_plain_folder_as_root_names_the_init_that_makes_it_one(tmp_path, cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine\n")
    r = cli("--headless", "status", "--root", str(plain))
    assert r.code == 2 and r.stderr.count("\n") == 1
    advice = f"rmtui --headless init --force {plain}"
    assert f"`{advice}`" in r.stderr
    # the advice works as given, and keeps the person's file
    assert cli(*advice.split()[1:]).code == 0
    assert cli("--headless", "status", "--root", str(plain)).code == 0
    assert (plain / "notes.txt").read_text() == "mine\n"


def test_an_unknown_profile_names_the_profile_file_it_came_from(tmp_path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".rightmemory-profile").write_text("nosuch\n")
    r = cli("--headless", "status", cwd=project)
    assert r.code == 2 and r.stderr.count("\n") == 1
    assert "unknown profile 'nosuch'" in r.stderr and str(project / ".rightmemory-profile") in r.stderr


def test_config_keys_suggest_only_close_keys_and_an_unset_key_says_so(root, cli):
    rp = str(root.path)
    r = cli("--headless", "config", "set", "nosuch.key", "1", "--root", rp)
    assert r.code == 2 and "unknown key 'nosuch.key'" in r.stderr and "nearest" not in r.stderr
    r = cli("--headless", "config", "set", "update.aproval", '"required"', "--root", rp)
    assert r.code == 2 and "nearest known key: 'update.approval'" in r.stderr

    r = cli("--headless", "config", "get", "update.model.model_id", "--root", rp)
    assert r.code == 1 and r.stdout == ""
    assert r.stderr == ("rmtui: update.model.model_id is not set and has no default (set it with "
                        "`rmtui --headless config set update.model.model_id VALUE`)\n")
    j = cli("--headless", "config", "get", "update.model.model_id", "--root", rp, "--json")
    assert j.code == 1 and j.json() == {"key": "update.model.model_id", "value": None, "file": None}


def test_operations_show_reads_as_text(root, cli):
    rp = str(root.path)
    op = cli("--headless", "maintain", "begin", "--root", rp, "--json").json()["operation_id"]
    assert cli("--headless", "maintain", "abort", "--root", rp).code == 0
    r = cli("--headless", "operations", "show", op, "--root", rp)
    assert r.code == 0, r.stderr
    assert f"operation: {op}\n" in r.stdout and "phase: abandoned\n" in r.stdout
    assert "effect: cleanup done" in r.stdout
    for python in ("{'", "[]", "None", "[{"):
        assert python not in r.stdout, r.stdout


def test_a_port_in_use_is_named_with_the_way_out():
    from rmtui.engine.retrieval.modelhost.embed_service import _listen

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    try:
        with pytest.raises(UsageError) as exc:
            _listen("127.0.0.1", port)
    finally:
        held.close()
    assert f"cannot listen on 127.0.0.1:{port}: the address is already in use" in exc.value.message
    assert "--port" in exc.value.message


def test_a_removed_working_folder_is_named_instead_of_silently_using_the_default_root(tmp_path, root, cli):
    gone = tmp_path / "gone"
    gone.mkdir()
    # a shell standing in a folder that was removed under it (as `maintain land` run inside its worktree)
    script = (f"import os, subprocess, sys; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); "
              "sys.exit(subprocess.run([sys.executable, '-m', 'rmtui', *sys.argv[1:]]).returncode)")
    env = dict(os.environ, RIGHTMEMORY_ROOT="")
    env.pop("RIGHTMEMORY_ROOT")
    r = subprocess.run([sys.executable, "-c", script, "--headless", "status"], capture_output=True, text=True,
                       env=env, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    default = os.path.join(os.environ["HOME"], ".rightmemory")
    assert r.stderr.count("\n") == 1 and "working folder no longer exists" in r.stderr
    assert f"rmtui would use {default} (default)" in r.stderr
    assert not os.path.exists(default)  # nothing made there
    gone.mkdir()
    # with --root the command works from the removed folder
    r = subprocess.run([sys.executable, "-c", script, "--headless", "status",
                        "--root", str(root.path)], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"root: {root.path}" in r.stdout


def test_demo_in_a_non_empty_folder_gives_advice_that_works(tmp_path, cli):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    r = cli("demo", "--path", str(folder))
    assert r.code == 2 and r.stderr.count("\n") == 1
    assert "--force" not in r.stderr  # demo takes no --force: never advise it
    assert "give --path a new or empty folder" in r.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_status_on_a_repository_with_no_commit_says_so_and_the_fix_works(tmp_path, cli):
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    subprocess.run(["git", "init", "-q", str(unborn)], check=True)
    memory = "# Memory\n\n## Notes {#notes}\n\n- `kept` a fact written before the first commit → []\n"
    (unborn / "MEMORY.md").write_text(memory)
    (unborn / ".gitignore").write_text("*\n!MEMORY.md\n")
    for command in (["status"], ["maintain", "begin"], ["prune", "status"]):
        r = cli("--headless", *command, "--root", str(unborn))
        assert r.code == 2, (command, r.stderr)
        assert r.stderr.count("\n") == 1 and "internal error" not in r.stderr
        assert f"memory root {unborn} has no commit yet" in r.stderr
    advice = f"rmtui --headless init --force {unborn}"
    assert f"`{advice}`" in r.stderr
    assert cli(*advice.split()[1:]).code == 0
    r = cli("--headless", "status", "--root", str(unborn), "--json")
    assert r.code == 0 and r.json()["items"]["nodes"] == 1
    assert (unborn / "MEMORY.md").read_text() == memory
