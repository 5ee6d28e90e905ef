"""The command word of an argv, read the way the CLI's parser reads it.

Its own module because two sides need the same reading: the CLI (which registers only the
named command's parser, and offers ``mcp`` to the fork server) and the MCP fork server
(which serves only ``mcp``). Neither imports the other for it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (after the global options), if any."""
    args = iter(argv)
    for arg in args:
        if arg in ("--root", "--profile"):
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None
