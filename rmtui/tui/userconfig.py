"""The user's workbench settings: key remaps and the chosen theme.

They belong to the person, not to a memory root, so they live in the user's config
folder (``$XDG_CONFIG_HOME/rmtui/config.toml``, else ``~/.config/rmtui/config.toml``)::

    theme = "rmtui-light"

    [keys]
    "evidence.approve" = "y"
    "main.filter" = "ctrl+f"

A broken file never stops the workbench: problems are reported and defaults used.
Saving the theme rewrites only that key and keeps every comment of the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from rmtui.engine.fsutil import atomic_write_text


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    folder = Path(base).expanduser() if base else Path(os.path.expanduser("~")) / ".config"
    return folder / "rmtui" / "config.toml"


@dataclass
class UserConfig:
    path: Path
    keys: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path | None = None) -> UserConfig:
        path = path or config_path()
        cfg = cls(path=path)
        if not path.exists():
            return cfg
        try:
            doc = tomlkit.parse(path.read_text(encoding="utf-8")).unwrap()
        except (TOMLKitError, UnicodeDecodeError, OSError) as exc:
            cfg.problems.append(f"{path}: unreadable, defaults used ({exc})")
            return cfg
        theme = doc.get("theme")
        if theme is not None:
            if isinstance(theme, str) and theme.strip():
                cfg.theme = theme.strip()
            else:
                cfg.problems.append(f"{path}: 'theme' must be a theme name")
        keys = doc.get("keys", {})
        if not isinstance(keys, dict):
            cfg.problems.append(f"{path}: [keys] must be a table of binding-id = \"key\"")
            keys = {}
        for binding_id, key in keys.items():
            if isinstance(key, str) and key.strip():
                cfg.keys[binding_id] = key.strip()
            else:
                cfg.problems.append(f"{path}: keys.{binding_id} must be a key name such as \"ctrl+f\"")
        for name in sorted(set(doc) - {"theme", "keys"}):
            cfg.problems.append(f"{path}: unknown setting {name!r}")
        return cfg

    def save_theme(self, name: str) -> None:
        """Remember the theme, keeping the rest of the file as the person wrote it."""
        try:
            doc = tomlkit.parse(self.path.read_text(encoding="utf-8")) if self.path.exists() else tomlkit.document()
        except (TOMLKitError, UnicodeDecodeError):
            return  # never overwrite a file the person must fix by hand
        doc["theme"] = name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, tomlkit.dumps(doc))
        self.theme = name
