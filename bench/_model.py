"""Settings the benches write into a root's ``rmtui.toml``: the embedding model they measure
with (``--model``), the static first pass. One writer, so every bench sets them the same way."""

from __future__ import annotations

from pathlib import Path

import tomlkit


def set_setting(root_path: Path, section: str, key: str, value: str) -> None:
    """``[section] key = value`` in the root's ``rmtui.toml``, the rest of the file kept."""
    path = root_path / "rmtui.toml"
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    doc.setdefault(section, tomlkit.table())[key] = value
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")


def use_model(root_path: Path, model: str | None) -> None:
    """Embed the root with ``model`` (``embedding.model``; None keeps the default)."""
    if model:
        set_setting(root_path, "embedding", "model", model)


def add_model_option(ap) -> None:
    """The ``--model`` option of a quality bench."""
    ap.add_argument("--model", help="embedding.model the roots are embedded with, e.g. all-mpnet-base-v2 "
                                    "(default: rmtui's default model)")


def check_model_option(ap, args) -> None:
    """``--model`` measures a whole index with that model's own second stage: the cold bench
    and an earlier fit's weights (which are MiniLM's) do not combine with it."""
    if args.model and (args.cold or args.compare_weights):
        ap.error("--model measures the whole index with the default second stage of that model; "
                 "not with --cold or --compare-weights")
