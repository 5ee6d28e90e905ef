"""Which executor runs a role, from ``rightmemory.toml`` (DESIGN.md section 11).

``[<role>.model]`` (``model_id = "provider:model"``, ``api_base``, ``api_key_env``,
``kwargs``, limits) or ``[<role>.agent_cli]`` (``provider``, ``model``, ``command``).
A role without settings borrows the settings of the first configured writer role;
``retrieve`` never borrows (an unconfigured retrieve stays on the embedding backend).
API keys come only from the environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmtui.engine.config import ROLES, WRITER_ROLES, Config, api_key_from_env
from rmtui.engine.errors import UnavailableError, UsageError
from rmtui.engine.executors.base import ExecutorSettings

API_PROVIDERS = ("anthropic", "openai")
CLI_PROVIDERS = ("claude", "codex")
NEVER_BORROWS = frozenset({"retrieve"})


@dataclass(frozen=True)
class RoleExecutorConfig:
    role: str          # the role that runs
    source_role: str   # whose table the settings come from (differs when borrowed)
    kind: str          # "model" | "agent_cli"
    settings: ExecutorSettings

    @property
    def borrowed(self) -> bool:
        return self.role != self.source_role


def _own(cfg: Config, role: str) -> tuple[str, dict] | None:
    model = cfg.table(f"{role}.model")
    cli = cfg.table(f"{role}.agent_cli")
    model = model if model and model.get("model_id") else None
    cli = cli if cli and cli.get("provider") else None
    if model and cli:
        raise UsageError(f"rightmemory.toml: [{role}.model] and [{role}.agent_cli] are both set; keep one")
    if model:
        return "model", model
    if cli:
        return "agent_cli", cli
    return None


def _settings(cfg: Config, role: str, source: str, kind: str, table: dict) -> ExecutorSettings:
    if kind == "agent_cli":
        return ExecutorSettings(role=role, provider=table["provider"], model=table.get("model") or "",
                                command=table.get("command"),
                                timeout_seconds=cfg.get(f"{source}.model.timeout_seconds"),
                                tool_retries=cfg.get(f"{source}.model.tool_retries"))
    model_id = str(table["model_id"])
    provider, sep, model = model_id.partition(":")
    if not sep or not model or provider not in API_PROVIDERS:
        raise UsageError(f"rightmemory.toml: [{source}.model] model_id {model_id!r} must be "
                         f"'anthropic:<model>' or 'openai:<model>'")
    return ExecutorSettings(
        role=role, provider=provider, model=model,
        api_base=table.get("api_base"),
        api_key=api_key_from_env(provider, table.get("api_key_env")),
        kwargs=dict(table.get("kwargs") or {}),
        max_requests=cfg.get(f"{source}.model.max_requests"),
        tool_retries=cfg.get(f"{source}.model.tool_retries"),
        timeout_seconds=cfg.get(f"{source}.model.timeout_seconds"),
    )


def resolve_role_executor(cfg: Config, role: str) -> RoleExecutorConfig | None:
    """The role's own settings, else (except for retrieve) the first configured writer's."""
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    own = _own(cfg, role)
    if own is not None:
        kind, table = own
        return RoleExecutorConfig(role, role, kind, _settings(cfg, role, role, kind, table))
    if role in NEVER_BORROWS:
        return None
    for writer in WRITER_ROLES:
        found = _own(cfg, writer)
        if found is not None:
            kind, table = found
            return RoleExecutorConfig(role, writer, kind, _settings(cfg, role, writer, kind, table))
    return None


def make_executor(cfg: Config, role: str):
    """Build the configured executor for ``role``; refuse clearly when none is configured."""
    resolved = resolve_role_executor(cfg, role)
    if resolved is None:
        hint = "" if role in NEVER_BORROWS else " or for a writer role such as [update.model]"
        raise UnavailableError(f"no model is configured for role {role!r}: set [{role}.model] model_id "
                               f"or [{role}.agent_cli] provider in rightmemory.toml{hint}")
    return build_executor(resolved.settings)


def build_executor(settings: ExecutorSettings):
    if settings.provider == "anthropic":
        from rmtui.engine.executors.anthropic_exec import AnthropicExecutor

        return AnthropicExecutor(settings)
    if settings.provider == "openai":
        from rmtui.engine.executors.openai_exec import OpenAIExecutor

        return OpenAIExecutor(settings)
    if settings.provider in CLI_PROVIDERS:
        from rmtui.engine.executors.cli_exec import CliExecutor

        return CliExecutor(settings)
    raise UsageError(f"unknown executor provider {settings.provider!r}")
