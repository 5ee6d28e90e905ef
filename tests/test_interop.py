"""Interoperability with the original RightMemory tool, tried as a user who runs both would:
a root written by hand in the original's format works in rmtui end to end, and a root rmtui
makes passes a checker of the original's tracked formats (tests/compat_checker.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from compat_checker import check_root

from rmtui.engine.memory.roots import MemoryRoot
from tests.retrieve_kit import TOKEN

# The original's rightmemory.toml schema (docs/formats.md, "Configuration"), as data: every table and its keys.
# A role table holds `model` xor `agent_cli`.
MODEL_KEYS = {"model_id", "api_base", "api_key", "kwargs"}
ROLE_TABLE = {"model": MODEL_KEYS, "agent_cli": {"provider", "model"}}
ORIGINAL_KEYS: dict = {
    **{role: dict(ROLE_TABLE) for role in ("dreamer", "historian", "insight", "pruner", "reviewer",
                                           "shared-view-builder", "sync-reconciler")},
    "retrieve": {**ROLE_TABLE, "max_output_chars": None, "backend": None,
                 "embedding": {"url", "candidate_count", "result_count", "timeout_seconds", "api_key"}},
    "update": {**ROLE_TABLE, "async": {"target_batch_candidates", "max_wait_seconds", "trigger_candidates"}},
    "agent_cli": {"provider"},
    "review": {"idle_seconds": None, "since_days": None, "batch_size": None, "sources": {"kind", "path"}},
    "debug": {"trace"},
    "sync": {"enabled", "stale_pull_after_hours"},
}
ORIGINAL_KEYS["dreamer"]["watch"] = {"trigger_points", "update_candidate_points", "check_interval_seconds",
                                     "review_session_points"}
ORIGINAL_KEYS["insight"]["watch"] = set(ORIGINAL_KEYS["dreamer"]["watch"])
ORIGINAL_KEYS["pruner"] = {**ROLE_TABLE, "generation_commits": None, "revival_grace_checkpoints": None}


def unknown_keys(doc: dict, schema, prefix: str = "") -> list[str]:
    """Keys of ``doc`` the original would reject (it rejects unknown keys at every level)."""
    out = []
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(schema, set):
            if key not in schema:
                out.append(name)
            continue
        if key not in schema:
            out.append(name)
            continue
        sub = schema[key]
        if isinstance(value, list):  # arrays of tables ([[review.sources]])
            for item in value:
                out += unknown_keys(item, sub, name + ".") if isinstance(item, dict) else []
        elif isinstance(value, dict):
            if sub is None:
                out.append(name)
            else:
                out += unknown_keys(value, sub, name + ".")
    return out


ORIGINAL_TOML = """\
[agent_cli]
provider = "claude"

[update.model]
model_id = "anthropic:claude-sonnet-4"
api_base = "http://127.0.0.1:9/v1"
api_key = "sk-test-not-a-real-key"
kwargs = {{ temperature = 0.2 }}

[update.async]
target_batch_candidates = 3
max_wait_seconds = 86400
trigger_candidates = 3

[historian.agent_cli]
provider = "codex"
model = "gpt-5"

[retrieve]
max_output_chars = 100000
backend = "embedding"

[retrieve.embedding]
url = "{url}"
candidate_count = 40
result_count = 10
timeout_seconds = 30

[insight.watch]
trigger_points = 150
update_candidate_points = 1.0
check_interval_seconds = 3000

[dreamer.watch]
trigger_points = 50
update_candidate_points = 1.0
check_interval_seconds = 3000
review_session_points = 1.0

[pruner]
generation_commits = 70
revival_grace_checkpoints = 2

[review]
idle_seconds = 21600
since_days = 3
batch_size = 3

[[review.sources]]
kind = "codex"
path = "~/.codex/sessions"

[debug]
trace = false

[sync]
enabled = false
stale_pull_after_hours = 24
"""

GITIGNORE = "*\n!.gitignore\n!MEMORY.md\n!MEMORY_*.md\n!PURSUITS.md\n!PURSUIT_*.md\n!corrections.md\n" \
            "!insight_logs/\n!insight_logs/*.md\n!update_records/\n!update_records/*.json\n" \
            "!update_queue/\n!update_queue/**\n!AGENT_GUIDANCE_INBOX.md\n"

MEMORY = """\
# Memory

## Tooling {#tooling}

How this project builds and tests.

- `use-pytest` tests run with pytest -q → [dep:ci-runner]
- `ci-runner` CI runs on the self-hosted runner → []

### Billing service {F#billing}

### Runbooks {M#runbooks}

### Deploy skill {S#deploy}
"""

FILES = {
    "MEMORY_billing.md": ("# Billing service\n\n"
                          "- `billing-owner` Bob owns the billing database migrations → [rel:use-pytest]\n"),
    "MEMORY_runbooks.md": "Free-form runbook notes: restart the worker with `make restart`.\n",
    "MEMORY_SKILL_deploy.md": "# Deploy\n\nRun `make deploy` from main only.\n",
    "PURSUITS.md": "# Pursuits\n\n## Ship billing v2 {#billing-v2}\n\n**State:** schema drafted\n\n"
                   "- `do` write the migration\n",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def original_root(tmp_path, service):
    """A root as the original tool writes it, configured with every section of its schema."""
    path = tmp_path / "original"
    path.mkdir()
    (path / ".gitignore").write_text(GITIGNORE)
    (path / "MEMORY.md").write_text(MEMORY)
    for name, text in FILES.items():
        (path / name).write_text(text)
    (path / "insight_logs").mkdir()
    (path / "rightmemory.toml").write_text(ORIGINAL_TOML.format(url=service.url))
    (path / ".runtime").mkdir()
    (path / ".runtime" / ".gitignore").write_text("*\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "-c", "user.name=RightMemory", "-c", "user.email=rightmemory@local", "commit", "-qm",
        "memory: initial baseline")
    return MemoryRoot(path)


def test_original_root_works_end_to_end(cli, original_root, tmp_path):
    rp = str(original_root.path)
    env = {"RIGHTMEMORY_EMBEDDING_API_KEY": TOKEN}

    def run(*args, expect=0, **kw):
        r = cli("--headless", *args, "--root", rp, env=env, **kw)
        assert r.code == expect, (args, r.code, r.stdout, r.stderr)
        return r

    status = run("status", "--json").json()
    assert status["valid"] is True
    text = json.dumps(status)
    assert "dreamer" in text and "review" in text  # accepted keys it ignores are named
    assert "api_key" in text  # and the API key in a tracked file is warned about
    report = run("validate", "--json").json()
    assert report["valid"] is True and report["errors"] == [], report

    out = run("retrieve", "--json", "--session", "orig-1", "who owns the billing migrations").json()
    assert out["results"][0]["id"] == "billing-owner"

    run("config", "set", "update.async.debounce_seconds", "0")  # sessions are ready at once (rmtui.toml)
    for i, session in enumerate(["s1", "s1", "s2"]):
        f = tmp_path / f"ev{i}.md"
        f.write_text(f"Evidence {i}: billing migrations are reviewed by Bob.\n")
        assert run("assistant", "submit", "--session", session, "--request", f"r{i}", str(f)).json()["state"] == "saved"

    task = run("assistant", "update", "begin").json()
    assert task["claimed"] is True
    wt = Path(task["worktree"])
    mem = wt / "MEMORY_billing.md"
    mem.write_text(mem.read_text() + "- `billing-review` Bob reviews billing migrations → [rel:billing-owner]\n")
    git(wt, "add", "-A")
    git(wt, "-c", "user.name=host", "-c", "user.email=host@local", "commit", "-qm", "update: billing review")
    receipt = run("assistant", "update", "complete", "--task", task["task_id"]).json()
    assert receipt["phase"] == "committed"

    mt = run("maintain", "begin", "--json").json()
    mwt = Path(mt.get("worktree") or mt["operation"]["worktree"])
    (mwt / "MEMORY_runbooks.md").write_text("Free-form runbook notes: restart with `make restart-all`.\n")
    git(mwt, "add", "-A")
    git(mwt, "-c", "user.name=me", "-c", "user.email=me@local", "commit", "-qm", "maintain: runbook")
    run("maintain", "land")
    run("guidance", "submit", "--session", "s1", "-", input="Prefer small commits in billing.\n")

    assert check_root(original_root.path) == []
    written = tomllib.loads((original_root.path / "rightmemory.toml").read_text())
    assert unknown_keys(written, ORIGINAL_KEYS) == []
    assert run("validate").code == 0


def test_rmtui_root_passes_the_original_format_checker(cli, root, tmp_path):
    rp = str(root.path)

    def run(*args, expect=0, **kw):
        r = cli("--headless", *args, "--root", rp, **kw)
        assert r.code == expect, (args, r.code, r.stdout, r.stderr)
        return r

    written = tomllib.loads((root.path / "rightmemory.toml").read_text())
    assert unknown_keys(written, ORIGINAL_KEYS) == []
    run("config", "set", "update.async.target_batch_candidates", "2")
    run("config", "set", "update.async.debounce_seconds", "0")
    for i, session in enumerate(["a", "b"]):
        f = tmp_path / f"e{i}.md"
        f.write_text(f"Fact {i}: the staging DB moved to port 5433.\n")
        run("submit", "--session", session, str(f))
    task = run("assistant", "update", "begin").json()
    wt = Path(task["worktree"])
    (wt / "MEMORY.md").write_text((wt / "MEMORY.md").read_text().rstrip("\n")
                                  + "\n\n## Staging {#staging}\n\n"
                                  "- `staging-db-port` the staging DB listens on 5433 → []\n")
    git(wt, "add", "-A")
    git(wt, "-c", "user.name=host", "-c", "user.email=host@local", "commit", "-qm", "update: staging port")
    receipt = run("assistant", "update", "complete", "--task", task["task_id"]).json()
    assert receipt["phase"] == "committed"
    record = json.loads((root.path / "update_records" / f"{task['batch_id']}.json").read_text())
    assert [c["session_id"] for c in record["candidates"]] == ["a", "b"]
    assert all(c["display_id"] == 1 for c in record["candidates"])

    mt = run("maintain", "begin", "--json").json()
    mwt = Path(mt.get("worktree") or mt["operation"]["worktree"])
    (mwt / "MEMORY.md").write_text((mwt / "MEMORY.md").read_text().rstrip("\n")
                                   + "\n- `staging-host` staging runs on db-2 → [rel:staging-db-port]\n")
    git(mwt, "add", "-A")
    git(mwt, "-c", "user.name=me", "-c", "user.email=me@local", "commit", "-qm", "maintain: staging host")
    run("maintain", "land")
    run("guidance", "submit", "--session", "a", "-", input="Ask before touching staging.\n")

    assert check_root(root.path) == []
    assert unknown_keys(tomllib.loads((root.path / "rightmemory.toml").read_text()), ORIGINAL_KEYS) == []


def test_foreign_worktree_survives_recover_mcp_start_and_an_update_pass(cli, root, tmp_path):
    rp = root.path
    foreign = root.ensure_runtime() / "worktrees" / "guidance-5f2a9c1e"
    foreign.parent.mkdir(parents=True, exist_ok=True)
    git(rp, "worktree", "add", "-q", "--detach", str(foreign), "HEAD")
    (foreign / "AGENT_GUIDANCE_INBOX.md").write_text("# Pending Agent Guidance\n\nhalf-written\n")
    before = (foreign / "AGENT_GUIDANCE_INBOX.md").read_text()

    assert cli("--headless", "recover", "--root", str(rp)).code == 0
    mcp = subprocess.run([sys.executable, "-m", "rmtui", "--headless", "mcp", "--root", str(rp)], input="",
                         capture_output=True,
                         text=True, timeout=120)
    assert "Traceback" not in mcp.stderr
    f = tmp_path / "ev.md"
    f.write_text("The worker restarts nightly.\n")
    assert cli("--headless", "submit", "--session", "s", str(f), "--root", str(rp)).code == 0
    ran = cli("--headless", "update", "run-now", "--root", str(rp))  # the root configures no model
    assert ran.code == 4 and "no model is configured for role 'update'" in ran.stderr, ran
    assert cli("--headless", "recover", "--root", str(rp)).code == 0
    assert (foreign / "AGENT_GUIDANCE_INBOX.md").read_text() == before
    assert str(foreign) in git(rp, "worktree", "list")
