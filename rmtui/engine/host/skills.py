"""Skills for host agents: ``skills/<name>/SKILL.md`` with ``name``/``description`` front matter."""

from __future__ import annotations

import shutil
from pathlib import Path

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.resources import data_dir


def _front_matter(text: str) -> dict[str, str]:
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 4)
    if end < 0:
        return {}
    out: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def list_skills() -> list[dict]:
    out = []
    for d in sorted(p for p in data_dir("skills").iterdir() if p.is_dir()):
        f = d / "SKILL.md"
        if not f.is_file():
            continue
        meta = _front_matter(f.read_text(encoding="utf-8"))
        if not meta.get("name") or not meta.get("description"):
            raise UsageError(f"{f} lacks name/description front matter")
        out.append({"name": meta["name"], "description": meta["description"], "source": str(d)})
    return out


def install_skills(target: str | Path, *, force: bool = False) -> list[dict]:
    """Copy every skill folder into ``target`` (refusing to overwrite unless ``force``)."""
    dest_root = Path(target).expanduser()
    if dest_root.exists() and not dest_root.is_dir():
        raise UsageError(f"{dest_root} is not a directory")
    skills = list_skills()
    clashes = [s["name"] for s in skills if (dest_root / s["name"]).exists()]
    if clashes and not force:
        raise ConflictError(f"skills already installed in {dest_root}: {', '.join(clashes)} (use --force)")
    dest_root.mkdir(parents=True, exist_ok=True)
    done = []
    for s in skills:
        dest = dest_root / s["name"]
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(s["source"], dest)
        done.append({"name": s["name"], "path": str(dest)})
    return done
