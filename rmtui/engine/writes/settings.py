"""``config set`` of a tracked file goes through the supervisor (docs/architecture.md, "Admission and publication").

``rightmemory.toml`` is memory-root content like any other tracked file: editing it in place
would put an unadmitted change in the active root, and a broken one would stop every
agent's ``status`` and ``submit``. When the root tracks it, a key of it is set by a small
program operation: a worktree at the head, the loader's own edit there, one commit, the
same admission (which parses the file as the loader would) and a compare-and-swap
publication. ``rmtui.toml`` (never tracked) and an untracked ``rightmemory.toml`` are
still edited in place.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import git

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.memory.config import CONFIG_FILE, key_file, plan_texts, set_config_value
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.admission import DirtyActiveRoot, StaleBase, dirty_paths
from rmtui.engine.writes.supervisor import IDENTITY, Supervisor

KIND = "config"
ROLE = "maintenance"  # the program writer whose paths include the config files
ATTEMPTS = 5


def tracked(root: MemoryRoot, name: str = CONFIG_FILE) -> bool:
    """Whether the root's head holds ``name``."""
    r = subprocess.run(["git", "cat-file", "-e", f"HEAD:{name}"], cwd=root.path, capture_output=True, check=False)
    return r.returncode == 0


def _edited(current: bytes, dotted: str, value: Any) -> bytes:
    """``current`` with ``dotted`` set, by the loader's own edit, in a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="rmtui-config-") as tmp:
        folder = Path(tmp)
        (folder / CONFIG_FILE).write_bytes(current)
        if plan_texts(folder)[1] is not None:
            raise UsageError(f"the committed {CONFIG_FILE} still holds rmtui-only settings; land its migration "
                             "first (`maintain begin`, run any rmtui command there, `maintain land`)")
        set_config_value(folder, dotted, value)
        return (folder / CONFIG_FILE).read_bytes()


def _settle(sup: Supervisor, op_id: str, why: str) -> None:
    """A refused ``config set`` must not land later by ``recover``: fail its operation, unless
    its commit is already on the branch (then recovery only finishes the record)."""
    op = sup.store.get(op_id)
    if op.final:
        return
    if op.phase == "prepared" and op.candidate_commit and sup._is_ancestor(op.candidate_commit, sup.head()):
        return
    sup.fail(op, why)


def set_value(root: MemoryRoot, dotted: str, value: Any) -> dict:
    """Set one key: in place for an untracked file, else through a supervised operation."""
    file = key_file(dotted)
    out: dict[str, Any] = {"key": dotted, "value": value, "file": file, "operation_id": None, "landed_commit": None}
    if file != CONFIG_FILE or not tracked(root):
        set_config_value(root.path, dotted, value)
        return out
    with Supervisor(root) as sup:
        if CONFIG_FILE in dirty_paths(sup.repo):
            raise DirtyActiveRoot(f"{CONFIG_FILE} has uncommitted changes in the root; land them (`maintain`) or "
                                  "discard them, then set the key again", details={"paths": [CONFIG_FILE]})
        head_bytes = subprocess.run(["git", "cat-file", "blob", f"HEAD:{CONFIG_FILE}"], cwd=root.path,
                                    capture_output=True, check=True).stdout
        _edited(head_bytes, dotted, value)  # a bad key or value is refused before any operation exists
        last: Exception | None = None
        for _ in range(ATTEMPTS):
            op = sup.begin(KIND, ROLE)
            try:
                path = Path(op.worktree) / CONFIG_FILE
                current = path.read_bytes()
                new = _edited(current, dotted, value)
                message = f"config: set {dotted}"
                if new != current:
                    path.write_bytes(new)
                    wt = git.Repo(op.worktree)
                    try:
                        wt.git.add("--", CONFIG_FILE)
                        wt.git.commit("-q", "-m", message, env=IDENTITY)
                    finally:
                        wt.close()
                receipt = sup.finish(op, summary=message, message=message)
            except StaleBase as exc:  # someone changed the file meanwhile: set it again on theirs
                sup.fail(sup.store.get(op.id), str(exc))
                last = exc
                continue
            except BaseException as exc:
                _settle(sup, op.id, f"{type(exc).__name__}: {exc}")
                raise
            out.update(operation_id=receipt.operation_id, landed_commit=receipt.landed_commit)
            return out
    raise ConflictError(f"config set kept racing with other writers: {last}")
