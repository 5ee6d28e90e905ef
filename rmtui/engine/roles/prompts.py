"""Role instructions: ``prompts/<role>.md`` plus the schema reference every role is given."""

from __future__ import annotations

from rmtui.engine.errors import UnavailableError
from rmtui.resources import data_dir

SCHEMA_FILE = "schema.md"


def role_instructions(role: str) -> str:
    """The full instructions a role (or a host's native child) works from."""
    base = data_dir("prompts")
    path = base / f"{role}.md"
    if not path.is_file():
        raise UnavailableError(f"no instructions for role {role!r} ({path} is missing)")
    text = path.read_text(encoding="utf-8").rstrip() + "\n"
    schema = base / SCHEMA_FILE
    if schema.is_file():
        text += "\n---\n\n" + schema.read_text(encoding="utf-8")
    return text
