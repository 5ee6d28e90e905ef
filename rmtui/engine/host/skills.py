"""Skills for host agents: ``skills/<name>/SKILL.md`` with ``name``/``description`` front matter,
installed with the doctrine sections they include (docs/memory-doctrine.md)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from rmtui.engine.errors import ConflictError, UsageError
from rmtui.engine.roles.prompts import expand_doctrine
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
    """Copy every skill folder into ``target`` (refusing to overwrite unless ``force``).

    Each skill is copied whole into a temporary folder beside its destination and then
    renamed into place, so an interrupted or failed install never leaves a half-copied
    skill; with ``force`` the old folder is moved aside first and removed only afterwards.
    """
    if not str(target).strip():
        raise UsageError("the skills target folder is empty; name the folder where the host looks for skills")
    dest_root = Path(target).expanduser()
    if dest_root.exists() and not dest_root.is_dir():
        raise UsageError(f"{dest_root} is not a directory")
    skills = list_skills()
    clashes = [s["name"] for s in skills if (dest_root / s["name"]).exists() or (dest_root / s["name"]).is_symlink()]
    if clashes and not force:
        raise ConflictError(f"skills already installed in {dest_root}: {', '.join(clashes)} (use --force)")
    dest_root.mkdir(parents=True, exist_ok=True)
    staged: list[tuple[dict, Path]] = []
    try:
        for s in skills:  # stage everything first: a copy that fails leaves the target untouched
            tmp = Path(tempfile.mkdtemp(prefix=f".{s['name']}.", suffix=".installing", dir=dest_root))
            staged.append((s, tmp))
            shutil.copytree(s["source"], tmp, dirs_exist_ok=True)
            skill = tmp / "SKILL.md"  # the doctrine sections it includes, as the prompts get them
            skill.write_text(expand_doctrine(skill.read_text(encoding="utf-8"), f"{s['name']}/SKILL.md"),
                             encoding="utf-8")
        done = []
        for s, tmp in staged:
            dest = dest_root / s["name"]
            old = None
            if dest.is_symlink() or dest.is_file():
                dest.unlink()
            elif dest.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{s['name']}.", suffix=".replaced", dir=dest_root))
                os.replace(dest, old / "skill")
            os.replace(tmp, dest)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
            done.append({"name": s["name"], "path": str(dest)})
        return done
    finally:
        for _, tmp in staged:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
