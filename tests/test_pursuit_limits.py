"""A Pursuit operation is one flat JSON object of valid text, whatever a front hands in: through
the real ``pursuit apply``, an op nested 60,000 deep, a nested value, a JSON-escaped lone
surrogate in a title or a body is exit 2 with one line; nothing is left
under ``.runtime/pursuit-editor/`` and nothing is recorded."""

from __future__ import annotations

import json

import pytest
from test_cycles_pursuit import proot, rev  # noqa: F401  (fixture)

from rmtui.engine import pursuit
from rmtui.engine.cycles.corrections import parse_result
from rmtui.engine.errors import UsageError

DEEP = '{"type": "create", "title": "x", "parent_id": ' + "[" * 60000 + "]" * 60000 + "}"


def _leftovers(root) -> list[str]:
    folder = root.runtime / "pursuit-editor"
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("view-")) if folder.is_dir() else []


@pytest.mark.parametrize(("op", "said"), [
    (DEEP, "nested too deep"),
    ('{"type": "create", "title": "\\ud800 plans"}', "not valid UTF-8"),
    ('{"type": "create", "title": "plans \\udc80"}', "not valid UTF-8"),
    ('{"type": "edit_body", "id": "faster-builds", "body": "**State:** \\udfff.\\n"}', "not valid UTF-8"),
    ('{"type": "create", "title": ["nested"]}', "not a nested value"),
    ('{"type": "create", "title": {"a": 1}}', "not a nested value"),
    ("[1, 2]", "an operation is an object"),
    ("{not json", "not JSON"),
], ids=["deep", "title-high-surrogate", "title-low-surrogate", "body-surrogate", "list-value", "object-value",
        "not-an-object", "not-json"])
def test_bad_operations_are_one_line_and_leave_nothing(proot, cli, op, said):  # noqa: F811
    root = proot
    before = pursuit.show(root)
    r = cli("--headless", "pursuit", "apply", "--op", op, "--expected-revision", rev(root), "--root", str(root.path))
    assert r.code == 2, (r.stdout[:300], r.stderr[:300])
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[:500]
    assert len(r.stderr.strip().splitlines()) == 1 and said in r.stderr, r.stderr[:500]
    assert _leftovers(root) == []
    after = pursuit.show(root)
    assert after.pending_edits == 0 and after.revision == before.revision


def test_the_engine_refuses_the_same_for_every_front(proot):  # noqa: F811
    root = proot
    for op in ({"type": "create", "title": "\ud800"}, {"type": "edit_body", "id": "faster-builds", "body": "\udc80"},
               {"type": "create", "title": "x", "parent_id": ["faster-builds"]}):
        with pytest.raises(UsageError):
            pursuit.apply(root, op, expected_revision=rev(root))
    assert _leftovers(root) == [] and pursuit.show(root).pending_edits == 0


@pytest.mark.parametrize("session", ["a\u202eb", "a\x9bb", "a\x1bb", "a/b"])
def test_pursuit_sessions_follow_the_one_session_rule(proot, cli, session):  # noqa: F811
    root = proot
    r = cli("--headless", "pursuit", "apply", "--op", json.dumps({"type": "create", "title": "Mine"}),
            "--expected-revision", rev(root), "--session", session, "--root", str(root.path))
    assert r.code == 2 and "session id" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert pursuit.show(root).pending_edits == 0


def test_a_correction_result_nested_too_deep_or_not_text_is_no_result():
    assert parse_result('{"status": "applied", "message": ' + "[" * 60000 + "]" * 60000 + "}") is None
    assert parse_result('{"status": "applied", "message": "\\ud800"}') is None
    assert parse_result('{"status": "applied", "message": "fine"}') == {"status": "applied", "message": "fine"}
