"""The one role table (docs/architecture.md, "Roles"): what each role reads, which tools it
is granted, which paths it may commit, and how its CLI executor is permissioned.

Everything else derives from it: the config's role names, the executor inheritance order,
admission's allowed paths (:mod:`rmtui.engine.writes.admission` enforces them) and the
role tools (which consult the same table so a role learns of a forbidden write at once).
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

# Path classes (segment-wise globs on repository-relative paths; ``*`` never crosses ``/``).
MEMORY_GRAPH = ("MEMORY.md", "MEMORY_*.md")
PURSUIT = ("PURSUITS.md", "PURSUIT_*.md")
CORRECTIONS = ("corrections.md",)
GUIDANCE = ("AGENT_GUIDANCE_INBOX.md",)
INSIGHT = ("insight_logs/*.md",)
QUEUE = ("update_queue/*", "update_queue/*/*")
RECORDS = ("update_records/*.json",)
CONFIGS = ("rightmemory.toml", "shared_views.toml")
SHARED_VIEW_FILES = ("shared_views/*/view.md", "shared_views/*/recipe.toml", "shared_views/*/question.toml",
                     "shared_views/*/retriever.md", "shared_views/*/.gitignore")


@dataclass(frozen=True)
class RoleSpec:
    name: str
    reads: tuple[str, ...] | None  # None: everything but .runtime and .git
    grants: frozenset[str]
    commits: tuple[str, ...]  # paths it may commit; empty for read roles
    summary: str

    @property
    def writer(self) -> bool:
        return bool(self.commits)

    @property
    def prompt_file(self) -> str:
        return f"{self.name}.md"


ROLE_TABLE: dict[str, RoleSpec] = {
    "retrieve": RoleSpec("retrieve", GRAPH_READS, frozenset({READ}), (),
                         "selects memory for a need; must end with a selection"),
    # Pursuit: reference repair only (REFERENCE_REPAIR_ONLY)
    # never the guidance inbox: a person folds it into memory (maintenance), Update leaves it
    "update": RoleSpec("update", None, frozenset({READ, WRITE, VALIDATE}), MEMORY_GRAPH + PURSUIT,
                       "reconciles a batch of evidence into Memory; one commit per operation"),
    "update-correction": RoleSpec("update-correction", None, frozenset({READ, WRITE, VALIDATE}),
                                  MEMORY_GRAPH + PURSUIT + CORRECTIONS,
                                  "Update that also records edit feedback in corrections.md"),
    "pruner": RoleSpec("pruner", None, frozenset({READ, HISTORY, WRITE, VALIDATE}), MEMORY_GRAPH,
                       "expires stale active memory; prune: commits carry the ledger"),
    "insight": RoleSpec("insight", ("MEMORY.md", "MEMORY_*.md", "insight_logs/*.md"),
                        frozenset({READ, WRITE}), INSIGHT, "writes one new insight log or nothing"),
    "historian": RoleSpec("historian", None, frozenset({READ, HISTORY}), (),
                          "answers from history; labels answers as historical"),
    "sync-reconciler": RoleSpec("sync-reconciler", None, frozenset({READ, WRITE, DISCARD, VALIDATE}),
                                MEMORY_GRAPH + PURSUIT + CORRECTIONS + GUIDANCE + INSIGHT + QUEUE + CONFIGS[1:],
                                "repairs a conflicting or invalid synchronized state"),
}

#: Model roles, in table order (the names ``rightmemory.toml`` accepts as role tables).
ROLES = tuple(ROLE_TABLE)
#: Model roles that commit; a role without its own executor borrows the first configured one.
WRITER_ROLES = tuple(name for name, spec in ROLE_TABLE.items() if spec.writer)

#: Writers that are the program or a person rather than a model role.
PROGRAM_WRITERS: dict[str, tuple[str, ...]] = {
    "maintenance": MEMORY_GRAPH + PURSUIT + CORRECTIONS + GUIDANCE + INSIGHT + CONFIGS,
    "pursuit-editor": PURSUIT + MEMORY_GRAPH,  # Memory: reference repair only
    "guidance": GUIDANCE,
    "program": RECORDS + QUEUE,
    # connections (an appended MF#/MQ# heading, shared_views.toml) and provider view definitions
    "shared-views": ("MEMORY.md", "shared_views.toml") + SHARED_VIEW_FILES,
}

#: Which paths every writer may commit: the roles' own, then the program's writers.
ALLOWED_PATHS: dict[str, tuple[str, ...]] = {
    **{name: spec.commits for name, spec in ROLE_TABLE.items() if spec.writer},
    **PROGRAM_WRITERS,
}
#: Writers that may touch Pursuit (resp. Memory) only to repair references to deleted items.
REFERENCE_REPAIR_ONLY = {"update": PURSUIT, "update-correction": PURSUIT, "pursuit-editor": MEMORY_GRAPH}
#: Writers exempt from graph validation of the final tree (still path-checked).
VALIDATION_EXEMPT = {"insight"}


def matches(path: str, patterns: tuple[str, ...]) -> bool:
    """Segment-wise glob match: ``*`` never crosses ``/`` (``MEMORY_*.md`` is top level only)."""
    parts = path.split("/")
    for pattern in patterns:
        pp = pattern.split("/")
        if len(pp) == len(parts) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, pp, strict=True)):
            return True
    return False


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
    """The table's verdict on one path (content rules are left to admission)."""
    allowed = ALLOWED_PATHS.get(role)
    if not allowed or is_hidden(rel):
        return False
    return matches(rel, allowed)
