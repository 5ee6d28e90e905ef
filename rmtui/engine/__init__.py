"""The rmtui engine: everything that touches a memory root.

Importing this package must stay cheap: no Textual, no prompt_toolkit, no torch.
Heavy dependencies are imported lazily inside the functions that need them.
"""

from rmtui.engine.errors import (
    ConflictError,
    EngineError,
    OperationFailed,
    UnavailableError,
    UsageError,
)

__all__ = ["ConflictError", "EngineError", "OperationFailed", "UnavailableError", "UsageError"]
