"""Memory roots (init, resolution, profiles) and rightmemory.toml (docs/architecture.md, "The memory root")."""

from __future__ import annotations

import json

import git
import pytest

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.config import CONFIG_FILE, LOCAL_FILE, load_config, set_config_value
from rmtui.engine.memory.config_schema import DEFAULT_TEXT, LOCAL_DEFAULT_TEXT
from rmtui.engine.memory.roots import GITIGNORE, init_root

ROOT_FILES = {".gitignore", "MEMORY.md", "PURSUITS.md"}  # rightmemory.toml is per machine, as in RightMemory


# -- init ----------------------------------------------------------------------

def test_init_creates_a_committed_root(tmp_path, cli):
    target = tmp_path / "mem"
    r = cli("--headless", "init", str(target), "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["root"] == str(target.resolve())

    repo = git.Repo(target)
    head = repo.head.commit
    assert out["head"] == head.hexsha
    assert head.message.startswith("init")
    assert {b.path for b in head.tree.traverse()} == ROOT_FILES
    assert not repo.is_dirty(untracked_files=True)

    assert (target / "MEMORY.md").read_text(encoding="utf-8").startswith("# Memory")
    pursuits = (target / "PURSUITS.md").read_text(encoding="utf-8")
    assert "\n## Focus\n" in pursuits
    assert (target / ".runtime" / ".gitignore").read_text(encoding="utf-8") == "*\n"
    config_text = (target / CONFIG_FILE).read_text(encoding="utf-8")
    assert config_text == DEFAULT_TEXT
    assert sum(1 for line in config_text.splitlines() if line.startswith("#")) >= 10  # a commented file
    # rmtui-only settings: written beside it, ignored by Git (never committed or synced)
    assert (target / LOCAL_FILE).read_text(encoding="utf-8") == LOCAL_DEFAULT_TEXT
    assert repo.ignored(LOCAL_FILE) == [LOCAL_FILE]

    assert cli("--headless", "validate", "--root", str(target)).code == 0


def test_gitignore_is_an_allow_list(root):
    text = (root.path / ".gitignore").read_text(encoding="utf-8")
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert rules[0] == "*" and all(line.startswith("!") for line in rules[1:] if line != "PURSUIT_RULES.md")
    repo = git.Repo(root.path)
    tracked = ["MEMORY.md", "MEMORY_topic.md", "MEMORY_SKILL_x.md", "PURSUITS.md", "PURSUIT_p.md", "corrections.md",
               "insight_logs/2026-01-02-030405.md", "update_queue/candidates/abc.json", "update_queue/lease.json",
               "update_records/op-1.json", "AGENT_GUIDANCE_INBOX.md", "shared_views.toml", "shared_views/v1/view.md",
               "shared_views/v1/recipe.toml", "shared_views/v1/.gitignore"]
    # the original's list: settings are per machine, PURSUIT_RULES.md is the old reference copy
    ignored = ["notes.txt", ".runtime/state.sqlite3", "scratch/MEMORY.md", "insight_logs/raw.txt", ".env",
               "rightmemory.toml", "rmtui.toml", "PURSUIT_RULES.md", "shared_views/v1/dist/MEMORY.md",
               "update_queue/stray.json"]
    for rel in tracked + ignored:
        p = root.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x\n", encoding="utf-8")
    assert repo.ignored(*tracked) == []
    assert sorted(repo.ignored(*ignored)) == sorted(ignored)
    assert text == GITIGNORE


def test_init_refuses_a_non_empty_folder_without_force(tmp_path, cli):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (target / "MEMORY.md").write_text("# My own memory\n\n- `mine` keep me → []\n", encoding="utf-8")
    r = cli("--headless", "init", str(target))
    assert r.code == 2
    assert "not empty" in r.stderr and "--force" in r.stderr
    assert sorted(p.name for p in target.iterdir()) == ["MEMORY.md", "notes.txt"]

    forced = cli("--headless", "init", str(target), "--force")
    assert forced.code == 0, forced.stderr
    # nothing that was there is lost or overwritten
    assert (target / "notes.txt").read_text(encoding="utf-8") == "my notes\n"
    assert (target / "MEMORY.md").read_text(encoding="utf-8") == "# My own memory\n\n- `mine` keep me → []\n"
    assert (target / "PURSUITS.md").exists()
    repo = git.Repo(target)
    assert {b.path for b in repo.head.commit.tree.traverse()} == ROOT_FILES
    assert "keep me" in (repo.head.commit.tree / "MEMORY.md").data_stream.read().decode()


def test_init_twice_is_a_conflict_and_init_over_a_file_is_refused(tmp_path, cli):
    target = tmp_path / "mem"
    assert cli("--headless", "init", str(target)).code == 0
    head = git.Repo(target).head.commit.hexsha
    again = cli("--headless", "init", str(target))
    assert again.code == 3 and "already a memory root" in again.stderr
    assert git.Repo(target).head.commit.hexsha == head
    a_file = tmp_path / "file"
    a_file.write_text("x", encoding="utf-8")
    r = cli("--headless", "init", str(a_file))
    assert r.code == 2 and a_file.read_text(encoding="utf-8") == "x"


def test_init_without_path_uses_the_resolved_root(isolated_home, cli, tmp_path):
    r = cli("--headless", "init", "--json")
    assert r.code == 0, r.stderr
    assert r.json()["root"] == str((isolated_home / ".rightmemory").resolve())
    env_root = tmp_path / "from-env"
    r = cli("--headless", "init", "--json", env={"RIGHTMEMORY_ROOT": str(env_root)})
    assert r.code == 0 and r.json()["root"] == str(env_root.resolve())


def test_roots_that_are_not_memory_roots_are_refused(tmp_path, cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    r = cli("--headless", "validate", "--root", str(plain))
    assert r.code == 2 and "not a Git repository" in r.stderr
    r = cli("--headless", "status", "--root", str(tmp_path / "missing"))
    assert r.code == 2 and "does not exist" in r.stderr and "init" in r.stderr
    assert not (tmp_path / "missing").exists()


# -- resolution ----------------------------------------------------------------

def _status_root(cli, *args, cwd=None, env=None) -> str:
    r = cli("--headless", "status", "--json", *args, cwd=cwd, env=env)
    assert r.code == 0, r.stderr
    return r.json()["root"]


def test_root_resolution_order(isolated_home, tmp_path, cli):
    roots = {name: init_root(tmp_path / name).path for name in ("flag", "prof", "dotfile", "env")}
    default = init_root(isolated_home / ".rightmemory").path
    assert cli("--headless", "profile", "create", "p-flag", str(roots["prof"])).code == 0
    assert cli("--headless", "profile", "create", "p-dot", str(roots["dotfile"])).code == 0
    project = tmp_path / "project"
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    (project / ".rightmemory-profile").write_text("p-dot\n", encoding="utf-8")
    env = {"RIGHTMEMORY_ROOT": str(roots["env"])}

    # each source wins over every later one
    flag = _status_root(cli, "--root", str(roots["flag"]), "--profile", "p-flag", cwd=nested, env=env)
    assert flag == str(roots["flag"])
    assert _status_root(cli, "--profile", "p-flag", cwd=nested, env=env) == str(roots["prof"])
    assert _status_root(cli, cwd=nested, env=env) == str(roots["dotfile"])  # found upward from cwd
    assert _status_root(cli, cwd=tmp_path, env=env) == str(roots["env"])
    assert _status_root(cli, cwd=tmp_path) == str(default)


def test_profile_file_naming_an_unknown_profile_is_an_error(tmp_path, cli):
    (tmp_path / ".rightmemory-profile").write_text("ghost\n", encoding="utf-8")
    r = cli("--headless", "status", cwd=tmp_path)
    assert r.code == 2 and "unknown profile 'ghost'" in r.stderr


def test_profile_commands(isolated_home, tmp_path, cli):
    target = init_root(tmp_path / "work").path
    assert cli("--headless", "profile", "list", "--json").json() == []
    r = cli("--headless", "profile", "create", "work", str(target), "--description", "day job", "--json")
    assert r.code == 0, r.stderr
    assert r.json() == {"name": "work", "root": str(target), "description": "day job"}
    profiles_toml = isolated_home / ".rightmemory" / "profiles.toml"
    assert f'root = "{target}"' in profiles_toml.read_text(encoding="utf-8")

    assert cli("--headless", "profile", "create", "work", str(target)).code == 3
    assert cli("--headless", "profile", "create", "bad/name", str(target)).code == 2
    listed = cli("--headless", "profile", "list")
    assert listed.stdout.strip() == f"work\t{target}"
    shown = cli("--headless", "profile", "show", "work", "--json").json()
    assert shown["root"] == str(target)
    assert cli("--headless", "profile", "show", "nope").code == 2
    assert _status_root(cli, "--profile", "work") == str(target)

    removed = cli("--headless", "profile", "remove", "work", "--json")
    assert removed.code == 0 and removed.json()["name"] == "work"
    assert cli("--headless", "profile", "list", "--json").json() == []
    assert cli("--headless", "profile", "remove", "work").code == 2
    assert target.exists()  # removing a profile never touches its root


def test_malformed_profiles_toml_is_reported(isolated_home, cli):
    (isolated_home / ".rightmemory").mkdir()
    (isolated_home / ".rightmemory" / "profiles.toml").write_text("[profiles.x\nroot='/'\n", encoding="utf-8")
    r = cli("--headless", "profile", "list")
    assert r.code == 2 and "malformed TOML" in r.stderr


# -- configuration ---------------------------------------------------------------

@pytest.mark.parametrize("text,message", [
    ("[update\napproval = 'auto'\n", "malformed TOML"),
    ("[retrieve]\nbogus = 1\n", "unknown key 'retrieve.bogus'"),
    ("[nonsense]\nx = 1\n", "unknown key 'nonsense'"),
    ("[retrieve]\ntop_k = \"8\"\n", "'retrieve.top_k' must be int"),
    ("[retrieve]\ntop_k = true\n", "'retrieve.top_k' must be int, got bool"),
    ("[update]\napproval = \"sometimes\"\n", "'update.approval' must be one of"),
    ("[update.async]\ndebounce_seconds = -1\n", "'update.async.debounce_seconds' must be at least 0"),
    ("update = 3\n", "'update' must be a table"),
])
def test_bad_config_is_refused_with_the_key_named(root, cli, text, message):
    (root.path / CONFIG_FILE).write_text(text, encoding="utf-8")
    # submit loads the config (approval mode, size limit): refused, naming the key
    r = cli("--headless", "submit", "--session", "s1", "--root", str(root.path), input="evidence\n")
    assert r.code == 2
    assert message in r.stderr
    # config get still shows what is written (so it can be fixed), with the same reason; only
    # a file that is not TOML at all has nothing to show
    r = cli("--headless", "config", "get", "retrieve.top_k", "--root", str(root.path))
    assert r.code == (2 if message == "malformed TOML" else 0) and message in r.stderr
    assert (root.path / CONFIG_FILE).read_text(encoding="utf-8") == text  # nothing rewritten


def test_config_get_returns_values_and_defaults(root, cli):
    assert cli("--headless", "config", "get", "retrieve.top_k", "--root", str(root.path)).stdout.strip() == "8"
    j = cli("--headless", "config", "get", "update.async.debounce_seconds", "--root", str(root.path), "--json")
    assert j.json() == {"key": "update.async.debounce_seconds", "value": 3600, "file": LOCAL_FILE}
    j = cli("--headless", "config", "get", "update.async.max_wait_seconds", "--root", str(root.path), "--json")
    assert j.json() == {"key": "update.async.max_wait_seconds", "value": 86400, "file": CONFIG_FILE}
    j = cli("--headless", "config", "get", "pruner.generation_commits", "--root", str(root.path), "--json")
    assert j.json() == {"key": "pruner.generation_commits", "value": 70, "file": None}  # the default
    r = cli("--headless", "config", "get", "retrieve.nope", "--root", str(root.path))
    assert r.code == 2 and "unknown key 'retrieve.nope'" in r.stderr


def test_config_set_keeps_comments_and_layout(root, cli):
    path = root.path / LOCAL_FILE  # retrieve.top_k is rmtui's own
    before = path.read_text(encoding="utf-8").splitlines()
    r = cli("--headless", "config", "set", "retrieve.top_k", "12", "--root", str(root.path))
    assert r.code == 0, r.stderr
    after = path.read_text(encoding="utf-8").splitlines()
    assert len(after) == len(before)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("top_k = 8", "top_k = 12")]
    assert cli("--headless", "config", "get", "retrieve.top_k", "--root", str(root.path)).stdout.strip() == "12"

    # a key in a table the file does not have yet is added, and every comment survives
    shared = root.path / CONFIG_FILE
    comments = [line for line in shared.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    r = cli("--headless", "config", "set", "update.model.model_id", "anthropic:claude-x", "--root", str(root.path))
    assert r.code == 0, r.stderr
    assert "(in rightmemory.toml" in r.stdout
    text = shared.read_text(encoding="utf-8")
    assert all(line in text.splitlines() for line in comments)
    assert load_config(root.path).get("update.model.model_id") == "anthropic:claude-x"
    assert path.read_text(encoding="utf-8").splitlines() == after  # rmtui.toml untouched


def test_config_set_refuses_unknown_keys_and_wrong_types(root, cli):
    path, local = root.path / CONFIG_FILE, root.path / LOCAL_FILE
    before, local_before = path.read_bytes(), local.read_bytes()
    r = cli("--headless", "config", "set", "retrieve.colour", "blue", "--root", str(root.path))
    assert r.code == 2 and "unknown key 'retrieve.colour'" in r.stderr
    r = cli("--headless", "config", "set", "retrieve.top_k", "many", "--root", str(root.path))
    assert r.code == 2 and "'retrieve.top_k' must be int, got str" in r.stderr
    r = cli("--headless", "config", "set", "update.approval", "maybe", "--root", str(root.path))
    assert r.code == 2 and "'update.approval'" in r.stderr
    r = cli("--headless", "config", "set", "retrieve.embedding.result_count", "50", "--root", str(root.path))
    assert r.code == 2 and "url" in r.stderr  # the original needs the service URL first
    assert path.read_bytes() == before and local.read_bytes() == local_before


def test_config_changes_are_seen_at_once_in_the_same_process(root):
    """Config reads are cached for speed; a rewrite of the file must never be missed."""
    assert load_config(root.path).get("update.approval") == "auto"
    set_config_value(root.path, "update.approval", "required")
    assert load_config(root.path).get("update.approval") == "required"
    path = root.path / LOCAL_FILE
    # an in-place rewrite of the same size, as an editor might do within one clock tick
    path.write_text(path.read_text(encoding="utf-8").replace('"required"', '"auto"    '), encoding="utf-8")
    assert load_config(root.path).get("update.approval") == "auto"
    path.write_text("[retrieve]\ntop_k = 0\n", encoding="utf-8")
    with pytest.raises(UsageError, match="retrieve.top_k"):
        load_config(root.path)
    # the returned data is the caller's own copy
    path.write_text("[retrieve]\ntop_k = 3\n", encoding="utf-8")
    cfg = load_config(root.path)
    cfg.data["retrieve"]["top_k"] = 99
    assert load_config(root.path).get("retrieve.top_k") == 3


# -- --json everywhere ------------------------------------------------------------

def test_every_foundation_command_answers_json(root, cli, tmp_path):
    rp = str(root.path)
    uid = cli("--headless", "submit", "--json", "--root", rp, "--session", "s", input="e\n").json()["uid"]
    uid2 = cli("--headless", "submit", "--json", "--root", rp, "--session", "s", input="f\n").json()["uid"]
    commands = [
        ("init", str(tmp_path / "other")),
        ("profile", "create", "pj", rp), ("profile", "list"), ("profile", "show", "pj"), ("profile", "remove", "pj"),
        ("validate", "--root", rp), ("status", "--root", rp),
        ("config", "get", "retrieve.top_k", "--root", rp), ("config", "set", "retrieve.top_k", "9", "--root", rp),
        ("submit", "--root", rp, "--session", "s", "--request", "r"),
        ("evidence", "list", "--root", rp), ("evidence", "show", uid, "--root", rp),
        ("evidence", "reject", uid, "--reason", "no", "--root", rp),
    ]
    for cmd in commands:
        r = cli("--headless", *cmd, "--json", input="evidence\n")
        assert r.code == 0, (cmd, r.stderr)
        json.loads(r.stdout)
    # errors are JSON too, with the exit code of their kind
    r = cli("--headless", "evidence", "approve", uid2, "--root", rp, "--json")
    assert r.code == 3 and json.loads(r.stdout)["error"] == "conflict"
    r = cli("--headless", "evidence", "show", "f" * 32, "--root", rp, "--json")
    assert r.code == 2 and json.loads(r.stdout)["error"] == "bad_input"

