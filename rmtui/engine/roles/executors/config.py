"""Which executor runs a role, from the root's configuration (docs/architecture.md, "Executors").

``[<role>.model]`` (``model_id = "provider:model"``, ``api_base``, ``api_key``, ``kwargs``) or
``[<role>.agent_cli]`` (``provider``, ``model``) in rightmemory.toml, as the original has them;
rmtui's own knobs (``api_key_env``, limits, ``command``) sit in the same tables of rmtui.toml.
As in the original, a role other than retrieve without settings of its own uses the first
configured of update, dreamer, insight, reviewer, pruner, sync-reconciler, historian,
shared-view-builder, else the top-level ``[agent_cli] provider``; retrieve has only its own
table or that global provider (an unconfigured retrieve stays on the embedding backend).
"Configured" is the original's test: the table names ``model`` or ``agent_cli``; one that is
broken (both set, no ``model_id``, …) refuses the roles that land on it, and only those.
An ``api_key`` in the table wins over the environment (``status`` warns that it is tracked).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.memory import config as _config_module
from rmtui.engine.memory.config import Config, api_key_from_env
from rmtui.engine.memory.config_schema import EXECUTOR_FALLBACK_ORDER, EXECUTOR_TABLES, GLOBAL_CLI, ORIGINAL_ROLES
from rmtui.engine.memory.role_table import ROLES
from rmtui.engine.roles.executors.base import ExecutorSettings

API_PROVIDERS = ("anthropic", "openai")
CLI_PROVIDERS = ("claude", "codex")
NEVER_BORROWS = frozenset({"retrieve"})


@dataclass(frozen=True)
class RoleExecutorConfig:
    role: str          # the role that runs
    source_role: str   # whose table the settings come from ("agent_cli": the global provider)
    kind: str          # "model" | "agent_cli"
    settings: ExecutorSettings

    @property
    def borrowed(self) -> bool:
        return self.role != self.source_role


def _has_executor(cfg: Config, role: str) -> bool:
    """As the original: the role's table in rightmemory.toml names a model or an agent CLI (a
    broken one included: a role that lands on it is refused, it is not skipped)."""
    section = cfg.data.get(role)
    return isinstance(section, dict) and any(kind in section for kind in EXECUTOR_TABLES)


def _global_provider(cfg: Config, role: str, table: dict) -> str | None:
    """The provider of an agent-CLI path: the role's own, else the top-level one; the
    top-level table's problems refuse only here, as in the original."""
    for key in (GLOBAL_CLI, f"{GLOBAL_CLI}.provider" if not table.get("provider") else None):
        if key and key in cfg.role_problems:
            raise UsageError(cfg.role_problems[key])
    return table.get("provider") or cfg.get("agent_cli.provider")


def _own(cfg: Config, role: str) -> tuple[str, dict] | None:
    if role not in ORIGINAL_ROLES:  # a role only rmtui has keeps its whole executor in rmtui.toml
        model = cfg.table(f"{role}.model")
        cli = cfg.table(f"{role}.agent_cli")
        if model and model.get("model_id"):
            return "model", model
        if cli and (cli.get("provider") or cli.get("model")):
            provider = _global_provider(cfg, role, cli)
            return ("agent_cli", {**cli, "provider": provider}) if provider else None
        return None
    if not _has_executor(cfg, role):
        return None
    if role in cfg.role_problems:  # refused when the role runs, not when the file loads
        raise UsageError(cfg.role_problems[role])
    if "model" in cfg.data[role]:
        return "model", cfg.table(f"{role}.model") or {}
    cli = cfg.table(f"{role}.agent_cli") or {}
    provider = _global_provider(cfg, role, cli)
    if not provider:
        raise UsageError(f"rightmemory.toml: [{role}.agent_cli] names no provider and there is no top-level "
                         "[agent_cli] provider; set one of them (claude or codex)",
                         details={"key": f"{role}.agent_cli.provider"})
    return "agent_cli", {**cli, "provider": provider}


def _knobs(cfg: Config, role: str, source: str) -> str:
    """Whose rmtui.toml limits apply: the source's when rmtui runs that role, else the role's own."""
    return source if source in ROLES else role


def _settings(cfg: Config, role: str, source: str, kind: str, table: dict) -> ExecutorSettings:
    knobs = _knobs(cfg, role, source)
    if kind == "agent_cli":
        # blanks around the provider and model are the original's to strip, not part of the name
        return ExecutorSettings(role=role, provider=str(table["provider"]).strip(),
                                model=str(table.get("model") or "").strip(),
                                command=table.get("command"),
                                timeout_seconds=cfg.get(f"{knobs}.model.timeout_seconds"),
                                tool_retries=cfg.get(f"{knobs}.model.tool_retries"))
    model_id = str(table["model_id"]).strip()
    provider, sep, model = model_id.partition(":")
    if not sep or not model or provider not in API_PROVIDERS:
        raise UsageError(f"rightmemory.toml: [{source}.model] model_id {model_id!r} must be "
                         f"'anthropic:<model>' or 'openai:<model>'")
    api_key = (table.get("api_key") or "").strip() or api_key_from_env(provider, table.get("api_key_env"))
    return ExecutorSettings(
        role=role, provider=provider, model=model,
        api_base=table.get("api_base"),
        api_key=api_key,
        kwargs=dict(table.get("kwargs") or {}),
        max_requests=cfg.get(f"{knobs}.model.max_requests"),
        tool_retries=cfg.get(f"{knobs}.model.tool_retries"),
        timeout_seconds=cfg.get(f"{knobs}.model.timeout_seconds"),
    )


def resolve_role_executor(cfg: Config, role: str) -> RoleExecutorConfig | None:
    """The role's own settings, else (not for retrieve) the first configured role's in the
    original's order, else the global ``[agent_cli] provider``; None when there is nothing."""
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    own = _own(cfg, role)
    if own is not None:
        kind, table = own
        return RoleExecutorConfig(role, role, kind, _settings(cfg, role, role, kind, table))
    if role not in NEVER_BORROWS:
        for source in EXECUTOR_FALLBACK_ORDER:  # the first that names an executor, even a broken one
            found = _own(cfg, source) if source != role and _has_executor(cfg, source) else None
            if found is not None:
                kind, table = found
                return RoleExecutorConfig(role, source, kind, _settings(cfg, role, source, kind, table))
    provider = _global_provider(cfg, role, {})
    if provider:
        table = {"provider": provider, "command": (cfg.table(f"{role}.agent_cli") or {}).get("command")}
        return RoleExecutorConfig(role, "agent_cli", "agent_cli", _settings(cfg, role, role, "agent_cli", table))
    return None


def make_executor(cfg: Config, role: str):
    """Build the configured executor for ``role``; refuse clearly when none is configured."""
    resolved = resolve_role_executor(cfg, role)
    if resolved is None:
        if role in NEVER_BORROWS:
            raise UnavailableError(f"no model is configured for role {role!r}, which never uses another role's "
                                   f"model (as in RightMemory): set [{role}.model] model_id or [{role}.agent_cli] "
                                   f"provider, or a top-level [agent_cli] provider, in rightmemory.toml")
        raise UnavailableError(f"no model is configured for role {role!r}: set [{role}.model] model_id "
                               f"or [{role}.agent_cli] provider, or [update.model] for every role, or a top-level "
                               f"[agent_cli] provider in rightmemory.toml")
    return build_executor(resolved.settings)


def build_executor(settings: ExecutorSettings):
    if settings.provider == "anthropic":
        from rmtui.engine.roles.executors.anthropic_exec import AnthropicExecutor

        return AnthropicExecutor(settings)
    if settings.provider == "openai":
        from rmtui.engine.roles.executors.openai_exec import OpenAIExecutor

        return OpenAIExecutor(settings)
    if settings.provider in CLI_PROVIDERS:
        from rmtui.engine.roles.executors.cli_exec import CliExecutor

        return CliExecutor(settings)
    raise UsageError(f"unknown executor provider {settings.provider!r}")


def _executor_sources(cfg: Config) -> set[str]:
    """The role tables the configured executors of rmtui's roles come from."""
    used: set[str] = set()
    for role in ROLES:
        try:
            resolved = resolve_role_executor(cfg, role)
        except Exception:  # noqa: BLE001 - a bad executor table is reported where it is used
            continue
        if resolved is not None:
            used.add(resolved.source_role)
    return used


_config_module.executor_sources = _executor_sources
