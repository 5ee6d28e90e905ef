"""A question view answers from the whole memory (the RightMemory format gives ``question.toml`` no
scope), so a scope is refused rather than dropped: ``create --question --include/--exclude`` writes
nothing, a ``question.toml`` that carries a scope is never answered, and ``shared-view list
--provided`` shows what each view shares."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from test_shared_views import commit_files, git, make_consumer, make_provider

from rmtui.engine.views import files, provider

SCOPE_RULE = "a question view cannot be scoped"


def _head(root) -> str:
    return git(root.path, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("scope", [["--include", "platform"], ["--exclude", "private"],
                                   ["--include", "platform", "--exclude", "root-password"]])
def test_create_refuses_a_scoped_question_view_and_writes_nothing(tmp_path, cli, scope):
    root = make_provider(tmp_path)
    before = _head(root)
    r = cli("--headless", "shared-view", "create", "askops", "--question", *scope, "--root", str(root.path))
    assert r.code == 2, (r.stdout, r.stderr)
    assert SCOPE_RULE in r.stderr and "whole memory" in r.stderr and "file view" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (root.path / "shared_views" / "askops").exists()
    assert _head(root) == before  # no commit


def test_list_provided_shows_each_views_scope(tmp_path, cli):
    root = make_provider(tmp_path)
    provider.create_file_view(root, "platform", ["platform"], exclude=["root-password"])
    provider.create_question_view(root, "askops")
    r = cli("--headless", "shared-view", "list", "--provided", "--root", str(root.path))
    assert r.code == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()}
    assert "answers from the whole memory" in lines["askops"]
    assert "shares platform" in lines["platform"] and "not root-password" in lines["platform"]
    r = cli("--headless", "shared-view", "list", "--provided", "--json", "--root", str(root.path))
    views = {v["view_id"]: v for v in json.loads(r.stdout)}
    assert views["askops"]["scope"] == {"whole_memory": True, "include": [], "exclude": []}
    assert views["platform"]["scope"] == {"whole_memory": False, "include": ["platform"],
                                          "exclude": ["root-password"]}


@pytest.fixture
def served_scoped(tmp_path) -> Iterator[tuple]:
    """A provider whose ``askops`` question.toml was given a scope by hand, served by ``shared-view serve``."""
    root = make_provider(tmp_path)
    provider.create_question_view(root, "askops")
    qt = root.path / "shared_views" / "askops" / "question.toml"
    commit_files(root, {"shared_views/askops/question.toml":
                        qt.read_text(encoding="utf-8") + 'include_headings = ["platform"]\n'})
    _, token = files.issue_token(root, "askops", "question", "ops")
    proc = subprocess.Popen([sys.executable, "-m", "rmtui", "--headless", "shared-view", "serve", "--port", "0",
                             "--root", str(root.path)], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ))
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert "serving shared views at http://127.0.0.1:" in line, line
        yield root, line.split(" at ", 1)[1].split()[0], token
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_scoped_question_toml_is_never_answered_from_the_whole_memory(tmp_path, cli, served_scoped):
    _root, url, token = served_scoped
    cons = make_consumer(tmp_path)
    env = {"ASK_TOKEN": token}
    deadline = time.monotonic() + 20
    while True:  # the socket is bound before the line is printed; the app starts right after
        r = cli("--headless", "shared-view", "connect", f"{url}/api/share/questions/askops", "--token-env",
                "ASK_TOKEN", "--root", str(cons.path), env=env)
        if r.code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.code == 0, r.stderr
    r = cli("--headless", "shared-view", "ask", "askops", "what are salaries and the root password?", "--json",
            "--root", str(cons.path), env=env)
    assert r.code == 4
    got = json.loads(r.stdout)
    assert got["status"] == "unavailable"
    assert "include_headings" in got["reason"] and SCOPE_RULE in got["reason"]
    for secret in ("hunter2", "Salaries", "Helm"):  # nothing of the memory, inside the scope or out
        assert secret not in r.stdout
