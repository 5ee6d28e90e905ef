"""The memory loop keeps its word (docs/memory-doctrine.md, "Contract"): what a role's text
tells a model about correction files and collections is what admission enforces, and an
entry Update writes into a collection is read again by Retrieve (model and embedding)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_provider import FakeProvider, Turn, call
from supervisor_kit import MEMORY, add_memory_node, commit, git, porcelain, seed, snapshot

from rmtui.engine.memory.config import set_config_value
from rmtui.engine.memory.validation import MAX_CORRECTIONS
from rmtui.engine.roles.tools import RoleTools
from rmtui.engine.writes.admission import AdmissionRefused
from rmtui.engine.writes.supervisor import Supervisor
from tests.retrieve_kit import TOKEN

ENTRY = """\
### Migrations ship with their rollback

Asked: add a column to the billing table.
Did: wrote a forward-only database migration.
Rejected: no way back when the deploy fails.
Accepted: every database migration ships with its down step.
Lesson: write the rollback together with the migration.
"""
LINK = """\
# Cross-Session Agent Behavior

## Agent corrections {#agent-corrections}

Concrete corrections a person gave agents.

### Design corrections {M#agent-corrections-design}
"""
DESIGN = "MEMORY_agent-corrections-design.md"
CORRECTION = "## {t}\n\n### Candidate\nc\n\n### Proposed edit\np\n\n### Accepted edit\na\n\n"


@pytest.fixture
def sup(root):
    seed(root)
    s = Supervisor(root)
    yield s
    s.close()


def refused(sup: Supervisor, role: str, files: dict[str, str], rule: str) -> AdmissionRefused:
    """A ``role`` candidate writing ``files`` is refused by ``rule``; the root is untouched."""
    op = sup.begin("correction" if role == "update-correction" else "update", role)
    commit(op.worktree, files, f"{role}: try")
    before, head = snapshot(sup.root.path), git(sup.root.path, "rev-parse", "HEAD")
    with pytest.raises(AdmissionRefused) as info:
        sup.finish(op, summary="try")
    assert info.value.rule == rule, info.value
    assert snapshot(sup.root.path) == before and git(sup.root.path, "rev-parse", "HEAD") == head
    assert porcelain(sup.root.path) == ""
    sup.abandon(sup.store.get(op.id), "test")
    return info.value


def test_update_roles_may_not_commit_the_guidance_inbox(sup):
    """Their texts say to leave it; admission refuses it, naming the path."""
    for role in ("update", "update-correction"):
        exc = refused(sup, role, {"MEMORY.md": add_memory_node(MEMORY, f"n-{role}"),
                                  "AGENT_GUIDANCE_INBOX.md": "# Pending Agent Guidance\n"}, "forbidden-path")
        assert exc.details["path"] == "AGENT_GUIDANCE_INBOX.md"


def test_a_correction_that_changes_only_corrections_md_is_not_a_fix(sup):
    exc = refused(sup, "update-correction", {"corrections.md": CORRECTION.format(t="Only feedback")},
                  "correction-not-a-fix")
    assert "only corrections.md" in exc.message


def test_a_correction_may_not_leave_corrections_md_over_capacity_but_an_old_overflow_blocks_no_one(sup):
    over = "".join(CORRECTION.format(t=f"Entry {n}") for n in range(MAX_CORRECTIONS + 1))
    exc = refused(sup, "update-correction", {"MEMORY.md": add_memory_node(MEMORY, "fixed"), "corrections.md": over},
                  "corrections-capacity")
    assert f"at most {MAX_CORRECTIONS}" in exc.message
    # an overflow already in the root (say, from a sync) never blocks an unrelated write
    commit(sup.root.path, {"corrections.md": over}, "seed: an old overflow")
    for role in ("update", "update-correction"):
        op = sup.begin("update", role)
        commit(op.worktree, {"MEMORY.md": add_memory_node(MEMORY, f"unrelated-{role}")}, "unrelated")
        assert sup.finish(op, summary="ok").phase == "committed"
        commit(sup.root.path, {"MEMORY.md": MEMORY}, "reset memory")


def test_a_collection_no_heading_links_is_refused(sup):
    exc = refused(sup, "update", {DESIGN: ENTRY}, "collection-unlinked")
    assert exc.details["path"] == DESIGN and "M#agent-corrections-design" in exc.message
    op = sup.begin("update", "update")
    commit(op.worktree, {DESIGN: ENTRY, "MEMORY.md": MEMORY + "\n" + LINK}, "linked")
    assert sup.finish(op, summary="ok").phase == "committed"


def test_the_correction_role_reads_the_rest_of_a_long_landing_with_the_tool_its_task_names(root):
    """The cut landing names ``git_diff`` over the commit's own range: the role has it, and it
    shows exactly that commit's change of the path."""
    from rmtui.engine.cycles.corrections import MAX_DIFF_CHARS, landing_text

    seed(root)
    landed = commit(root.path, {"MEMORY.md": add_memory_node(MEMORY, "landed-node")}, "update: landed")
    commit(root.path, {"MEMORY.md": add_memory_node(add_memory_node(MEMORY, "landed-node"), "later")}, "later")
    text = landing_text("x" * (MAX_DIFF_CHARS + 1), landed)
    rev = text.split("rev `", 1)[1].split("`", 1)[0]
    tools = RoleTools(root.path, "update-correction")
    try:
        assert "git_diff" in {s.name for s in tools.specs()}
        diff = tools.git_diff({"rev": rev, "path": "MEMORY.md"})
    finally:
        tools.repo.close()
    assert "+- `landed-node` A new fact. → []" in diff and "later" not in diff


def test_saved_evidence_waits_in_the_inbox_when_approval_is_required(root, cli, tmp_path):
    set_config_value(root.path, "update.approval", "required")
    f = tmp_path / "ev.md"
    f.write_text("The staging database listens on port 5433.", encoding="utf-8")
    r = cli("--headless", "assistant", "submit", "--session", "s1", "--request", "r1", str(f),
            "--root", str(root.path))
    assert r.code == 0, r.stderr
    assert r.json()["state"] == "saved" and r.json()["queue_state"] == "inbox"
    listed = cli("--headless", "evidence", "list", "--json", "--root", str(root.path)).json()
    assert [e["state"] for e in listed] == ["inbox"]


def test_a_model_update_writes_a_collection_entry_that_model_and_embedding_retrieval_return(root, cli, service,
                                                                                          tmp_path):
    """Evidence of a person's correction; the Update model (a scripted fake over real HTTP)
    keeps it as a linked collection entry; a later Retrieve returns the entry, by embedding
    and by a retrieve model's selection of the collection's ``M#`` source."""
    from rmtui.engine.retrieval.retrieve import retrieve
    from rmtui.engine.roles.update_driver import UpdateDriver

    provider = FakeProvider()
    try:
        for key, value in (("update.model.model_id", "anthropic:fake-model"),
                           ("update.model.api_base", provider.base("anthropic")),
                           ("update.model.kwargs", {"max_retries": 0}),
                           ("embedding.service_url", service.url),
                           ("embedding.service_token_env", "RMTUI_TEST_TOKEN")):
            set_config_value(root.path, key, value)
        ev = tmp_path / "ev.md"
        ev.write_text("I wrote a forward-only migration for the billing table; the person rejected it because a "
                      "failed deploy could not be rolled back, and asked that every migration ship with its down "
                      "step. They have said this before.", encoding="utf-8")
        assert cli("--headless", "submit", "--session", "s1", str(ev), "--root", str(root.path)).code == 0
        provider.push(call("read", path="MEMORY.md"), call("create", path=DESIGN, content=ENTRY),
                      call("edit", path="MEMORY.md", old_text="# Memory\n", new_text="# Memory\n\n" + LINK),
                      call("validate_memory"), call("git_add", paths=["MEMORY.md", DESIGN]),
                      call("git_commit", message="update: keep the rollback correction"),
                      Turn(text="Changed: agent-corrections (new), one design correction."))
        landed = UpdateDriver(root).run_once(force=True)
        assert landed.state == "committed", landed
        validated = [r for s in provider.seen for r in s.tool_results() if r["content"].startswith("valid")]
        assert validated, "the Update model's validate_memory did not answer valid"
        assert (root.path / DESIGN).read_text(encoding="utf-8") == ENTRY

        need = "how should I write a database migration for the billing table?"
        r = cli("--headless", "retrieve", "--json", "--root", str(root.path), "--session", "reader", "--top", "3",
                need, env={"RMTUI_TEST_TOKEN": TOKEN})
        assert r.code == 0, r.stderr
        assert "every database migration ships with its down step" in r.json()["text"]

        for key, value in (("retrieve.backend", "agent"), ("retrieve.model.model_id", "anthropic:fake-model"),
                           ("retrieve.model.api_base", provider.base("anthropic")),
                           ("retrieve.model.kwargs", {"max_retries": 0})):
            set_config_value(root.path, key, value)
        provider.push(call("submit_selection", ids=[], recent_candidates=[],
                           sources=[{"source_id": "M#agent-corrections-design", "ranges": [{"start": 1, "end": 7}]}]))
        res = retrieve(root, "reader-2", need)
        assert not [x for s in provider.seen for x in s.tool_results() if x["is_error"]]
        assert "### Design corrections {M#agent-corrections-design}" in res.text
        assert "Lesson: write the rollback together with the migration." in res.text
    finally:
        provider.close()


def test_the_outline_command_prints_what_the_outline_tool_prints(root, cli):
    seed(root)
    for role in ("update", "insight"):
        r = cli("--headless", "outline", "--path", str(root.path), "--role", role)
        assert r.code == 0, r.stderr
        tools = RoleTools(root.path, role)
        assert r.stdout.rstrip("\n") == tools.outline({})
        tools.repo.close()
    assert "PURSUITS.md" not in cli("--headless", "outline", "--path", str(root.path), "--role", "insight").stdout
    bad = cli("--headless", "outline", "--path", str(root.path), "--role", "nobody")
    assert bad.code == 2 and "unknown role" in bad.stderr
    missing = cli("--headless", "outline", "--path", str(Path(root.path) / "nope"))
    assert missing.code == 2


# -- the fixed collection headings: kept by every model role, as the doctrine says --------------

BOTH = """\
# Cross-Session Agent Behavior

## Agent corrections {#agent-corrections}

Concrete corrections a person gave agents.

### Writing corrections {M#agent-corrections-writing}

### Design corrections {M#agent-corrections-design}
"""
WRITING = "MEMORY_agent-corrections-writing.md"
WRITING_ENTRY = ENTRY.replace("Migrations ship with their rollback", "Plain words in release notes")


def _linked(sup: Supervisor) -> str:
    """A root whose two collections are linked by their fixed headings."""
    return commit(sup.root.path, {"MEMORY.md": MEMORY + "\n" + BOTH, DESIGN: ENTRY, WRITING: WRITING_ENTRY},
                  "seed: linked collections")


def _without(heading: str) -> str:
    return MEMORY + "\n" + BOTH.replace(heading + "\n", "")


def test_a_model_role_may_not_remove_or_retarget_a_fixed_collection_heading(sup):
    """The doctrine: never remove a fixed heading or change its ``{M#…}`` anchor. Admission
    refuses it for every model role, by name, even when nothing else in the commit is wrong."""
    _linked(sup)
    exc = refused(sup, "update", {"MEMORY.md": _without("### Design corrections {M#agent-corrections-design}")},
                  "collection-heading-removed")
    assert "{M#agent-corrections-design}" in exc.message and "removed" in exc.message
    assert exc.details["path"] == "MEMORY.md"
    for role in ("update-correction", "pruner"):
        exc = refused(sup, role, {"MEMORY.md": _without("### Writing corrections {M#agent-corrections-writing}"),
                                  "corrections.md": CORRECTION.format(t="Drop it")} if role != "pruner" else
                      {"MEMORY.md": _without("### Writing corrections {M#agent-corrections-writing}")},
                      "collection-heading-removed")
        assert "{M#agent-corrections-writing}" in exc.message
    retargeted = (MEMORY + "\n" + BOTH).replace("{M#agent-corrections-design}", "{F#agent-corrections-design}")
    exc = refused(sup, "update", {"MEMORY.md": retargeted}, "collection-heading-removed")
    assert "{M#agent-corrections-design}" in exc.message and "{F#agent-corrections-design}" in exc.message
    renamed = (MEMORY + "\n" + BOTH).replace("{M#agent-corrections-design}", "{M#design-lessons}")
    exc = refused(sup, "update", {"MEMORY.md": renamed, "MEMORY_design-lessons.md": ENTRY, DESIGN: None},
                  "collection-heading-removed")
    assert "{M#agent-corrections-design}" in exc.message
    # moved out of MEMORY.md, into a backing file of its own: no longer where the text says it is
    moved = _without("### Design corrections {M#agent-corrections-design}").replace(
        "## Project {#proj}", "## Project {F#proj}").replace(
        "- `build` Build with make. → [rel:test]\n- `test` Run pytest. → []\n- `old` An old fact. → []\n", "")
    exc = refused(sup, "update", {"MEMORY.md": moved, "MEMORY_proj.md": (
        "### Tools {#tools}\n\n- `build` Build with make. → [rel:test]\n- `test` Run pytest. → []\n"
        "- `old` An old fact. → []\n\n### Design corrections {M#agent-corrections-design}\n")},
        "collection-heading-removed")
    assert "MEMORY.md" in exc.message and "MEMORY_proj.md" in exc.message


def test_a_fixed_heading_may_be_moved_within_memory_md_and_its_title_reworded(sup):
    _linked(sup)
    op = sup.begin("update", "update")
    reordered = BOTH.replace("### Writing corrections {M#agent-corrections-writing}\n\n", "").replace(
        "### Design corrections {M#agent-corrections-design}",
        "### Corrections that needed another decision {M#agent-corrections-design}\n\n"
        "### Wording corrections {M#agent-corrections-writing}")
    commit(op.worktree, {"MEMORY.md": BOTH.split("\n", 1)[0] + "\n" + reordered.split("\n", 1)[1] + "\n" + MEMORY},
           "update: reword")
    assert sup.finish(op, summary="ok").phase == "committed"
    text = (sup.root.path / "MEMORY.md").read_text(encoding="utf-8")
    assert "### Wording corrections {M#agent-corrections-writing}" in text
    assert text.index("{M#agent-corrections-design}") < text.index("{M#agent-corrections-writing}")


def test_the_sync_reconciler_and_a_persons_maintenance_may_remove_a_fixed_heading(sup, cli):
    """The reconciler merges both sides as they are, and a person may retire a collection; the
    file left unlinked is a warning, never a refusal for them."""
    _linked(sup)
    op = sup.begin("sync", "sync-reconciler")
    commit(op.worktree, {"MEMORY.md": _without("### Design corrections {M#agent-corrections-design}")}, "merge")
    assert sup.finish(op, summary="ok").phase == "committed"
    assert "{M#agent-corrections-design}" not in (sup.root.path / "MEMORY.md").read_text(encoding="utf-8")

    root = str(sup.root.path)
    begun = cli("--headless", "maintain", "begin", "--json", "--root", root)
    assert begun.code == 0, begun.stderr
    wt = Path(begun.json()["worktree"])
    (wt / "MEMORY.md").write_text(MEMORY + "\n" + BOTH.replace(
        "### Writing corrections {M#agent-corrections-writing}\n", "").replace(
        "### Design corrections {M#agent-corrections-design}\n", ""), encoding="utf-8")
    landed = cli("--headless", "maintain", "land", "--json", "--root", root)
    assert landed.code == 0, landed.stdout + landed.stderr
    assert "{M#agent-corrections-writing}" not in (sup.root.path / "MEMORY.md").read_text(encoding="utf-8")
    assert git(sup.root.path, "log", "-1", "--format=%s").startswith("maintain")
