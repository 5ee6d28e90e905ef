"""``status``: where the root is, what it holds, what waits in the queue."""

from __future__ import annotations

from rmtui.engine.gitutil import head_commit
from rmtui.engine.queue import EvidenceQueue
from rmtui.engine.roots import MemoryRoot
from rmtui.engine.validation import validate_root


def root_status(root: MemoryRoot) -> dict:
    root.config()  # a malformed rightmemory.toml is reported, not hidden behind "valid"
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
        "errors": len(report.issues),
        "items": report.graph.counts(),
        "evidence": evidence,
    }
