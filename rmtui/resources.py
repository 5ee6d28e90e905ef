"""Where the shipped ``prompts/``, ``skills/``, ``themes/`` and the memory doctrine are at run time.

A wheel carries them inside the package as ``rmtui/_data/<name>``; a source checkout (or an
editable install) keeps them at the repository top level (the doctrine in ``docs/``).
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    if name not in ("prompts", "skills", "themes"):
        raise ValueError(f"unknown data folder {name!r}")
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"rmtui data folder {name!r} is missing from this installation")


DOCTRINE = "memory-doctrine.md"


def doctrine_file() -> Path:
    """``docs/memory-doctrine.md``: the rules the prompts and skills include (docs/memory-doctrine.md)."""
    for candidate in (_PKG / "_data" / DOCTRINE, _PKG.parent / "docs" / DOCTRINE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{DOCTRINE} is missing from this installation")
