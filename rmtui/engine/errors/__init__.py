"""Engine errors carry the documented headless exit code (docs/architecture.md, "Errors and exit codes")."""

from __future__ import annotations


class EngineError(Exception):
    """Base class; ``exit_code`` is what the headless front exits with."""

    exit_code = 1
    kind = "failed"

    def __init__(self, message: str, *, details: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def to_json(self) -> dict:
        out: dict[str, object] = {"error": self.kind, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


class OperationFailed(EngineError):
    exit_code = 1
    kind = "failed"


class UsageError(EngineError):
    """Bad input or usage: exit 2."""

    exit_code = 2
    kind = "bad_input"


class ConflictError(EngineError):
    """Conflict or stale state: exit 3."""

    exit_code = 3
    kind = "conflict"


class UnavailableError(EngineError):
    """A dependency (service, model, binary) is unavailable: exit 4."""

    exit_code = 4
    kind = "unavailable"
