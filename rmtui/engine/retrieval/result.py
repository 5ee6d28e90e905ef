"""What a retrieval returns, whichever backend produced it (embedding or agent)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RetrieveResult:
    """``results`` are memory items; ``pending`` is evidence not yet reconciled into memory,
    kept in a list of its own (kind ``pending-evidence``) so no reader mistakes it for memory.
    ``text`` renders both, the pending evidence in a separate section after memory."""

    text: str
    results: list[dict]
    commit: str | None
    fingerprint: str
    mode: str  # "hybrid" | "lexical" | "dense"
    notices: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    dense_coverage: float | None = None
    timings: dict = field(default_factory=dict)
    pending: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"results": self.results, "pending": self.pending, "text": self.text, "commit": self.commit,
                "fingerprint": self.fingerprint, "mode": self.mode, "notices": self.notices,
                "skipped": self.skipped, "warnings": self.warnings, "dense_coverage": self.dense_coverage}
