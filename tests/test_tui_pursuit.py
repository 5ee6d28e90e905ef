"""The Pursuit editor screen (5), driven with the keys a person presses: create, rename, edit a
body, Focus, delete (with the Memory edges it drops), undo and redo, a checkpoint that lands
one commit; an edit made behind the screen's back is refused as stale with nothing lost; the
screen follows the journal live."""

from __future__ import annotations

import json

import git
import pytest
from cycles_kit import head
from test_tui_support import quiet, run_in_thread, type_text, wait_for

from rmtui.engine import pursuit
from rmtui.engine.host.watch import EDITOR, classify
from rmtui.tui.app import RmtuiApp
from rmtui.tui.screens.dialogs import ConfirmScreen, HelpScreen, PromptScreen, TextScreen
from rmtui.tui.screens.pursuit import PursuitScreen
from rmtui.tui.widgets.pursuit_tree import FOCUS, MAP, PursuitTree

SIZE = (140, 44)

MEMORY = """\
# Memory

## Tools {#tools}

- `keep-node` The build uses just → []
- `m1` CI speed matters → [rel:faster-builds, dep:keep-node]
- `m2` Caches live in S3 → [loc:keep-node]
- `m3` The old plan had notes → [rel:old-idea, dep:keep-node]
- `m4` More on the old plan → [doc:old-idea]
"""

PURSUITS = """\
# Pursuits

## Focus

- `faster-builds`

## Faster builds {#faster-builds} → [dep:keep-node]

**State:** measuring.

### Cache the deps {#cache-deps} → [rel:m2]

## Old idea {#old-idea}

Kept for reference.
"""


def commit(root, message: str, files: dict[str, str]) -> str:
    """Write ``files`` into the root and commit them, as a landing elsewhere would."""
    repo = git.Repo(root.path)
    try:
        for rel, text in files.items():
            (root.path / rel).write_text(text, encoding="utf-8")
        repo.git.add("--", *files)
        repo.git.commit("-q", "-m", message)
        return repo.head.commit.hexsha
    finally:
        repo.close()




@pytest.fixture
def proot(root, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    commit(root, "seed: pursuits", {"MEMORY.md": MEMORY, "PURSUITS.md": PURSUITS})
    return root


async def open_editor(app, pilot) -> PursuitScreen:
    await pilot.press("5")
    await wait_for(pilot, lambda: isinstance(app.screen, PursuitScreen) and app.screen.loaded,
                   what="the Pursuit editor")
    return app.screen


async def cursor_to(pilot, tree: PursuitTree, pid: str, group: str = MAP) -> None:
    """Walk the tree's cursor to ``pid`` (in ``group``) with the arrow keys."""
    for _ in range(40):
        if tree.cursor_target() == (group, pid):
            return
        target = tree._by_key[(group, pid)].line
        await pilot.press("down" if tree.cursor_line < target else "up")
    raise AssertionError(f"the arrow keys never reached {pid}")


async def answered(pilot, screen: PursuitScreen, condition, what: str) -> None:
    """Wait until the screen's write finished and ``condition(state)`` holds."""
    await wait_for(pilot, lambda: not screen.busy and screen.state is not None and condition(screen.state),
                   what=what)


def ids(state) -> list[str]:
    return [p["id"] for p in state.pursuits]


@pytest.fixture(autouse=True)
def shown_notes(monkeypatch):
    """Every notice the app showed, kept past its toast's timeout: a busy machine can take
    longer than the toast stays between the notice and the assertion that reads it."""
    show = RmtuiApp.notify

    def notify(self, message, *args, **kwargs):
        self.__dict__.setdefault("shown_notes", []).append(str(message))
        return show(self, message, *args, **kwargs)

    monkeypatch.setattr(RmtuiApp, "notify", notify)


def notes(app) -> list[str]:
    return list(app.__dict__.get("shown_notes", []))


def dialog_error(dialog) -> str:
    return str(dialog.query_one(".dialog-error").render())


def by_id(state, pid):
    return next(p for p in state.pursuits if p["id"] == pid)


async def test_edit_the_map_with_keys_then_checkpoint_one_commit(proot):
    root = proot
    app = RmtuiApp(root, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_editor(app, pilot)
        tree = screen.query_one(PursuitTree)
        assert ids(screen.state) == ["faster-builds", "cache-deps", "old-idea"]
        # the Focus order comes first, numbered
        assert tree.root.children[0].data.group == FOCUS and tree.cursor_target() == (MAP, "faster-builds")
        assert screen.check_action("undo", ()) is None and screen.check_action("checkpoint", ()) is None

        # n: a title, then the parent (prefilled: a sibling of the highlighted Pursuit, right after it)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the title prompt")
        await type_text(pilot, "Ship the CLI")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen)
                       and app.screen.input_id == "pursuit-parent", what="the parent prompt")
        await pilot.press("enter")  # empty: the top level
        await answered(pilot, screen, lambda st: "ship-the-cli" in ids(st), "the new Pursuit")
        assert ids(screen.state) == ["faster-builds", "cache-deps", "ship-the-cli", "old-idea"]
        assert tree.highlighted_id == "ship-the-cli" and screen.state.pending_edits == 1
        assert "1 pending edit" in str(screen.query_one("#pursuit-status").render())

        # r: rename (the title is prefilled; ctrl+u clears it)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the rename prompt")
        await pilot.press("end", "ctrl+u")
        await type_text(pilot, "Ship the command line")
        await pilot.press("enter")
        await answered(pilot, screen, lambda st: by_id(st, "ship-the-cli")["title"] == "Ship the command line",
                       "the rename")

        # f: into Focus, after the entries already there
        await pilot.press("f")
        await answered(pilot, screen, lambda st: st.focus == ["faster-builds", "ship-the-cli"], "the focus")
        assert tree._by_key.get((FOCUS, "ship-the-cli")) is not None

        # u twice, ctrl+r once: the rename comes back, the focus stays undone (and redoable)
        await pilot.press("u")
        await answered(pilot, screen, lambda st: st.focus == ["faster-builds"], "the first undo")
        await pilot.press("u")
        await answered(pilot, screen, lambda st: by_id(st, "ship-the-cli")["title"] == "Ship the CLI",
                       "the second undo")
        assert screen.state.can_redo and screen.state.cursor == 1
        await pilot.press("ctrl+r")
        await answered(pilot, screen, lambda st: by_id(st, "ship-the-cli")["title"] == "Ship the command line",
                       "the redo")
        assert screen.state.cursor == 2 and screen.state.focus == ["faster-builds"]
        assert any("redo: pursuit: rename ship-the-cli" in n for n in notes(app))

        # e: the body in a text dialog; ctrl+s saves
        await cursor_to(pilot, tree, "ship-the-cli")
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), what="the body dialog")
        await type_text(pilot, "Drafting the commands")
        await pilot.press("enter")
        await type_text(pilot, "Then the docs")
        await pilot.press("ctrl+s")
        await answered(pilot, screen, lambda st: by_id(st, "ship-the-cli")["body"]
                       == "Drafting the commands\nThen the docs", "the body")
        assert not screen.state.can_redo  # a new edit drops what could have been redone
        await pilot.press("f")
        await answered(pilot, screen, lambda st: st.focus == ["faster-builds", "ship-the-cli"], "the focus")

        # d: asks first, naming the Memory edges that go with the Pursuit
        await cursor_to(pilot, tree, "old-idea")
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the delete confirmation")
        question = str(app.screen.query_one("#confirm-question").render())
        assert "2 Memory edges" in question and "m3 → old-idea" in question and "m4 → old-idea" in question
        await pilot.press("y")
        await answered(pilot, screen, lambda st: "old-idea" not in ids(st), "the delete")
        assert screen.state.changed_files == ["MEMORY.md", "PURSUITS.md"]
        # nothing reached the root yet
        assert (root.path / "PURSUITS.md").read_text() == PURSUITS
        assert (root.path / "MEMORY.md").read_text() == MEMORY

        # c: one commit through the supervisor
        before = head(root)
        await pilot.press("c")
        await answered(pilot, screen, lambda st: st.pending_edits == 0 and st.head != before,
                       "the checkpoint")
        await wait_for(pilot, lambda: any(n.startswith("landed ") and "pursuit: edit map" in n for n in notes(app)),
                       what="the landed notice")
        assert "no pending edits" in str(screen.query_one("#pursuit-status").render())
        assert screen.check_action("undo", ()) is None

    repo = git.Repo(root.path)
    landed = repo.head.commit
    assert landed.parents[0].hexsha == before and landed.hexsha == head(root)
    assert sorted(landed.stats.files) == ["MEMORY.md", "PURSUITS.md"]
    message = landed.message
    assert message.startswith("pursuit: edit map\n\n- pursuit: create ship-the-cli\n- pursuit: rename ship-the-cli\n"
                              "- pursuit: edit body of ship-the-cli\n- pursuit: focus ship-the-cli\n"
                              "- pursuit: delete old-idea\n")
    assert "RightMemory-Pursuit-Editor: 1" in message
    assert (landed.tree / "PURSUITS.md").data_stream.read().decode() == """\
# Pursuits

## Focus

- `faster-builds`
- `ship-the-cli`

## Faster builds {#faster-builds} → [dep:keep-node]

**State:** measuring.

### Cache the deps {#cache-deps} → [rel:m2]

## Ship the command line {#ship-the-cli}

Drafting the commands
Then the docs
"""
    # exactly the edges to the deleted Pursuit are gone from Memory
    diff = repo.git.diff(f"{landed.hexsha}~1", landed.hexsha, "--", "MEMORY.md")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-- `m3` The old plan had notes → [rel:old-idea, dep:keep-node]",
                       "-- `m4` More on the old plan → [doc:old-idea]",
                       "+- `m3` The old plan had notes → [dep:keep-node]",
                       "+- `m4` More on the old plan → []"]
    assert pursuit.show(root).pending_edits == 0


async def test_a_change_behind_the_screens_back_is_refused_as_stale_and_nothing_is_lost(proot, cli):
    root = proot
    app = RmtuiApp(root, live=False)  # no watcher: the screen cannot have seen the change
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_editor(app, pilot)
        tree = screen.query_one(PursuitTree)
        shown = screen.revision
        r = await run_in_thread(lambda: cli("--headless", "pursuit", "apply", "--op",
                                            json.dumps({"type": "create", "title": "From the CLI"}),
                                            "--expected-revision", shown, "--root", str(root.path), "--json"))
        assert r.code == 0, r.stderr
        assert tree.cursor_target() == (MAP, "faster-builds") and "from-the-cli" not in ids(screen.state)
        await pilot.press("f")  # take faster-builds out of Focus, against the revision on screen
        await wait_for(pilot, lambda: any("changed behind this screen" in n for n in notes(app)),
                       what="the stale notice")
        await answered(pilot, screen, lambda st: "from-the-cli" in ids(st), "the reload")
        # the CLI's edit is kept and the key did nothing
        assert screen.revision != shown and screen.state.focus == ["faster-builds"]
        assert screen.state.pending_edits == 1
        # on the current map the same key works
        await cursor_to(pilot, tree, "faster-builds")
        await pilot.press("f")
        await answered(pilot, screen, lambda st: st.focus == [], "the focus change")
        st = await run_in_thread(pursuit.show, root)
        assert st.pending_edits == 2 and "from-the-cli" in ids(st) and st.focus == []

        # a commit to the root moves the revision too: refused, reloaded, then it works
        await run_in_thread(commit, root, "update: unrelated", {"MEMORY.md": MEMORY + "- `m5` More → []\n"})
        app.clear_notifications()
        await pilot.press("u")
        await wait_for(pilot, lambda: any("changed behind this screen" in n for n in notes(app)),
                       what="the stale notice after a commit")
        await answered(pilot, screen, lambda st: st.head == head(root), "the reload")
        assert screen.state.focus == [] and screen.state.pending_edits == 2
        await pilot.press("u")
        await answered(pilot, screen, lambda st: st.focus == ["faster-builds"], "the undo")


async def test_the_screen_follows_the_journal_live_and_lists_its_keys(proot, cli):
    root = proot
    app = RmtuiApp(root)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_editor(app, pilot)
        r = await run_in_thread(lambda: cli("--headless", "pursuit", "apply", "--op",
                                            json.dumps({"type": "create", "title": "Live one"}),
                                            "--expected-revision", screen.revision, "--root", str(root.path)))
        assert r.code == 0, r.stderr
        await wait_for(pilot, lambda: screen.state is not None and "live-one" in ids(screen.state), timeout=10,
                       what="the journal change to show")
        r = await run_in_thread(lambda: cli("--headless", "pursuit", "checkpoint", "--root", str(root.path)))
        assert r.code == 0, r.stderr
        await wait_for(pilot, lambda: screen.state.pending_edits == 0 and screen.state.head == head(root),
                       timeout=10, what="the checkpoint to show")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        rows = {row.binding_id: row for row in app.screen.rows}
        for binding_id in ("pursuit.create", "pursuit.rename", "pursuit.move", "pursuit.delete", "pursuit.edit_body",
                           "pursuit.focus", "pursuit.undo", "pursuit.redo", "pursuit.checkpoint", "app.screen.pursuit"):
            assert binding_id in rows, binding_id
        assert rows["pursuit.create"].section == "Pursuit editor" and not rows["pursuit.undo"].applies


async def test_move_under_another_parent_and_refusals_are_shown(proot):
    root = proot
    app = RmtuiApp(root, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_editor(app, pilot)
        tree = screen.query_one(PursuitTree)
        await cursor_to(pilot, tree, "old-idea")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the parent prompt")
        await type_text(pilot, "faster-builds")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.query("#pursuit-after"), what="the position prompt")
        await pilot.press("enter")  # empty: last under the new parent
        await answered(pilot, screen, lambda st: by_id(st, "old-idea")["parent_id"] == "faster-builds", "the move")
        assert by_id(screen.state, "old-idea")["level"] == 3 and tree.highlighted_id == "old-idea"
        # each answer is checked as it is given: a parent that does not exist, or one under the
        # Pursuit itself, is refused in the parent prompt, before the position is asked
        await cursor_to(pilot, tree, "faster-builds")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the parent prompt")
        prompt = app.screen
        await pilot.press("end", "ctrl+u")
        await type_text(pilot, "no-such-pursuit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "There is no Pursuit 'no-such-pursuit'" in dialog_error(prompt),
                       what="the unknown parent refused")
        assert app.screen is prompt and not app.screen.query("#pursuit-after")
        await pilot.press("end", "ctrl+u")
        await type_text(pilot, "cache-deps")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "cannot move under itself" in dialog_error(prompt), what="the refusal")
        assert app.screen is prompt and not app.screen.query("#pursuit-after")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="the editor again")
        assert screen.state.pending_edits == 1  # nothing was recorded
        # a position that is not a sibling under the new parent is refused the same way
        await cursor_to(pilot, tree, "old-idea")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the parent prompt")
        await pilot.press("enter")  # keeps faster-builds
        await wait_for(pilot, lambda: app.screen.query("#pursuit-after"), what="the position prompt")
        position = app.screen
        await type_text(pilot, "old-idea")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "old-idea is not a Pursuit under faster-builds" in dialog_error(position),
                       what="the position refused")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="the editor again")
        # a move back to the top level: an empty parent
        await cursor_to(pilot, tree, "old-idea")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the parent prompt")
        await pilot.press("end", "ctrl+u", "enter")
        await wait_for(pilot, lambda: app.screen.query("#pursuit-after"), what="the position prompt")
        await type_text(pilot, "faster-builds")  # right after a named sibling
        await pilot.press("enter")
        await answered(pilot, screen, lambda st: by_id(st, "old-idea")["parent_id"] is None, "the move back")
        top = [q["id"] for q in screen.state.pursuits if q["parent_id"] is None]
        assert top.index("old-idea") == top.index("faster-builds") + 1
        # x discards the pending edits after a yes
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the discard confirmation")
        await pilot.press("y")
        await answered(pilot, screen, lambda st: st.pending_edits == 0, "the discard")
    assert (root.path / "PURSUITS.md").read_text() == PURSUITS


def test_the_watcher_reports_the_editors_journal_only():
    assert classify(".runtime/pursuit-editor/session.json") == EDITOR
    for noise in (".runtime/pursuit-editor/blobs/ab12", ".runtime/pursuit-editor/view-x1/PURSUITS.md",
                  ".runtime/pursuit-editor/signing-key", ".runtime/pursuit-editor/editor.lock"):
        assert classify(noise) is None, noise


async def test_a_damaged_journal_is_reported_and_x_discards_it(proot):
    root = proot
    pursuit.apply(root, {"type": "create", "title": "One"}, expected_revision=pursuit.show(root).revision)
    path = root.runtime / "pursuit-editor" / "session.json"
    doc = json.loads(path.read_text())
    doc["record"]["cursor"] = 0
    path.write_text(json.dumps(doc))
    app = RmtuiApp(root, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        screen = app.screen
        await wait_for(pilot, lambda: isinstance(screen, PursuitScreen) and screen.load_error is not None,
                       what="the load error")
        assert "signature" in str(screen.query_one("#pursuit-status").render())
        assert screen.check_action("create", ()) is None and screen.check_action("discard", ())
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the discard confirmation")
        await pilot.press("y")
        await answered(pilot, screen, lambda st: st.pending_edits == 0, "the discard")
        assert ids(screen.state) == ["faster-builds", "cache-deps", "old-idea"] and screen.load_error is None


async def test_another_sessions_edits_show_whose_they_are_and_x_discards_them(proot):
    root = proot
    pursuit.apply(root, {"type": "create", "title": "Agent idea"}, expected_revision=pursuit.show(root).revision,
                  session="claude-session-7f3a")
    app = RmtuiApp(root, live=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_editor(app, pilot)
        status = str(screen.query_one("#pursuit-status").render())
        assert "1 pending edit by session 'claude-session-7f3a', not this workbench's: x discards them" in status
        assert "can undo" not in status
        # u, c and new edits do not apply (nothing offers them only to refuse with a hash)
        for action in ("undo", "checkpoint", "create", "rename"):
            assert screen.check_action(action, ()) is None, action
        await pilot.press("u")
        await quiet(app, pilot)
        assert not any("sha256" in n for n in notes(app))
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the discard confirmation")
        question = str(app.screen.query_one("#confirm-question").render())
        assert "Drop 1 pending edit of session 'claude-session-7f3a'?" in question
        await pilot.press("y")
        await answered(pilot, screen, lambda st: st.pending_edits == 0, "the discard")
        assert "agent-idea" not in ids(screen.state) and screen.check_action("create", ())
