"""Role instructions: ``prompts/<role>.md`` with the doctrine sections it includes, plus the
schema reference every role is given (docs/memory-doctrine.md)."""

from __future__ import annotations

import re

from rmtui.engine.errors import UnavailableError
from rmtui.resources import data_dir, doctrine_file

SCHEMA_FILE = "schema.md"
#: ``<!-- doctrine: <section> -->`` on a line of its own includes that doctrine section's body.
INCLUDE_RE = re.compile(r"^<!-- doctrine: ([a-z0-9-]+) -->[ \t]*$", re.MULTILINE)


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.strip().lower()).strip("-")


def doctrine_sections() -> dict[str, str]:
    """The doctrine's ``## `` sections: name -> body (the text up to the next ``## `` heading).

    A ``## `` line inside a fenced example is the example's text, not a section."""
    try:
        text = doctrine_file().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnavailableError(f"the memory doctrine cannot be read: {exc}") from None
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced:
            current = sections.setdefault(slug(line[3:].strip()), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(body).strip() for name, body in sections.items()}


def expand_doctrine(text: str, where: str = "text") -> str:
    """``text`` with every include line replaced by its doctrine section; an unknown name is an error."""
    if not INCLUDE_RE.search(text):
        return text
    sections = doctrine_sections()

    def body(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in sections:
            raise UnavailableError(f"{where} includes doctrine section {name!r}, which docs/memory-doctrine.md "
                                   f"does not have (it has: {', '.join(sections)})")
        return sections[name]

    return INCLUDE_RE.sub(body, text)


def role_instructions(role: str) -> str:
    """The full instructions a role (or a host's native child) works from."""
    base = data_dir("prompts")
    path = base / f"{role}.md"
    if not path.is_file():
        raise UnavailableError(f"no instructions for role {role!r} ({path} is missing)")
    text = expand_doctrine(path.read_text(encoding="utf-8"), path.name).rstrip() + "\n"
    schema = base / SCHEMA_FILE
    if schema.is_file():
        text += "\n---\n\n" + schema.read_text(encoding="utf-8")
    return text
