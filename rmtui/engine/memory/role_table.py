"""The role table (DESIGN.md section 3): what each role reads, which tools it is granted,
what it may commit, and how its CLI executor is permissioned.

Commit-path rules are not repeated here: they live in :mod:`rmtui.engine.admission`
(``ROLE_ALLOWED_PATHS``), which the supervisor enforces; tools consult the same table so
a role learns of a forbidden write at once instead of at admission.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from rmtui.engine.errors import UsageError

READ = "read"          # read, glob, grep, outline, git_status, git_diff
HISTORY = "history"    # git_log, git_show
WRITE = "write"        # edit, create, delete, rename, git_add, git_commit
DISCARD = "discard"    # discard uncommitted changes of a path
VALIDATE = "validate"  # validate_memory

#: Paths no role may read or write through tools (runtime state, Git internals).
HIDDEN_PREFIXES = (".runtime", ".git")

#: Readable files of the narrow-read roles (fnmatch on repository-relative paths).
GRAPH_READS = ("MEMORY.md", "MEMORY_*.md", "PURSUITS.md", "PURSUIT_*.md")


@dataclass(frozen=True)
class RoleSpec:
    name: str
    reads: tuple[str, ...] | None  # None: everything but .runtime and .git
    grants: frozenset[str]
    writer: bool
    summary: str

    @property
    def prompt_file(self) -> str:
        return f"{self.name}.md"


ROLE_TABLE: dict[str, RoleSpec] = {
    "retrieve": RoleSpec("retrieve", GRAPH_READS, frozenset({READ}), False,
                         "selects memory for a need; must end with a selection"),
    "update": RoleSpec("update", None, frozenset({READ, WRITE, VALIDATE}), True,
                       "reconciles a batch of evidence into Memory; one commit per operation"),
    "update-correction": RoleSpec("update-correction", None, frozenset({READ, WRITE, VALIDATE}), True,
                                  "Update that also records edit feedback in corrections.md"),
    "pruner": RoleSpec("pruner", None, frozenset({READ, HISTORY, WRITE, VALIDATE}), True,
                       "expires stale active memory; prune: commits carry the ledger"),
    "insight": RoleSpec("insight", ("MEMORY.md", "MEMORY_*.md", "insight_logs/*.md"),
                        frozenset({READ, WRITE}), True, "writes one new insight log or nothing"),
    "historian": RoleSpec("historian", None, frozenset({READ, HISTORY}), False,
                          "answers from history; labels answers as historical"),
    "sync-reconciler": RoleSpec("sync-reconciler", None, frozenset({READ, WRITE, DISCARD, VALIDATE}), True,
                                "repairs a conflicting or invalid synchronized state"),
}

#: CLI permission per provider and role kind (read roles are read-only).
CLI_PERMISSIONS = {
    "claude": {"read": "plan", "write": "acceptEdits"},
    "codex": {"read": "read-only", "write": "workspace-write"},
}


def role_spec(role: str) -> RoleSpec:
    spec = ROLE_TABLE.get(role)
    if spec is None:
        raise UsageError(f"unknown role {role!r} (one of {', '.join(ROLE_TABLE)})")
    return spec


def cli_permission(provider: str, role: str) -> str:
    """The permission mode a CLI executor gets for ``role``: read roles never write."""
    table = CLI_PERMISSIONS.get(provider)
    if table is None:
        raise UsageError(f"unknown CLI provider {provider!r} (claude or codex)")
    return table["write" if role_spec(role).writer else "read"]


def is_hidden(rel: str) -> bool:
    first = rel.split("/", 1)[0]
    return any(first == p or first.startswith(p) for p in HIDDEN_PREFIXES)


def may_read(role: str, rel: str) -> bool:
    if is_hidden(rel):
        return False
    reads = role_spec(role).reads
    return reads is None or any(fnmatch.fnmatchcase(rel, p) for p in reads)


def may_write(role: str, rel: str) -> bool:
    """The admission table's verdict on one path (content rules are left to admission)."""
    from rmtui.engine.admission import ROLE_ALLOWED_PATHS, matches

    allowed = ROLE_ALLOWED_PATHS.get(role)
    return bool(allowed) and not is_hidden(rel) and matches(rel, allowed)
