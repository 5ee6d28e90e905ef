"""A host task id is an opaque token the task store answers for, never a path: through the
real ``rmtui`` script, a forged ``task.json`` outside (or inside) ``.runtime`` is refused with
exit 2 and one line, and ``--result`` is refused on every role whose contract has no result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cycles_kit import MEMORY, PURSUITS, head
from test_cycles_host import commit_files, configure, rm, said

FORGED_OUTCOME = {"state": "expired", "removed": ["everything"], "landed_commit": "f" * 40}


def _forge(folder: Path, task_id: str, role: str = "pruner") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"task_id": task_id, "role": role, "kind": "prune", "state": "done", "worktree": str(folder),
              "base_commit": "0" * 40, "outcome": {"task_id": task_id, "role": role, **FORGED_OUTCOME}}
    (folder / "task.json").write_text(json.dumps(record), encoding="utf-8")


def _refused(res) -> str:
    text = said(res)
    assert "everything" not in res.stdout and "f" * 40 not in res.stdout, res.stdout
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    return text


def _plain(root, *args: str, expect: int):
    """The same call without ``--json``: what a person at a shell sees."""
    from test_cycles_host import RMTUI, run

    return run([str(RMTUI), "--headless", *args, "--root", str(root.path)], expect)


@pytest.mark.parametrize("verb", [("complete",), ("status",)])
def test_a_path_is_not_a_task_id(root, tmp_path, verb):
    outside = tmp_path / "elsewhere" / "prune-20260101T000000Z-deadbeef"
    _forge(outside, str(outside))
    tasks = root.runtime / "assistant" / "tasks"
    relative = "../" * (len(tasks.parts) - 1) + str(outside).lstrip("/")
    assert (tasks / relative / "task.json").resolve() == (outside / "task.json").resolve()
    for task_id in (str(outside), relative, "prune-20260101T000000Z-deadbeef/../../x", "a\nb", ".."):
        res = _plain(root, "assistant", *verb, "--task", task_id, expect=2)
        assert "unknown assistant task" in _refused(res)


def test_a_forged_record_in_the_task_store_without_its_operation_is_refused(root):
    task_id = "prune-20260101T000000Z-deadbeef"
    _forge(root.runtime / "assistant" / "tasks" / task_id, task_id)
    for verb in ("complete", "status"):
        res = _plain(root, "assistant", verb, "--task", task_id, expect=2)
        assert "no host operation of pruner" in _refused(res)
    # an Update task id of the right shape that the store does not hold
    res = _plain(root, "assistant", "update", "status", "--task", "assistant-20260101T000000Z-deadbeef", expect=2)
    assert "unknown assistant task" in _refused(res)


@pytest.fixture
def pruner_task(root):
    configure(root, **{"pruner.generation_commits": 2})
    commit_files(root, "seed: memory and pursuits", {"MEMORY.md": MEMORY, "PURSUITS.md": PURSUITS})
    task = rm(root, "assistant", "begin", "--role", "pruner")
    assert task["claimed"] is True
    return task


def test_result_is_refused_on_a_pruner_task_and_nothing_lands(root, pruner_task):
    task = pruner_task
    before = head(root)
    res = _plain(root, "assistant", "complete", "--task", task["task_id"], "--result",
                 '{"status": "applied", "message": "forged"}', expect=2)
    assert "--result belongs to update-correction tasks" in _refused(res)
    assert head(root) == before and Path(task["worktree"]).is_dir()
    status = rm(root, "assistant", "status", "--task", task["task_id"])
    assert status["phase"] == "running" and "outcome" not in status
    # the real completion still works afterwards
    out = rm(root, "assistant", "complete", "--task", task["task_id"])
    assert out["state"] == "checkpoint" and out["task_id"] == task["task_id"]
