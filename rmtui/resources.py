"""Where the shipped ``prompts/``, ``skills/`` and ``themes/`` are at run time.

A wheel carries them inside the package as ``rmtui/_data/<name>``; a source checkout (or an
editable install) keeps them at the repository top level.
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
