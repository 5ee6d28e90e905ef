"""Agent retrieval over both SDKs: the model selects, the renderer resolves."""

from __future__ import annotations

import git
import pytest
from fake_provider import FakeProvider, Turn, call

from rmtui.engine.errors import OperationFailed, UnavailableError
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.memory.config import set_config_value
from rmtui.engine.retrieval.retrieve import retrieve

APIS = ["anthropic", "openai"]
MEMORY = """# Memory

## Build {#build}

- `hatch` Wheels are built with hatchling → [cfg:pyproject]
- `pyproject` pyproject.toml is the one source of metadata → []

## Testing {#testing}

- `pytest-x` Run the suite with pytest -x before committing → []
"""
SEL = {"ids": ["hatch"], "sources": [], "recent_candidates": []}


@pytest.fixture
def provider():
    p = FakeProvider()
    yield p
    p.close()


def setup_root(root, api, provider, **extra):
    (root.path / "MEMORY.md").write_text(MEMORY)
    set_config_value(root.path, "retrieve.backend", "agent")
    set_config_value(root.path, "retrieve.model.model_id", f"{api}:fake-model")
    set_config_value(root.path, "retrieve.model.api_base", provider.base(api))
    set_config_value(root.path, "retrieve.model.kwargs", {"max_retries": 0})
    for k, v in extra.items():
        set_config_value(root.path, k, v)
    repo = git.Repo(root.path)
    repo.index.add(["MEMORY.md", "rightmemory.toml"])
    repo.index.commit("memory")


@pytest.mark.parametrize("api", APIS)
def test_valid_selection_is_rendered_from_the_files(api, provider, root):
    setup_root(root, api, provider)
    provider.push(call("grep", pattern="hatch"), call("submit_selection", **SEL))
    res = retrieve(root, "sess-1", "how are wheels built?")
    assert res.mode == "agent"
    assert res.text == "# Memory\n\n## Build {#build}\n\n- `hatch` Wheels are built with hatchling → [cfg:pyproject]"
    assert [r["id"] for r in res.results] == ["hatch"] and res.results[0]["status"] == "new"
    first = provider.seen[0]
    assert "submit_selection" in first.tool_names and "edit" not in first.tool_names
    assert "answer **only with a\nselection**" in first.system
    ctx = first.user_texts()[0]
    assert "Need: how are wheels built?" in ctx and "new session" in ctx and "`pytest-x`" in ctx
    # the same selection again: already delivered, nothing re-sent
    provider.push(call("submit_selection", **SEL))
    again = retrieve(root, "sess-1", "wheels?")
    assert again.text.startswith("no new match") and again.skipped == ["hatch"]
    assert "has not changed since the last delivery" in provider.seen[2].user_texts()[0]


@pytest.mark.parametrize("api", APIS)
def test_invalid_then_valid_selection(api, provider, root):
    setup_root(root, api, provider)
    provider.push(call("submit_selection", ids=["no-such-id"], sources=[], recent_candidates=[]),
                  call("submit_selection", ids=["testing"], sources=[], recent_candidates=[]))
    res = retrieve(root, "s", "how do I test?")
    assert "- `pytest-x` Run the suite with pytest -x" in res.text and "## Testing {#testing}" in res.text
    assert "hatch" not in res.text
    refused = provider.seen[1].tool_results()[0]
    assert refused["is_error"] and "unknown ids: no-such-id" in refused["content"]


@pytest.mark.parametrize("api", APIS)
def test_selection_that_never_becomes_valid_is_an_error(api, provider, root):
    setup_root(root, api, provider, **{"retrieve.max_selection_attempts": 3})
    bad = {"ids": ["hatch"], "sources": [], "recent_candidates": [], "extra": 1}
    provider.push(*[call("submit_selection", **bad) for _ in range(5)])
    with pytest.raises(OperationFailed, match="no valid selection after 3 attempts"):
        retrieve(root, "s", "anything")
    assert len(provider.seen) == 3


def test_prose_instead_of_a_selection_is_retried_then_fails(provider, root):
    setup_root(root, "openai", provider, **{"retrieve.max_selection_attempts": 2})
    provider.push(Turn(text="Wheels use hatchling."), Turn(text="Still prose."))
    with pytest.raises(OperationFailed, match="did not call submit_selection"):
        retrieve(root, "s", "wheels")
    assert "not a selection" in provider.seen[1].user_texts()[-1]


def test_cli_reports_a_never_valid_selection(provider, root, cli):
    setup_root(root, "anthropic", provider)
    provider.push(*[call("submit_selection", ids=["nope"], sources=[], recent_candidates=[]) for _ in range(3)])
    r = cli("--headless", "retrieve", "--session", "s", "--root", str(root.path), "wheels")
    assert r.code == 1 and "no valid selection after 3 attempts" in r.stderr


def test_later_call_gets_diff_notices_and_pending_evidence(provider, root):
    setup_root(root, "openai", provider)
    provider.push(call("submit_selection", ids=["build"], sources=[], recent_candidates=[]))
    retrieve(root, "s", "build")
    # memory changes (as a landed Update would), and the session submits evidence
    (root.path / "MEMORY.md").write_text(MEMORY.replace("built with hatchling", "built with hatchling 1.27"))
    repo = git.Repo(root.path)
    repo.index.add(["MEMORY.md"])
    repo.index.commit("update: hatch version")
    q = EvidenceQueue(root)
    uid = q.submit("s", b"hatch 1.27 broke force-include ordering")["uid"]
    q.close()
    provider.push(call("submit_selection", ids=["hatch"], sources=[], recent_candidates=[uid]))
    res = retrieve(root, "s", "build again")
    ctx = provider.seen[1].user_texts()[0]
    assert "+- `hatch` Wheels are built with hatchling 1.27" in ctx  # the diff since last delivery
    assert "- `hatch` changed" in ctx  # notice for a delivered item that changed
    assert uid in ctx and "force-include ordering" in ctx  # pending evidence
    assert "(changed since last delivered: its content changed)" in res.text
    assert f"Pending evidence `{uid}`" in res.text and "not settled memory" in res.text
    assert {r["status"] for r in res.results if r["id"] == "hatch"} == {"changed"}


def test_retrieve_never_borrows_a_writer_model(root):
    set_config_value(root.path, "retrieve.backend", "agent")
    set_config_value(root.path, "update.model.model_id", "openai:gpt-5")
    with pytest.raises(UnavailableError, match="no model is configured for role 'retrieve'"):
        retrieve(root, "s", "anything")


def test_unreachable_embedding_service_falls_back_to_agent(provider, root):
    setup_root(root, "openai", provider, **{"retrieve.backend": "embedding",
                                           "embedding.service_url": "http://127.0.0.1:9",
                                           "embedding.local_service": False})
    provider.push(call("submit_selection", **SEL))
    res = retrieve(root, "s", "wheels")
    assert res.mode == "agent" and "`hatch` Wheels" in res.text
    assert any("answered by agent retrieval" in w for w in res.warnings)


def test_free_form_source_ranges_render_and_raise_no_false_notices(provider, root):
    setup_root(root, "openai", provider)
    (root.path / "MEMORY.md").write_text(MEMORY + "\n## Notes {M#notes}\n")
    (root.path / "MEMORY_notes.md").write_text("Release steps:\n1. tag\n2. build\n3. upload\n")
    repo = git.Repo(root.path)
    repo.index.add(["MEMORY.md", "MEMORY_notes.md"])
    repo.index.commit("notes")
    pick = {"ids": [], "sources": [{"source_id": "M#notes", "ranges": [{"start": 1, "end": 3}]}],
            "recent_candidates": []}
    provider.push(call("submit_selection", **pick))
    res = retrieve(root, "s", "how to release")
    assert "Release steps:\n1. tag\n2. build" in res.text and "3. upload" not in res.text
    provider.push(call("submit_selection", ids=["hatch"], sources=[], recent_candidates=[]))
    retrieve(root, "s", "wheels")
    assert "Delivered earlier in this session and changed" not in provider.seen[1].user_texts()[0]
