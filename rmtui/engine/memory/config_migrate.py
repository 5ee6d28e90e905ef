"""Migration of a ``rightmemory.toml`` written by an older rmtui: keys the original does not
know but rmtui does move to ``rmtui.toml`` with their comments, keys renamed since take their
new name. Pure rewriting of parsed TOML documents: the loader applies it in memory to a file it
finds in the older layout (and says so), ``config.migrate_config`` writes it, under the lock,
when a person asks for it (``config migrate``, ``init``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.config_schema import (
    CONFIG_FILE,
    LOCAL_FILE,
    LOCAL_SCHEMA,
    ORIGINAL_SCHEMA,
    parse_toml,
    validate_doc,
)

#: Keys older rmtui wrote into rightmemory.toml under another name the original knows.
RENAMED = {
    ("insight", "threshold"): ("insight", "watch", "trigger_points"),
    ("pruner", "revival_grace"): ("pruner", "revival_grace_checkpoints"),
}


def plan_migration(doc: Any) -> list[tuple[tuple[str, ...], str, tuple[str, ...]]]:
    """Keys of rightmemory.toml the original does not know but rmtui does: (path, file, new path)."""
    moves: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = []

    def walk(node: Any, orig: Any, local: Any, path: tuple[str, ...]) -> None:
        for key, value in list(node.items()):
            p = path + (key,)
            o = orig.get(key) if isinstance(orig, dict) else None
            loc = local.get(key) if isinstance(local, dict) else None
            if p == ("retrieve", "backend") and not (value == "embedding" and "embedding" in node):
                moves.append((p, LOCAL_FILE, p))  # "agent", or rmtui's own embedding backend: rmtui's choice
                continue
            if o is not None:
                if isinstance(o, dict) and isinstance(value, dict):
                    walk(value, o, loc, p)
                continue
            if p in RENAMED:
                moves.append((p, CONFIG_FILE, RENAMED[p]))
            elif loc is not None:
                moves.append((p, LOCAL_FILE, p))

    walk(doc, ORIGINAL_SCHEMA, LOCAL_SCHEMA, ())
    return moves


def _container(node: Any) -> Any:
    return node.value if hasattr(node, "value") and not isinstance(node, tomlkit.TOMLDocument) else node


def _pluck(doc: Any, path: tuple[str, ...]) -> tuple[list[str], Any]:
    """Remove ``path`` from ``doc``; answer the comment lines just above it and its item."""
    from tomlkit.items import Comment, Null

    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    container = _container(parent)
    for part_table in getattr(parent, "_tables", ()):  # a table split by out-of-order sub-tables
        if path[-1] in part_table:
            container = part_table.value
    item = parent[path[-1]]
    comments: list[str] = []
    body = getattr(container, "body", None)
    if body is not None and not isinstance(item, dict):
        idx = next((i for i, (k, _) in enumerate(body) if k is not None and k.key == path[-1]), None)
        j = (idx or 0) - 1
        while idx is not None and j >= 0 and body[j][0] is None and isinstance(body[j][1], Comment):
            comments.insert(0, body[j][1].as_string().strip())
            body[j] = (None, Null())
            j -= 1
    del parent[path[-1]]
    return comments, item


def _has(doc: Any, path: tuple[str, ...]) -> bool:
    node = doc
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _put(doc: Any, path: tuple[str, ...], item: Any, comments: list[str]) -> None:
    node = doc
    for depth, part in enumerate(path[:-1]):
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):  # e.g. `retrieve = false` where a table must go
            raise UsageError(f"{LOCAL_FILE}: {'.'.join(path[:depth + 1])} must be a table to hold "
                             f"{'.'.join(path)}")
    if path[-1] in node:
        del node[path[-1]]
    for line in comments:
        node.add(tomlkit.comment(line.lstrip("#").strip()))
    plain = item.unwrap() if hasattr(item, "unwrap") else item
    if isinstance(plain, dict):
        node[path[-1]] = item if isinstance(item, dict) and not hasattr(item, "trivia") else _copy_table(item)
    else:
        node[path[-1]] = item


def _copy_table(item: Any) -> Any:
    """A table moved between documents keeps its comments: re-parse its own text."""
    try:
        return tomlkit.parse(tomlkit.dumps({"_": item}))["_"]
    except Exception:  # noqa: BLE001 - fall back to the values alone
        return item.unwrap()


def _prune_empty(doc: Any, paths: list[tuple[str, ...]]) -> None:
    """Drop tables a move emptied (an empty [update.model] would be a model without model_id)."""
    for path in sorted({p[:i] for p in paths for i in range(1, len(p))}, key=len, reverse=True):
        if _has(doc, path):
            parent = doc
            for part in path[:-1]:
                parent = parent[part]
            node = parent[path[-1]]
            if isinstance(node, dict) and not dict(node):
                del parent[path[-1]]


@dataclass
class Moved:
    """What a migration moves: keys to rmtui.toml, keys renamed in place, keys dropped because
    their new name is already set (old, new)."""

    moved: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.moved or self.renamed or self.dropped)

    def lines(self) -> list[str]:
        """One sentence per kind of change, as the CLI prints them."""
        out = []
        if self.moved:
            out.append(f"moved rmtui-only settings from {CONFIG_FILE} to {LOCAL_FILE}: {', '.join(self.moved)}")
        out += [f"{CONFIG_FILE}: {old} renamed to {new}" for old, new in self.renamed]
        out += [f"{CONFIG_FILE}: {old} dropped ({new} is already set)" for old, new in self.dropped]
        return out

    def summary(self) -> str:
        """The changes in one clause (for the one-line notice of a command that only reads)."""
        parts = []
        if self.moved:
            parts.append(f"rmtui-only settings that belong in {LOCAL_FILE} ({', '.join(self.moved)})")
        parts += [f"{old} (now {new})" for old, new in self.renamed + self.dropped]
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"moved": self.moved, "renamed": [{"from": o, "to": n} for o, n in self.renamed],
                "dropped": [{"from": o, "kept": n} for o, n in self.dropped]}


def apply_moves(doc: Any, local: Any, moves: list[tuple[tuple[str, ...], str, tuple[str, ...]]]) -> Moved:
    """Apply ``moves`` (from :func:`plan_migration`) to the parsed ``doc`` (rightmemory.toml) and
    ``local`` (rmtui.toml) in place; answer what moved."""
    done = Moved()
    for old, file, new in moves:
        comments, item = _pluck(doc, old)
        target = local if file == LOCAL_FILE else doc
        if file == CONFIG_FILE and _has(doc, new):
            done.dropped.append((".".join(old), ".".join(new)))
            continue
        _put(target, new, item, comments)
        if file == LOCAL_FILE:
            done.moved.append(".".join(old))
        else:
            done.renamed.append((".".join(old), ".".join(new)))
    _prune_empty(doc, [m[0] for m in moves])
    return done


def migrated_texts(doc: Any, local: Any, moves: list[tuple[tuple[str, ...], str, tuple[str, ...]]],
                   path: Path) -> tuple[Moved, str, str]:
    """Apply ``moves`` to ``doc`` (rightmemory.toml at ``path``) and ``local`` (rmtui.toml);
    answer what moved and both new texts, each validated as the files will be read."""
    done = apply_moves(doc, local, moves)
    orig_text, local_text = tomlkit.dumps(doc), tomlkit.dumps(local)
    label = f"{path} (migrating rmtui-only keys to {LOCAL_FILE})"
    validate_doc(parse_toml(orig_text, label), CONFIG_FILE, str(path), deferred={})
    validate_doc(parse_toml(local_text, label), LOCAL_FILE, label)
    return done, orig_text, local_text
