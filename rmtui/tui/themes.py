"""Workbench themes from ``themes/*.tcss``.

A theme file declares Textual theme variables and nothing else (``$primary: #4fb3bf;``),
so widget CSS only ever names variables (``$primary``, ``$surface``, ``$diff-added``) and a
theme is the single place colours are chosen. The file name is the theme name. Known
variables become :class:`textual.theme.Theme` fields; the rest are extra variables that
our widget CSS uses (with defaults from :data:`EXTRA_DEFAULTS`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

DEFAULT_THEME = "rmtui-dark"

_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground",
           "background", "surface", "panel", "boost")
_DECL_RE = re.compile(r"^\s*\$([A-Za-z][A-Za-z0-9-]*)\s*:\s*([^;]+?)\s*;\s*$")
_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)

#: Variables our widget CSS relies on, taken from a theme colour when a file leaves them out.
EXTRA_DEFAULTS: dict[str, str | tuple[str, str]] = {
    "diff-added": "success",
    "diff-removed": "error",
    "diff-hunk": "accent",
    "diff-file": "primary",
    "kind-badge": "secondary",
    "uncertain": "warning",
    "pane-border": ("panel-lighten-2", "panel-darken-2"),  # (dark theme, light theme)
    "pane-focus": "accent",  # the border and title of the pane that has focus
}


@dataclass
class ThemeSet:
    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.themes]


def parse_theme(name: str, text: str) -> Theme:
    """Build a Theme from variable declarations; raises ValueError naming the bad line."""
    values: dict[str, str] = {}
    body = _COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for lineno, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        m = _DECL_RE.match(line)
        if not m:
            raise ValueError(f"line {lineno}: expected `$variable: value;`")
        values[m.group(1)] = m.group(2)
    if "primary" not in values:
        raise ValueError("no $primary colour")
    kwargs: dict = {}
    variables: dict[str, str] = {}
    for key, value in values.items():
        attr = key.replace("-", "_")
        if key == "dark":
            if value not in ("true", "false"):
                raise ValueError("$dark must be true or false")
            kwargs["dark"] = value == "true"
        elif attr in _FIELDS:
            try:
                Color.parse(value)
            except ColorParseError as exc:
                raise ValueError(f"${key}: {exc}") from None
            kwargs[attr] = value
        else:
            variables[key] = value
    theme = Theme(name=name, variables=variables, **kwargs)
    missing = [k for k in EXTRA_DEFAULTS if k not in variables]
    if missing:
        generated = theme.to_color_system().generate()
        for key in missing:
            default = EXTRA_DEFAULTS[key]
            source = default if isinstance(default, str) else default[0] if theme.dark else default[1]
            variables[key] = generated[source]
    return theme


def load_themes(directory: Path | None = None) -> ThemeSet:
    """Every ``*.tcss`` theme of ``directory`` (the shipped ``themes/`` by default)."""
    if directory is None:
        from rmtui.resources import data_dir

        try:
            directory = data_dir("themes")
        except FileNotFoundError as exc:
            return ThemeSet(problems=[str(exc)])
    out = ThemeSet()
    for path in sorted(Path(directory).glob("*.tcss")):
        try:
            out.themes.append(parse_theme(path.stem, path.read_text(encoding="utf-8")))
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            out.problems.append(f"theme {path.name}: {exc}")
    return out
