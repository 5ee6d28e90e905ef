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

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.config import (
    CONFIG_FILE,
    key_file,
    migrate_config,
    migrate_hint,
    migrated_texts_of,
    plan_texts,
    set_config_value,
    write_migrated,
)
from rmtui.engine.memory.config_migrate import Moved
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.writes.admission import DirtyActiveRoot, dirty_paths
from rmtui.engine.writes.program import program_write
from rmtui.engine.writes.supervisor import Supervisor

KIND = "config"
ROLE = "maintenance"  # the program writer whose paths include the config files


def tracked(root: MemoryRoot, name: str = CONFIG_FILE) -> bool:
    """Whether the root's head holds ``name``."""
    r = subprocess.run(["git", "cat-file", "-e", f"HEAD:{name}"], cwd=root.path, capture_output=True, check=False)
    return r.returncode == 0


def _edited(current: bytes, dotted: str, value: Any, root_path: Path) -> bytes:
    """``current`` with ``dotted`` set, by the loader's own edit, in a scratch folder."""
    with tempfile.TemporaryDirectory(prefix="rmtui-config-") as tmp:
        folder = Path(tmp)
        (folder / CONFIG_FILE).write_bytes(current)
        if plan_texts(folder)[1] is not None:
            raise UsageError(f"the committed {CONFIG_FILE} still holds rmtui-only settings; move them first "
                             f"(`{migrate_hint(root_path)}`), then set the key again")
        set_config_value(folder, dotted, value)
        return (folder / CONFIG_FILE).read_bytes()


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
        _edited(head_bytes, dotted, value, root.path)  # a bad key or value is refused before any operation exists

    def edit(worktree: Path) -> list[str]:
        path = worktree / CONFIG_FILE
        current = path.read_bytes()
        new = _edited(current, dotted, value, root.path)  # on the head the operation began at
        if new != current:
            path.write_bytes(new)
        return [CONFIG_FILE]

    receipt = program_write(root, KIND, ROLE, edit, f"config: set {dotted}", what="config set")
    out.update(operation_id=receipt.operation_id, landed_commit=receipt.landed_commit)
    return out


def migrate(root: MemoryRoot) -> dict:
    """``config migrate``: move an older rightmemory.toml's rmtui-only keys to rmtui.toml.

    An untracked rightmemory.toml is rewritten in place under the config lock; a tracked one
    lands as one supervised commit (rmtui.toml, never tracked, is written beside the root
    first, so a failed landing leaves each key readable from one of the files)."""
    out: dict[str, Any] = {"root": str(root.path), "moved": [], "renamed": [], "dropped": [], "lines": [],
                           "operation_id": None, "landed_commit": None}
    done = plan_texts(root.path)[0]
    if not done:
        return out
    if not tracked(root):
        done = migrate_config(root.path)
        out.update(done.to_json(), lines=done.lines())
        return out
    with Supervisor(root) as sup:
        if CONFIG_FILE in dirty_paths(sup.repo):
            raise DirtyActiveRoot(f"{CONFIG_FILE} has uncommitted changes in the root; land them (`maintain`) or "
                                  "discard them, then migrate again", details={"paths": [CONFIG_FILE]})
    moved: list[Moved] = []

    def edit(worktree: Path) -> list[str]:
        done, orig_text, local_text = migrated_texts_of(worktree / CONFIG_FILE, root.path)
        if orig_text is not None and local_text is not None:
            write_migrated(root.path, None, local_text)
            (worktree / CONFIG_FILE).write_text(orig_text, encoding="utf-8")
        moved[:] = [done]
        return [CONFIG_FILE]

    receipt = program_write(root, KIND, ROLE, edit, "config: move rmtui-only settings to rmtui.toml",
                            what="config migrate")
    done = moved[0] if moved else done
    out.update(done.to_json(), lines=done.lines(), operation_id=receipt.operation_id,
               landed_commit=receipt.landed_commit)
    return out
