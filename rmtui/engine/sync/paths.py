"""The synchronized allow-list (docs/formats.md, "Sync"): the only paths that cross machines.

Segment-wise globs (``*`` never crosses ``/``). Queue and record paths are synchronized but
never repaired: a conflict there is refused, not handed to the sync-reconciler.
"""

from __future__ import annotations

import re

from rmtui.engine.memory.role_table import matches

SYNCED = (
    ".gitignore", "MEMORY.md", "MEMORY_*.md", "PURSUITS.md", "PURSUIT_*.md", "corrections.md",
    "shared_views.toml", "shares.toml",
    "shared_views/*/view.md", "shared_views/*/retriever.md", "shared_views/*/recipe.toml",
    "shared_views/*/question.toml", "shared_views/*/.gitignore",
    "insight_logs/*.md",
    "AGENT_GUIDANCE_INBOX.md",
)
EXCLUDED = ("PURSUIT_RULES.md",)
_HEX64 = "[0-9a-f]{64}"
_QUEUE = re.compile(rf"^update_queue/(lease\.json|candidates/[0-9a-f]{{32}}\.json"
                    rf"|recovery/update-batch-{_HEX64}\.json)$")
_RECORD = re.compile(rf"^update_records/update-batch-{_HEX64}\.json$")


def is_queue_or_record(path: str) -> bool:
    return bool(_QUEUE.match(path) or _RECORD.match(path))


def is_synced(path: str) -> bool:
    """True when ``path`` may cross machines through the upstream."""
    if path in EXCLUDED:
        return False
    return matches(path, SYNCED) or is_queue_or_record(path)
