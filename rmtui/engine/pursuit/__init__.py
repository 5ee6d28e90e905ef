"""The Pursuit editor: edits of the Pursuit map against an expected revision, kept in a signed
journal until a checkpoint lands them as one commit. Not a cycle: nothing here runs on a
schedule or asks a model; a person (through a front) or a host drives every step.
"""

from __future__ import annotations

from rmtui.engine.pursuit.store import (
    COMMIT_TRAILERS,
    EDITOR_DIR,
    KIND,
    SIGNATURE_TRAILER,
    WRITER,
    apply,
    checkpoint,
    commit_signature,
    discard,
    redo,
    show,
    slug,
    trailer_values,
    undo,
)

__all__ = ["COMMIT_TRAILERS", "EDITOR_DIR", "KIND", "SIGNATURE_TRAILER", "WRITER", "apply", "checkpoint",
           "commit_signature", "discard", "redo", "show", "slug", "trailer_values", "undo"]
