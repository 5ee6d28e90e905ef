from __future__ import annotations


def test_init_validate_status_roundtrip(tmp_path, cli):
    target = tmp_path / "mem"
    r = cli("--headless", "init", str(target), "--json")
    assert r.code == 0, r.stderr
    assert (target / "MEMORY.md").is_file()
    r = cli("--headless", "validate", "--root", str(target))
    assert r.code == 0, r.stdout + r.stderr
    r = cli("--headless", "status", "--root", str(target), "--json")
    assert r.code == 0
    assert r.json()["root"] == str(target.resolve())


def test_os_errors_are_one_line_not_a_traceback(tmp_path, cli):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    r = cli("--headless", "init", str(blocker / "sub"))
    assert r.code == 2 and "Traceback" not in r.stderr and str(blocker) in r.stderr
    r = cli("--headless", "skills", "install", "--target", "/proc/nope")
    assert r.code == 2 and "Traceback" not in r.stderr


def test_init_refuses_an_empty_path(cli, isolated_home):
    r = cli("--headless", "init", "")
    assert r.code == 2 and "empty" in r.stderr
    assert not (isolated_home / ".rightmemory").exists()


def test_approve_all_on_an_empty_inbox_is_fine(root, cli):
    r = cli("--headless", "evidence", "approve", "--all", "--root", str(root.path), "--json")
    assert r.code == 0 and r.json() == []


def test_status_reports_malformed_config(root, cli):
    # status shows the refusal (so the file can be fixed) instead of failing with it
    (root.path / "rightmemory.toml").write_text("[update\napproval = ", encoding="utf-8")
    r = cli("--headless", "status", "--root", str(root.path))
    assert r.code == 0 and "config: refused" in r.stdout and "malformed TOML" in r.stdout


def test_each_command_registers_only_its_own_modules():
    """``build_parser(argv)`` registers only the owners of argv's command: the owners table must
    name every command each module registers, and nothing else."""
    import argparse
    import importlib

    from rmtui.cli import _common_parser, build_parser
    from rmtui.commands import COMMAND_MODULES, COMMAND_OWNERS

    seen: dict[str, set[str]] = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers(dest="command")
        importlib.import_module(name).register(sub, _common_parser())
        for command in sub.choices:
            seen.setdefault(command, set()).add(name)
    assert set(seen) == set(COMMAND_OWNERS)
    for command, owners in COMMAND_OWNERS.items():
        assert seen[command] <= set(owners), command
    full = build_parser()
    for command in COMMAND_OWNERS:  # the reduced parser takes the command as the full one does
        parser = build_parser(["--headless", "--root", "x", command, "--help"])
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)][0]
        assert command in actions.choices
        full_sub = [a for a in full._actions if isinstance(a, argparse._SubParsersAction)][0].choices[command]
        assert actions.choices[command].format_help() == full_sub.format_help()
