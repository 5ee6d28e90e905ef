"""CLI executors with stand-in ``claude`` and ``codex`` programs on PATH.

The stand-in records its arguments, working directory and standard input, then plays the
next step of a plan: answer text, optionally write a file and commit in its working
directory (as a provider's native tools would).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import git
import pytest
from test_sync import _diverge, machines, memory_with, upstream  # noqa: F401  (fixtures)

from rmtui.engine.errors import OperationFailed, UnavailableError
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.config import load_config, set_config_value
from rmtui.engine.retrieval.retrieve import retrieve
from rmtui.engine.roles.executors import make_executor
from rmtui.engine.roles.update_driver import UpdateDriver

STANDIN = textwrap.dedent('''\
    #!{python}
    import json, os, subprocess, sys
    name = os.path.basename(sys.argv[0])
    stdin = sys.stdin.read()
    with open(os.environ["STANDIN_LOG"], "a") as fh:
        fh.write(json.dumps({{"program": name, "argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin}}) + "\\n")
    plan_path = os.environ["STANDIN_PLAN"]
    plan = json.load(open(plan_path))
    step = plan.pop(0) if plan else {{"answer": "plan exhausted"}}
    json.dump(plan, open(plan_path, "w"))
    for path, content in step.get("write", {{}}).items():
        open(path, "w").write(content)
    if step.get("commit"):
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", step["commit"]], check=True)
    if step.get("exit"):
        sys.stderr.write("stand-in failure\\n")
        sys.exit(step["exit"])
    if name == "codex":
        argv = sys.argv[1:]
        out = argv[argv.index("--output-last-message") + 1]
        open(out, "w").write(step["answer"])
        print("codex event log")
    else:
        print(json.dumps({{"type": "result", "is_error": False, "result": step["answer"], "session_id": "sess-42"}}))
''')


@pytest.fixture
def standin(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("claude", "codex"):
        p = bindir / name
        p.write_text(STANDIN.format(python=sys.executable))
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    log, plan = tmp_path / "calls.jsonl", tmp_path / "plan.json"
    plan.write_text("[]")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_LOG", str(log))
    monkeypatch.setenv("STANDIN_PLAN", str(plan))

    class Standin:
        def plan(self, *steps):
            plan.write_text(json.dumps(list(steps)))

        def calls(self):
            return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return Standin()


def use_cli(root, role, provider, model="m-1"):
    set_config_value(root.path, f"{role}.agent_cli.provider", provider)
    set_config_value(root.path, f"{role}.agent_cli.model", model)
    repo = git.Repo(root.path)
    repo.index.add(["rightmemory.toml"])
    repo.index.commit("config")


@pytest.mark.parametrize("provider,role,mode", [
    ("claude", "historian", "plan"), ("claude", "update", "acceptEdits"),
    ("codex", "retrieve", "read-only"), ("codex", "pruner", "workspace-write"),
])
def test_permission_mode_per_role(standin, root, provider, role, mode):
    use_cli(root, role, provider)
    standin.plan({"answer": "hello from the CLI"})
    ex = make_executor(load_config(root.path), role)
    result = ex.run(system="ROLE INSTRUCTIONS", prompt="the task", tools=[], cwd=str(root.path))
    assert result.text == "hello from the CLI"
    (c,) = standin.calls()
    argv = c["argv"]
    assert c["program"] == provider and c["cwd"] == str(root.path)
    assert "ROLE INSTRUCTIONS" in c["stdin"] and "the task" in c["stdin"]
    if provider == "claude":
        assert argv[:5] == ["-p", "--output-format", "json", "--permission-mode", mode]
        assert argv[argv.index("--model") + 1] == "m-1"
        assert ("--allowedTools" in argv) == (mode != "plan")
        if mode != "plan":
            assert "Bash(git commit:*)" in argv
    else:
        assert argv[:3] == ["exec", "--sandbox", mode] and argv[-1] == "-"
        assert argv[argv.index("--cd") + 1] == str(root.path)
        if mode == "workspace-write":
            assert argv[argv.index("--add-dir") + 1] == str(root.path / ".git")
        else:
            assert "--add-dir" not in argv


def test_claude_conversation_resumes_its_session(standin, root):
    use_cli(root, "historian", "claude")
    standin.plan({"answer": "one"}, {"answer": "two"})
    conv = make_executor(load_config(root.path), "historian").start(system="S", tools=[], cwd=str(root.path))
    assert conv.send("first").text == "one"
    assert conv.send("second").text == "two"
    first, second = standin.calls()
    assert "--resume" not in first["argv"]
    assert second["argv"][second["argv"].index("--resume") + 1] == "sess-42"


def test_missing_program_and_failing_program(standin, root, monkeypatch):
    use_cli(root, "update", "codex")
    standin.plan({"answer": "", "exit": 3})
    ex = make_executor(load_config(root.path), "update")
    with pytest.raises(OperationFailed, match="exited with 3: stand-in failure"):
        ex.run(system="s", prompt="p", tools=[], cwd=str(root.path))
    set_config_value(root.path, "update.agent_cli.command", "no-such-codex-binary")
    with pytest.raises(UnavailableError, match="not on PATH"):
        make_executor(load_config(root.path), "update").run(system="s", prompt="p", tools=[], cwd=str(root.path))


@pytest.mark.parametrize("provider", ["claude", "codex"])
def test_cli_update_lands_through_the_supervisor(standin, root, provider):
    use_cli(root, "update", provider)
    q = EvidenceQueue(root)
    uid = q.submit("s", b"ruff line length is 120")["uid"]
    q.close()
    node = "# Memory\n\n- `ruff-120` Ruff line length is 120 → []\n"
    standin.plan({"answer": "Changed ruff-120.", "write": {"MEMORY.md": node}, "commit": "update: ruff"})
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "committed", out
    assert (root.path / "MEMORY.md").read_text() == node
    (c,) = standin.calls()
    assert c["cwd"].startswith(str(root.runtime / "worktrees"))  # it ran in the isolated worktree
    assert uid in c["stdin"] and "Candidates are **evidence" in c["stdin"]
    assert ("acceptEdits" if provider == "claude" else "workspace-write") in c["argv"]


def test_cli_forbidden_write_is_refused_by_the_supervisor(standin, root):
    """Native tools can write anything in the worktree; admission still refuses it."""
    use_cli(root, "update", "claude")
    q = EvidenceQueue(root)
    uid = q.submit("s", b"pursue fast CI")["uid"]
    q.close()
    before = (root.path / "rightmemory.toml").read_text()
    standin.plan({"answer": "done", "write": {"rightmemory.toml": "[update]\n"}, "commit": "update: config"})
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "failed" and "forbidden-path" in out.failure.message
    assert (root.path / "rightmemory.toml").read_text() == before
    q = EvidenceQueue(root)
    assert q.get(uid).state == "queued"
    q.close()


def test_cli_retrieval_parses_json_and_retries_invalid_answers(standin, root):
    (root.path / "MEMORY.md").write_text("# Memory\n\n- `hatch` Wheels use hatchling → []\n")
    set_config_value(root.path, "retrieve.backend", "agent")
    use_cli(root, "retrieve", "codex")
    standin.plan({"answer": "I think hatch matters."},
                 {"answer": "```json\n{\"ids\": [\"hatch\"], \"sources\": [], \"recent_candidates\": []}\n```"})
    res = retrieve(root, "s", "wheels")
    assert res.text == "# Memory\n\n- `hatch` Wheels use hatchling → []"
    first, second = standin.calls()
    assert "read-only" in first["argv"] and "submit_selection" in first["stdin"]
    assert "Your answer was refused: the answer is not a JSON object" in second["stdin"]


def test_a_roles_stray_file_is_kept_and_named_in_the_receipt(standin, root, cli):
    """A CLI role can write any file in its worktree; one the allow-list leaves out (never
    committed) is moved to .runtime/kept/ when the worktree goes, and the receipt says where."""
    use_cli(root, "update", "claude")
    q = EvidenceQueue(root)
    q.submit("s", b"ruff line length is 120")
    q.close()
    node = "# Memory\n\n- `ruff-120` Ruff line length is 120 → []\n"
    standin.plan({"answer": "Changed ruff-120.", "write": {"MEMORY.md": node, "notes.md": "my scratch notes\n"},
                  "commit": "update: ruff"})
    out = UpdateDriver(root).run_once(force=True)
    assert out.state == "committed", out
    assert (root.path / "MEMORY.md").read_text() == node and not (root.path / "notes.md").exists()
    op_id = out.receipt.operation_id
    kept = root.runtime / "kept" / op_id / "notes.md"
    assert kept.read_text() == "my scratch notes\n"
    assert not (root.runtime / "worktrees" / op_id).exists()
    (warning,) = [w for w in out.receipt.warnings if "untracked-files" in w]
    assert "notes.md" in warning and str(kept.parent) in warning
    shown = cli("--headless", "receipts", "show", op_id, "--root", str(root.path))
    assert shown.code == 0 and "notes.md" in shown.stdout and str(kept.parent) in shown.stdout


def test_a_cli_reconcilers_stray_file_is_kept_and_named_by_the_pull(standin, machines):  # noqa: F811
    """The sync repair's staging worktree goes after the pull; a file the CLI reconciler left
    there outside the memory files is kept under .runtime/kept/ and the pull's answer says where."""
    from rmtui.engine import sync

    a, b = machines
    _diverge(a, b)
    set_config_value(b.path, "sync-reconciler.agent_cli.provider", "claude")  # per machine, never committed
    set_config_value(b.path, "sync-reconciler.agent_cli.model", "m-1")
    resolved = memory_with(("port", "the staging DB listens on 5433 (6543 was an old local note)"))
    standin.plan({"answer": "Resolved the port conflict.", "write": {"MEMORY.md": resolved,
                                                                     "notes.md": "why 5433\n"},
                  "commit": "sync: reconcile staging port"})
    res = sync.pull(b)
    assert res.status == "synced", res
    assert (b.path / "MEMORY.md").read_text() == resolved and not (b.path / "notes.md").exists()
    (kept,) = list((b.runtime / "kept").glob("sync-*/notes.md"))
    assert kept.read_text() == "why 5433\n"
    assert "untracked-files" in res.message and "notes.md" in res.message and str(kept.parent) in res.message
