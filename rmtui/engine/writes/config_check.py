"""Config files as the loader reads them, for admission and ``validate`` (no Git needed here)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from rmtui.engine.errors import EngineError
from rmtui.engine.memory.graph import Issue
from rmtui.engine.memory.role_table import CONFIGS


def config_issues(folder: Path | str, names: tuple[str, ...] | list[str] = CONFIGS) -> list[Issue]:
    """Problems the config loader would have with ``names`` (those present) in ``folder``.

    ``rightmemory.toml`` goes through the loader's own check (schema, values, encoding);
    ``shared_views.toml``, which rmtui does not read yet, must at least be UTF-8 TOML.
    """
    from rmtui.engine.memory.config import CONFIG_FILE, validate_config_text

    issues: list[Issue] = []
    for name in names:
        path = Path(folder) / name
        if name not in CONFIGS or not (path.exists() or path.is_symlink()):
            continue
        if path.is_symlink() or not path.is_file():
            issues.append(Issue(name, 1, "config", "not a regular file"))
            continue
        raw = path.read_bytes()
        try:
            if name == CONFIG_FILE:
                validate_config_text(raw, name)
            else:
                tomllib.loads(raw.decode("utf-8"))
        except EngineError as exc:
            issues.append(Issue(name, 1, "config", exc.message.removeprefix(f"{name}: ")))
        except UnicodeDecodeError:
            issues.append(Issue(name, 1, "config", "not valid UTF-8"))
        except tomllib.TOMLDecodeError as exc:
            issues.append(Issue(name, 1, "config", f"malformed TOML: {exc}"))
    return issues
