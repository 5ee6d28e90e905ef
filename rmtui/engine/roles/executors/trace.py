"""Optional debug trace of a role run: one JSONL file under ``.runtime/debug/``.

Each line is one event (start, user, model_reply, tool_call, tool_output, failure,
finish) with a timestamp. Tracing is off unless ``[debug] trace = true`` or the
``RMTUI_DEBUG_TRACE`` environment variable is set; it never changes what a role does.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any


class DebugTrace:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def disabled(cls) -> DebugTrace:
        return cls(None)

    @classmethod
    def for_role(cls, runtime: Path, role: str, *, enabled: bool) -> DebugTrace:
        if not (enabled or os.environ.get("RMTUI_DEBUG_TRACE")):
            return cls.disabled()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        return cls(Path(runtime) / "debug" / f"{stamp}-{role}-{uuid.uuid4().hex[:8]}.jsonl")

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def event(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"t": time.time(), "event": kind, **fields}, ensure_ascii=False, default=str)
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
