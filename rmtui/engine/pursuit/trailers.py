"""The checkpoint commit's trailer block and its signature: the block the original writes
(in its order) and the HMAC over the exact parent and tree that lets a later undo trust an
editor commit.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from rmtui.engine.memory.roots import MemoryRoot
from rmtui.engine.pursuit.journal import root_key, signing_key

#: the checkpoint's trailer block, in the original's order (docs/formats.md, "Pursuit editor"); the signature comes last
COMMIT_TRAILERS = {"editor": "RightMemory-Pursuit-Editor", "operation": "RightMemory-Operation",
                   "session": "RightMemory-Pursuit-Session", "action": "RightMemory-Pursuit-Action",
                   "target": "RightMemory-Pursuit-Target", "id_remaps": "RightMemory-Pursuit-ID-Remaps"}
SIGNATURE_TRAILER = "RightMemory-Pursuit-Signature"


def commit_signature(root: MemoryRoot, values: dict[str, str], parent: str, tree: str) -> str:
    """HMAC-SHA256 (the journal's signing key) over the trailer values, the root key, the
    parent and the tree: what authenticates an editor commit for a later undo."""
    payload = {**{k: v for k, v in values.items() if k in COMMIT_TRAILERS}, "root": root_key(root), "parent": parent,
               "tree": tree}
    encoded = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hmac.new(signing_key(root), encoded, hashlib.sha256).hexdigest()


def trailer_values(message: str) -> tuple[str, dict[str, str]]:
    """(the message before its RightMemory trailer paragraphs, {key: value}); a later
    paragraph wins (the supervisor's operation trailer over an earlier one)."""
    names = {v: k for k, v in COMMIT_TRAILERS.items()} | {SIGNATURE_TRAILER: "signature"}
    paragraphs = message.rstrip().split("\n\n")
    values: dict[str, str] = {}
    while len(paragraphs) > 1 and all(line.startswith("RightMemory-") and ": " in line
                                      for line in paragraphs[-1].splitlines()):
        for line in paragraphs.pop().splitlines():
            name, _, value = line.partition(": ")
            if name in names:
                values.setdefault(names[name], value)
    return "\n\n".join(paragraphs), values


def sign_checkpoint(root: MemoryRoot, message: str, parent: str, tree: str) -> str:
    """The supervisor's signer for Pursuit checkpoints: one trailer block with the operation
    in place, signed over the exact parent and tree of the commit being made."""
    text, values = trailer_values(message)
    values.pop("signature", None)
    values.setdefault("id_remaps", "[]")
    block = "\n".join(f"{name}: {values[key]}" for key, name in COMMIT_TRAILERS.items() if key in values)
    return f"{text}\n\n{block}\n{SIGNATURE_TRAILER}: {commit_signature(root, values, parent, tree)}\n"
