"""``rmtui chat --role R``: prompt-toolkit input, history, multi-line, Ctrl-D, writer landing."""

from __future__ import annotations

import git
import pytest
from fake_provider import FakeProvider, Turn, call
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rmtui.commands.chat import run_chat
from rmtui.engine.memory.config import set_config_value


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def configure(root, role, provider, api="openai"):
    set_config_value(root.path, f"{role}.model.model_id", f"{api}:fake-model")
    set_config_value(root.path, f"{role}.model.api_base", provider.base(api))
    set_config_value(root.path, f"{role}.model.kwargs", {"max_retries": 0})
    repo = git.Repo(root.path)
    repo.index.add(["rightmemory.toml"])
    repo.index.commit("config")


def test_prompt_session_multiline_history_and_ctrl_d(provider, root):
    configure(root, "historian", provider)
    provider.push(call("git_log", max_count=5), Turn(text="Memory began with the init commit."),
                  Turn(text="Second answer."))
    printed: list[str] = []
    with create_pipe_input() as inp:
        inp.send_text("what changed?\r")
        inp.send_text("line one\x1b\rline two\r")  # Esc-Enter inserts a newline, Enter sends
        inp.send_text("\x04")  # Ctrl-D leaves
        out = run_chat(root, "historian", input=inp, output=DummyOutput(), write=printed.append)
    assert out["messages"] == 2
    assert "Memory began with the init commit." in printed and "Second answer." in printed
    assert printed[0].startswith("rmtui chat with historian (openai:fake-model at ") and "read-only" in printed[0]
    assert provider.seen[0].user_texts() == ["what changed?"]
    assert provider.seen[2].user_texts() == ["what changed?", "line one\nline two"]
    assert "git_log" in provider.seen[0].tool_names and "edit" not in provider.seen[0].tool_names
    assert "interactive chat" in provider.seen[0].system
    history = (root.runtime / "chat" / "history-historian").read_text()
    assert "+what changed?" in history and "+line one\n+line two" in history


def test_writer_chat_lands_its_commits_through_the_supervisor(provider, root):
    configure(root, "update", provider, api="anthropic")
    node = "- `chat-fact` Learned in a chat → []\n"
    provider.push(call("read", path="MEMORY.md"),
                  call("edit", path="MEMORY.md", old_text="# Memory\n", new_text="# Memory\n\n" + node),
                  call("git_add", paths=["MEMORY.md"]), call("git_commit", message="update: chat fact"),
                  Turn(text="Committed."))
    printed: list[str] = []
    out = run_chat(root, "update", lines=["remember chat-fact"], write=printed.append)
    assert out["receipt"]["phase"] == "committed"
    assert node in (root.path / "MEMORY.md").read_text()
    assert printed[-1].startswith("landed ") and "MEMORY.md" in printed[-1]
    assert "RightMemory-Operation: " in git.Repo(root.path).head.commit.message


def test_writer_chat_refused_write_does_not_land(provider, root):
    configure(root, "update", provider)
    provider.push(call("read", path="MEMORY.md"),
                  call("edit", path="MEMORY.md", old_text="# Memory\n", new_text="# Memory\n\n- `x` y → [dep:gone]\n"),
                  call("git_add", paths=["MEMORY.md"]), call("git_commit", message="bad"),
                  Turn(text="ok"))
    printed: list[str] = []
    out = run_chat(root, "update", lines=["do it"], write=printed.append)
    assert out["receipt"]["phase"] == "failed" and printed[-1].startswith("not landed:")
    assert "invalid-graph" in printed[-1]
    assert "dep:gone" not in (root.path / "MEMORY.md").read_text()


def test_retrieve_chat_answers_with_rendered_memory(provider, root):
    (root.path / "MEMORY.md").write_text("# Memory\n\n- `hatch` Wheels use hatchling → []\n")
    configure(root, "retrieve", provider)
    provider.push(call("submit_selection", ids=["hatch"], sources=[], recent_candidates=[]))
    printed: list[str] = []
    run_chat(root, "retrieve", lines=["how are wheels built"], write=printed.append)
    assert "- `hatch` Wheels use hatchling → []" in printed[1]


def test_cli_chat_runs_without_headless(provider, root, cli):
    configure(root, "historian", provider)
    provider.push(Turn(text="From the CLI."))
    r = cli("chat", "--role", "historian", "--root", str(root.path), input="hello\n")
    assert r.code == 0, r.stderr
    assert "From the CLI." in r.stdout and r.stdout.strip().endswith("bye")
    r = cli("chat", "--role", "nobody", "--root", str(root.path), input="")
    assert r.code == 2 and "unknown role" in r.stderr
