"""A reader that fails the way a bug would, for the workbench's error-dialog tests.

The error dialog names the innermost frame (``file:line in function``), and its snapshot
shows that text. Kept in a module of its own so the line it raises on does not move when
tests are added to the files that use it.
"""

from __future__ import annotations


# Stands in for ``rmtui.tui.readers.last_commit``: a plain exception, not an EngineError; it
# raises on the line after the ``def`` (the tests compute the line they expect from that).
def broken_last_commit(root, file, start, end, backing=None):
    raise RuntimeError("blame exploded")
