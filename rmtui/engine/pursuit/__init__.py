"""The Pursuit editor: edits of the Pursuit map against an expected revision, kept in a signed
journal until a checkpoint lands them as one commit. Not a cycle: nothing here runs on a
schedule or asks a model; a person (through a front) or a host drives every step.

``journal`` holds the pending edits and the view, ``edits`` the operations, ``trailers`` the
checkpoint commit's trailers and signature, ``sessions`` the typed session behind the
journal's hashed owner, ``store`` the API re-exported here.
"""

from __future__ import annotations

from rmtui.engine.pursuit.edits import slug
from rmtui.engine.pursuit.journal import EDITOR_DIR
from rmtui.engine.pursuit.store import (
    KIND,
    WRITER,
    PursuitCheckpoint,
    PursuitEdit,
    PursuitState,
    apply,
    checkpoint,
    discard,
    redo,
    show,
    undo,
)
from rmtui.engine.pursuit.trailers import COMMIT_TRAILERS, SIGNATURE_TRAILER, commit_signature, trailer_values

__all__ = ["COMMIT_TRAILERS", "EDITOR_DIR", "KIND", "SIGNATURE_TRAILER", "WRITER", "PursuitCheckpoint", "PursuitEdit",
           "PursuitState", "apply", "checkpoint", "commit_signature", "discard", "redo", "show", "slug",
           "trailer_values", "undo"]
