"""``status``: where the root is, what it holds, what waits in the queue, how the cycles stand."""

from __future__ import annotations

from rmtui.engine.cycles.overview import cycles_overview
from rmtui.engine.evidence.queue import EvidenceQueue
from rmtui.engine.gitutil import head_commit
from rmtui.engine.memory.config import CONFIG_FILE, LOCAL_FILE, config_warnings, ignored_keys, read_config
from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.memory.validation import validate_root
from rmtui.engine.roles.executors import config as _executors  # noqa: F401  (tells the config which executor tables are in use)


def root_status(root: MemoryRoot) -> dict:
    """Works on a root whose config the loader refuses: it says why (``config.error``), so a
    person can fix the file, and skips what needs the config (the cycles)."""
    cfg, refused = read_config(root.path, unreadable_ok=True)
    report = validate_root(root.path)
    queue = EvidenceQueue(root)
    try:
        evidence = queue.counts()
    finally:
        queue.close()
    return {
        "root": str(root.path),
        "head": head_commit(root.path),
        "valid": report.ok,
        "errors": len(report.errors),
        "warnings": len(report.warnings),
        "items": report.graph.counts(),
        "evidence": evidence,
        "cycles": [] if refused else [c.to_json() for c in cycles_overview(root)],
        "config": {
            "files": {CONFIG_FILE: str(cfg.path), LOCAL_FILE: str(cfg.local_path)},
            "error": refused,  # why every command that loads the config refuses it (None: it loads)
            "ignored": [] if refused else ignored_keys(cfg),  # keys rightmemory.toml sets that rmtui does not use
            "warnings": [] if refused else config_warnings(cfg),
        },
    }
